import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecRunner } from '@kube-router/netfilter';
import { EGRESS_MAP, INGRESS_MAP, peerPodsSetName } from './names.js';
import { compileNetworkPolicies, podChainName, policyChainName } from '@kube-router/netpol';
import type { NamespaceLike, NetworkPolicySpecLike, PodLike } from '@kube-router/netpol';
import { createNetpolNftablesPlugin } from './plugin.js';
import type { TestEnforcer } from './testing/enforcer.js';
import { mismatches, periodicSyncMismatches } from '@kube-router/testkit/netpol-conformance';
import { missingForRealTests, startWorld } from './testing/world.js';
import type { World } from './testing/world.js';

const missing = missingForRealTests();

describe.skipIf(missing !== undefined)(`netpol-nftables against the kernel${missing ? ` (skipped: ${missing})` : ''}`, () => {
  let world: World;
  let enforcer: TestEnforcer;

  const enforce = async (ok = true) => {
    const outcome = await enforcer.syncNow();
    if (ok && !outcome.ok) throw outcome.error;
    return outcome;
  };

  const failuresCounter = async () =>
    (await enforcer.metrics.registry.getSingleMetric('kube_router_controller_sync_failures_total')?.get())?.values.find(
      (value) => value.labels.controller === 'netpol',
    )?.value ?? 0;

  beforeAll(async () => {
    world = await startWorld();
    await Promise.all([
      world.lab.addPod({ namespace: 'web', name: 'server', labels: { app: 'server' }, ports: [{ port: 80 }] }),
      world.lab.addPod({ namespace: 'web', name: 'client', labels: { app: 'client' }, ports: [{ port: 80 }] }),
      world.lab.addPod({ namespace: 'other', name: 'client', labels: { app: 'client' }, ports: [{ port: 80 }] }),
    ]);
    enforcer = await world.start({ scheduler: false });
    await enforce();
  }, 90_000);

  afterAll(async () => {
    await world?.close();
  }, 60_000);

  it('fails the targets of a policy the kernel refuses closed, enforces the others, counts the failure and stays live', async () => {
    // The policy's peer set already exists with room for one element: the kernel refuses the second (ENFILE). The
    // set is named by the rule's selectors, as the agent's compile of the cluster names them.
    const spec: NetworkPolicySpecLike = {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: 'client' } } }] }],
    };
    const model = compileNetworkPolicies({
      nodeName: world.lab.nodeName,
      pods: world.api.list('v1', 'Pod') as PodLike[],
      namespaces: world.api.list('v1', 'Namespace') as NamespaceLike[],
      policies: [{ metadata: { namespace: 'web', name: 'clash' }, spec }],
    });
    const podsKey = model.policies[0]?.ingress.rules[0]?.peers.podsKey;
    // Every namespace, pods labelled app=client: the selection names the set, not the policy.
    expect(podsKey).toBe('namespaces{}/pods{"app"="client"}');
    const clash = peerPodsSetName('ingress', podsKey as string, 'ipv4');
    await world.inNode('nft', ['add', 'set', 'ip', 'kube-router-filter-ipv4', clash, '{ type ipv4_addr; size 1; }']);
    world.policy('web', 'clash', spec);
    world.policy('web', 'client-from-server', {
      podSelector: { matchLabels: { app: 'client' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'server' } } }] }],
    });
    const failuresBefore = await failuresCounter();
    const outcome = await enforce(false);
    expect(outcome.ok).toBe(false);
    expect(String(outcome.error)).toContain('policy/web/clash');
    expect(String(outcome.error)).toMatch(/Could not process rule: Too many open files in system/);
    expect(String(outcome.error)).not.toContain('client-from-server');
    expect(await failuresCounter()).toBe(failuresBefore + 1);
    expect(enforcer.health.livenessChecks().every((check) => check.ok)).toBe(true);
    expect(
      await mismatches(world.lab, [
        // web/server fails closed: not even the client its policy would allow gets in, in either family.
        { from: 'web/client', to: 'web/server', port: 80, open: false },
        { from: 'web/client', to: 'web/server', port: 80, family: 6, open: false },
        // The other policy is enforced.
        { from: 'web/server', to: 'web/client', port: 80, open: true },
        { from: 'other/client', to: 'web/client', port: 80, open: false },
      ]),
    ).toEqual([]);
    type EventLike = { reason?: string; involvedObject?: { name?: string } };
    await expect
      .poll(() => (world.api.list('v1', 'Event', 'web') as EventLike[]).some((e) => e.reason === 'NetworkPolicyNotProgrammed' && e.involvedObject?.name === 'clash'))
      .toBe(true);

    world.deletePolicy('web', 'clash');
    world.deletePolicy('web', 'client-from-server');
    await enforce();
    // The clashing set had our name and is no longer wanted: it is gone.
    expect(await world.inNode('nft', ['list', 'table', 'ip', 'kube-router-filter-ipv4'])).not.toContain(clash);
    expect(await mismatches(world.lab, [{ from: 'web/client', to: 'web/server', port: 80, open: true }])).toEqual([]);
  });

  it('programs both tables when an isolated local pod has no IPv6 address', async () => {
    // An API object only (no sandbox): a local pod with an IPv4 address alone, the only target of its policy.
    world.api.create({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { namespace: 'web', name: 'v4-only', labels: { app: 'v4-only' } },
      spec: { nodeName: world.lab.nodeName, containers: [{ name: 'c', image: 'x' }] },
      status: { phase: 'Running', podIP: '10.250.0.9', podIPs: [{ ip: '10.250.0.9' }] },
    } as never);
    world.policy('web', 'v4-only', { podSelector: { matchLabels: { app: 'v4-only' } }, ingress: [] });
    world.policy('web', 'server-isolated', { podSelector: { matchLabels: { app: 'server' } }, ingress: [] });
    const outcome = await enforce(false);
    expect(outcome.ok ? undefined : String(outcome.error)).toBeUndefined();
    const ipv6 = await world.inNode('nft', ['list', 'table', 'ip6', 'kube-router-filter-ipv6']);
    expect(ipv6).toContain(podChainName('web/server', 'ingress', 'ipv6'));
    expect(ipv6).not.toContain(podChainName('web/v4-only', 'ingress', 'ipv6'));
    expect(
      await mismatches(world.lab, [
        { from: 'web/client', to: 'web/server', port: 80, open: false },
        { from: 'web/client', to: 'web/server', port: 80, family: 6, open: false },
      ]),
    ).toEqual([]);
    world.deletePolicy('web', 'v4-only');
    world.deletePolicy('web', 'server-isolated');
    world.api.delete('v1', 'Pod', 'web', 'v4-only');
    await enforce();
  });

  it('enforces a rule whose port ranges overlap', async () => {
    world.policy('web', 'overlapping-ports', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ ports: [{ port: 70, endPort: 90 }, { port: 80 }, { port: 85, endPort: 95 }] }],
    });
    await enforce();
    expect(await mismatches(world.lab, [{ from: 'other/client', to: 'web/server', port: 80, open: true }])).toEqual([]);
    world.deletePolicy('web', 'overlapping-ports');
    await enforce();
  });

  it('repairs drift on a periodic sync: a removed dispatch entry and a flushed pod chain come back', async () => {
    world.policy('web', 'server-from-client', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }] }],
    });
    await enforce();
    const server = world.lab.pod('web/server');
    expect(await mismatches(world.lab, [{ from: 'other/client', to: 'web/server', port: 80, open: false }])).toEqual([]);
    await world.inNode('nft', ['delete', 'element', 'ip', 'kube-router-filter-ipv4', INGRESS_MAP, `{ ${server.ipv4} }`]);
    await world.inNode('nft', ['flush', 'chain', 'ip6', 'kube-router-filter-ipv6', podChainName('web/server', 'ingress', 'ipv6')]);
    expect(
      await mismatches(world.lab, [
        { from: 'other/client', to: 'web/server', port: 80, open: true },
        { from: 'other/client', to: 'web/server', port: 80, family: 6, open: true },
      ]),
    ).toEqual([]);
    expect((await enforcer.controller.runObservedSync('periodic')).ok).toBe(true);
    expect(
      await mismatches(world.lab, [
        { from: 'other/client', to: 'web/server', port: 80, open: false },
        { from: 'other/client', to: 'web/server', port: 80, family: 6, open: false },
        { from: 'web/client', to: 'web/server', port: 80, open: true },
        { from: 'web/client', to: 'web/server', port: 80, family: 6, open: true },
      ]),
    ).toEqual([]);
    world.deletePolicy('web', 'server-from-client');
    await enforce();
  });

  it('repairs a rule replaced in place on a periodic sync: its chain keeps its tag and its rule count', async () => {
    world.policy('web', 'server-from-client', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }] }],
    });
    await enforce();
    // The periodic sync reads the tables back: what it sees is what the chains hold as written.
    expect((await enforcer.controller.runObservedSync('periodic')).ok).toBe(true);
    const table = ['ip', 'kube-router-filter-ipv4'] as const;
    const chain = policyChainName('web/server-from-client', 'ingress', 'ipv4');
    const chainRules = async () => {
      const listing = JSON.parse(await world.inNode('nft', ['-a', '-j', 'list', 'chain', ...table, chain])) as {
        nftables: { rule?: { handle: number; comment?: string } }[];
      };
      return listing.nftables.flatMap((item) => (item.rule ? [item.rule] : []));
    };
    // Someone else's edit: the rule now allows every source, under the same comment (and so the same tag).
    const allowEverySource = (rule: { handle: number; comment?: string }) =>
      world.inNode('nft', ['replace', 'rule', ...table, chain, 'handle', String(rule.handle), 'meta', 'mark', 'set', 'meta', 'mark', '|', '0x10000', 'return', 'comment', `"${rule.comment}"`]);
    const periodicRepairs = async () =>
      expect(
        await periodicSyncMismatches(enforcer.controller, world.lab, [
          { from: 'other/client', to: 'web/server', port: 80, open: false },
          { from: 'web/client', to: 'web/server', port: 80, open: true },
        ]),
      ).toEqual([]);
    const rules = await chainRules();
    expect(rules).toHaveLength(1);
    const [rule] = rules as [{ handle: number; comment?: string }];
    await allowEverySource(rule);
    expect(await mismatches(world.lab, [{ from: 'other/client', to: 'web/server', port: 80, open: true }])).toEqual([]);
    await periodicRepairs();
    // The same edit again before any other periodic sync: the chain written again was read back at once, so the next
    // periodic sync finds this edit too instead of adopting it.
    const [written] = (await chainRules()) as [{ handle: number; comment?: string }];
    expect(written.handle).not.toBe(rule.handle);
    await allowEverySource(written);
    await periodicRepairs();
    // Written again (a new handle), the chain is left by the next periodic sync.
    const repaired = await chainRules();
    expect(repaired.map((r) => r.handle)).not.toEqual([written.handle]);
    expect((await enforcer.controller.runObservedSync('periodic')).ok).toBe(true);
    expect(await chainRules()).toEqual(repaired);

    // Edited before any read-back of its new tag, the chain is adopted as found (a restarted agent could not tell
    // either). A later edit is repaired, and the chain written then is left as written: the next read-back compares
    // it with what was written, not with what was adopted.
    world.policy('web', 'server-from-client', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }], ports: [{ port: 80 }] }],
    });
    await enforce();
    const [retagged] = (await chainRules()) as [{ handle: number; comment?: string }];
    await allowEverySource(retagged);
    expect((await enforcer.controller.runObservedSync('periodic')).ok).toBe(true);
    await world.inNode('nft', ['add', 'rule', ...table, chain, 'counter']);
    await periodicRepairs();
    const rewritten = await chainRules();
    expect(rewritten.map((r) => r.handle)).not.toContain(retagged.handle);
    expect((await enforcer.controller.runObservedSync('periodic')).ok).toBe(true);
    expect(await chainRules()).toEqual(rewritten);
    world.deletePolicy('web', 'server-from-client');
    await enforce();
  });

  it('dispatches through verdict maps: base chains keep their rule count as pods and policies come', async () => {
    const baseRules = async () => {
      const listing = await world.inNode('nft', ['-j', 'list', 'table', 'ip', 'kube-router-filter-ipv4']);
      const rules = (JSON.parse(listing) as { nftables: { rule?: { chain: string } }[] }).nftables.flatMap((item) => (item.rule ? [item.rule.chain] : []));
      return rules.filter((chain) => chain.startsWith('KUBE-ROUTER-')).length;
    };
    const idle = await baseRules();
    world.policy('web', 'isolate-all', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] });
    world.policy('other', 'isolate-all', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] });
    await enforce();
    expect(await baseRules()).toBe(idle);
    const maps = await world.inNode('nft', ['list', 'map', 'ip', 'kube-router-filter-ipv4', EGRESS_MAP]);
    expect(maps.match(/jump KUBE-POD-FW-/g)).toHaveLength(3);
    world.deletePolicy('web', 'isolate-all');
    world.deletePolicy('other', 'isolate-all');
    await enforce();
  });

  it('removes the table of a family that is no longer enabled, and keeps the other', async () => {
    world.policy('web', 'server-isolated', { podSelector: { matchLabels: { app: 'server' } }, ingress: [] });
    await enforce();
    expect(await world.inNode('nft', ['list', 'tables'])).toContain('ip6 kube-router-filter-ipv6');
    await enforcer.stop();
    // Restarted with IPv6 off: the IPv6 table would otherwise go on isolating web/server by a policy about to go.
    enforcer = await world.start({ scheduler: false, options: { enableIpv6: false } });
    await enforce();
    const tables = await world.inNode('nft', ['list', 'tables']);
    expect(tables).not.toContain('kube-router-filter-ipv6');
    expect(tables).toContain('ip kube-router-filter-ipv4');
    expect(
      await mismatches(world.lab, [
        { from: 'web/client', to: 'web/server', port: 80, open: false },
        { from: 'web/client', to: 'web/server', port: 80, family: 6, open: true },
      ]),
    ).toEqual([]);
    world.deletePolicy('web', 'server-isolated');
    await enforce();
    await enforcer.stop();
    enforcer = await world.start({ scheduler: false });
    await enforce();
  });

  it('cleanup removes both tables and nothing else; an agent started after it programs from empty tables', async () => {
    await enforcer.stop();
    await world.inNode('nft', ['add', 'table', 'inet', 'tnf-bystander']);
    const plugin = createNetpolNftablesPlugin({ runner: new ExecRunner({}) });
    const options = plugin.options.parse({ netns: world.lab.nodeNetns });
    await plugin.cleanup?.({ nodeName: world.lab.nodeName, logger: pino({ level: 'silent' }) }, options);
    const tables = await world.inNode('nft', ['list', 'tables']);
    expect(tables).not.toContain('kube-router-filter');
    expect(tables).toContain('tnf-bystander');
    // Nothing to remove is not an error.
    await plugin.cleanup?.({ nodeName: world.lab.nodeName, logger: pino({ level: 'silent' }) }, options);
    await world.inNode('nft', ['delete', 'table', 'inet', 'tnf-bystander']);
    enforcer = await world.start({ scheduler: false });
    // From empty tables, a policy whose rule allows everything (it goes to the default chain) is written at once.
    world.policy('web', 'allow-all', { podSelector: { matchLabels: { app: 'server' } }, ingress: [{}] });
    await enforce();
    expect(await mismatches(world.lab, [{ from: 'other/client', to: 'web/server', port: 80, open: true }])).toEqual([]);
    world.deletePolicy('web', 'allow-all');
    await enforce();
  });
});
