import { sample } from '@kube-router/controller/contract';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecRunner } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { policyChainName } from '@kube-router/netpol';
import { targetSetName } from './names.js';
import { mismatches, periodicSyncMismatches } from '@kube-router/testkit/netpol-conformance';
import type { TestEnforcer } from './testing/enforcer.js';
import { missingForRealTests, startWorld } from './testing/world.js';
import type { World } from './testing/world.js';

const missing = missingForRealTests();
if (missing) console.warn(`netpol-iptables real tests skipped: ${missing}`);

/**
 * Real iptables and ipset in a lab node netns, real pods (network namespaces) and real TCP traffic through the node's
 * FORWARD chain. Pods: web/server (ports 80 "http" and 8080 "alt"), web/client, other/client.
 */
describe.skipIf(missing !== undefined)('netpol enforcement in a lab node', () => {
  let world: World;
  let enforcer: TestEnforcer;
  let otherClientIp = '';

  beforeAll(async () => {
    world = await startWorld();
    world.labelNamespace('web', { team: 'web' });
    world.labelNamespace('other', { team: 'other' });
    const [, , other] = await Promise.all([
      world.lab.addPod({
        namespace: 'web',
        name: 'server',
        labels: { app: 'server' },
        ports: [
          { port: 80, name: 'http' },
          { port: 8080, name: 'alt' },
        ],
      }),
      world.lab.addPod({ namespace: 'web', name: 'client', labels: { app: 'client' }, ports: [{ port: 80 }] }),
      world.lab.addPod({ namespace: 'other', name: 'client', labels: { app: 'client' }, ports: [{ port: 80 }] }),
    ]);
    otherClientIp = other.ipv4 ?? '';
    enforcer = await world.start();
  }, 90_000);

  afterAll(async () => {
    await world?.close();
  }, 60_000);

  const enforce = async (expectOk = true) => {
    const outcome = await enforcer.syncNow();
    if (expectOk) expect(outcome.ok, String(outcome.error)).toBe(true);
    return outcome;
  };

  it('leaves pods that no policy selects open', async () => {
    await enforce();
    expect(
      await mismatches(world.lab, [
        { from: 'web/client', to: 'web/server', port: 80, open: true },
        { from: 'other/client', to: 'web/server', port: 8080, open: true },
        { from: 'web/server', to: 'other/client', port: 80, family: 6, open: true },
      ]),
    ).toEqual([]);
  });

  it('allows ingress from pods of a podSelector, on the listed port, in both families', async () => {
    world.policy('web', 'server-from-client', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }], ports: [{ port: 80 }] }],
    });
    await enforce();
    expect(
      await mismatches(world.lab, [
        { from: 'web/client', to: 'web/server', port: 80, open: true },
        { from: 'web/client', to: 'web/server', port: 80, family: 6, open: true },
        { from: 'web/client', to: 'web/server', port: 8080, open: false },
        { from: 'web/client', to: 'web/server', port: 8080, family: 6, open: false },
        // A podSelector alone selects pods of the policy's own namespace.
        { from: 'other/client', to: 'web/server', port: 80, open: false },
        { from: 'other/client', to: 'web/server', port: 80, family: 6, open: false },
        // Only ingress is isolated: the server still reaches out, and the client is not isolated.
        { from: 'web/server', to: 'other/client', port: 80, open: true },
      ]),
    ).toEqual([]);
    world.deletePolicy('web', 'server-from-client');
    await enforce();
    expect(await mismatches(world.lab, [{ from: 'other/client', to: 'web/server', port: 80, open: true }])).toEqual([]);
  });

  it('allows ingress from namespaces of a namespaceSelector', async () => {
    world.policy('web', 'server-from-other', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'other' } } }] }],
    });
    await enforce();
    expect(
      await mismatches(world.lab, [
        { from: 'other/client', to: 'web/server', port: 80, open: true },
        { from: 'other/client', to: 'web/server', port: 8080, family: 6, open: true },
        { from: 'web/client', to: 'web/server', port: 80, open: false },
      ]),
    ).toEqual([]);
    // Relabelling the namespace takes its pods out of the peers.
    world.labelNamespace('other', { team: 'elsewhere' });
    await enforce();
    expect(await mismatches(world.lab, [{ from: 'other/client', to: 'web/server', port: 80, open: false }])).toEqual([]);
    world.labelNamespace('other', { team: 'other' });
    world.deletePolicy('web', 'server-from-other');
    await enforce();
  });

  it('allows ingress from an ipBlock minus its except', async () => {
    world.policy('web', 'server-from-block', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ ipBlock: { cidr: '10.244.0.0/16', except: [`${otherClientIp}/32`] } }] }],
    });
    await enforce();
    expect(
      await mismatches(world.lab, [
        { from: 'web/client', to: 'web/server', port: 80, open: true },
        { from: 'other/client', to: 'web/server', port: 80, open: false },
        // The block is IPv4: nothing is allowed over IPv6.
        { from: 'web/client', to: 'web/server', port: 80, family: 6, open: false },
      ]),
    ).toEqual([]);
    world.deletePolicy('web', 'server-from-block');
    await enforce();
  });

  it('restricts egress to the listed peers and ports', async () => {
    world.policy('web', 'client-egress', {
      podSelector: { matchLabels: { app: 'client' } },
      policyTypes: ['Egress'],
      egress: [{ to: [{ podSelector: { matchLabels: { app: 'server' } } }], ports: [{ port: 80, protocol: 'TCP' }] }],
    });
    await enforce();
    expect(
      await mismatches(world.lab, [
        { from: 'web/client', to: 'web/server', port: 80, open: true },
        { from: 'web/client', to: 'web/server', port: 80, family: 6, open: true },
        { from: 'web/client', to: 'web/server', port: 8080, open: false },
        { from: 'web/client', to: 'other/client', port: 80, open: false },
        // Its ingress is not isolated, and replies to allowed connections flow.
        { from: 'other/client', to: 'web/client', port: 80, open: true },
      ]),
    ).toEqual([]);
    world.deletePolicy('web', 'client-egress');
    await enforce();
  });

  it('allows a named port only where the target defines it', async () => {
    world.policy('web', 'server-http', {
      podSelector: {},
      ingress: [{ ports: [{ port: 'http' }] }],
    });
    await enforce();
    expect(
      await mismatches(world.lab, [
        { from: 'other/client', to: 'web/server', port: 80, open: true },
        { from: 'other/client', to: 'web/server', port: 80, family: 6, open: true },
        { from: 'other/client', to: 'web/server', port: 8080, open: false },
        // web/client serves 80 but has no port named http.
        { from: 'other/client', to: 'web/client', port: 80, open: false },
      ]),
    ).toEqual([]);
    world.deletePolicy('web', 'server-http');
    await enforce();
  });

  it('fails the pods of an invalid policy closed, reports it, and still programs the valid ones', async () => {
    world.policy('web', 'broken', {
      podSelector: { matchLabels: { app: 'client' } },
      ingress: [{ from: [{ ipBlock: { cidr: 'not-a-cidr' } }] }],
    });
    world.policy('web', 'server-from-other', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'other' } } }] }],
    });
    const outcome = await enforce(false);
    expect(outcome.ok).toBe(false);
    expect(String(outcome.error)).toContain('policy/web/broken');
    expect(String(outcome.error)).not.toContain('server-from-other');
    expect(
      await mismatches(world.lab, [
        // Fail closed: even the allowed-looking traffic is dropped.
        { from: 'other/client', to: 'web/client', port: 80, open: false },
        { from: 'web/server', to: 'web/client', port: 80, family: 6, open: false },
        // The valid policy works.
        { from: 'other/client', to: 'web/server', port: 80, open: true },
        { from: 'web/client', to: 'web/server', port: 80, open: false },
      ]),
    ).toEqual([]);
    await enforcer.kube.events.flush();
    const events = world.api.list('v1', 'Event', 'web') as unknown as {
      reason?: string;
      type?: string;
      involvedObject?: { kind?: string; name?: string };
    }[];
    expect(
      events.some(
        (e) => e.reason === 'InvalidNetworkPolicy' && e.type === 'Warning' && e.involvedObject?.name === 'broken',
      ),
    ).toBe(true);
    expect(events.some((e) => e.involvedObject?.name === 'server-from-other')).toBe(false);
    expect(await sample(enforcer.metrics, 'kube_router_controller_sync_failures_total', 'netpol')).toBeGreaterThan(0);
    expect((await enforcer.metrics.registry.getSingleMetric('kube_router_netpol_failed_policies')?.get())?.values[0]?.value).toBe(1);

    world.deletePolicy('web', 'broken');
    world.deletePolicy('web', 'server-from-other');
    await enforce();
    expect(await mismatches(world.lab, [{ from: 'other/client', to: 'web/client', port: 80, open: true }])).toEqual([]);
  });

  it('fails the targets of a policy the kernel refuses closed', async () => {
    // A set of the wrong type under the name the policy's target set must have: the kernel refuses the swap.
    const clash = targetSetName('web/clash', 'ipv4');
    await world.inNode('ipset', ['create', clash, 'hash:net', 'family', 'inet']);
    world.policy('web', 'clash', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{}],
    });
    world.policy('web', 'client-from-server', {
      podSelector: { matchLabels: { app: 'client' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'server' } } }] }],
    });
    const outcome = await enforce(false);
    expect(String(outcome.error)).toContain('policy/web/clash');
    expect(String(outcome.error)).not.toContain('client-from-server');
    expect(
      await mismatches(world.lab, [
        { from: 'web/client', to: 'web/server', port: 80, open: false },
        { from: 'other/client', to: 'web/server', port: 80, family: 6, open: false },
        { from: 'web/server', to: 'web/client', port: 80, open: true },
        { from: 'other/client', to: 'web/client', port: 80, open: false },
      ]),
    ).toEqual([]);
    world.deletePolicy('web', 'clash');
    world.deletePolicy('web', 'client-from-server');
    await enforce();
    // The clashing set had our prefix and is no longer wanted: it is gone.
    expect(await world.inNode('ipset', ['list', '-n'])).not.toContain(clash);
    expect(await mismatches(world.lab, [{ from: 'web/client', to: 'web/server', port: 80, open: true }])).toEqual([]);
  });

  it('repairs drift on a periodic sync: a removed jump and a flushed chain come back', async () => {
    world.policy('web', 'server-from-client', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }] }],
    });
    await enforce();
    expect(await mismatches(world.lab, [{ from: 'other/client', to: 'web/server', port: 80, open: false }])).toEqual([]);
    await world.inNode('iptables', ['-D', 'FORWARD', '-m', 'comment', '--comment', 'kube-router netpol', '-j', 'KUBE-ROUTER-FORWARD']);
    await world.inNode('ip6tables', ['-F', 'KUBE-ROUTER-FORWARD']);
    expect(
      await mismatches(world.lab, [
        { from: 'other/client', to: 'web/server', port: 80, open: true },
        { from: 'other/client', to: 'web/server', port: 80, family: 6, open: true },
      ]),
    ).toEqual([]);
    const outcome = await enforcer.controller.runObservedSync('periodic');
    expect(outcome.ok).toBe(true);
    expect(
      await mismatches(world.lab, [
        { from: 'other/client', to: 'web/server', port: 80, open: false },
        { from: 'other/client', to: 'web/server', port: 80, family: 6, open: false },
        { from: 'web/client', to: 'web/server', port: 80, open: true },
      ]),
    ).toEqual([]);
    world.deletePolicy('web', 'server-from-client');
    await enforce();
  });

  it('repairs a rule replaced in place on a periodic sync: its chain keeps its rule count', async () => {
    world.policy('web', 'server-from-client', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }] }],
    });
    await enforce();
    // The periodic sync reads the chains back: what it sees is what they hold as written.
    expect((await enforcer.controller.runObservedSync('periodic')).ok).toBe(true);
    const chain = policyChainName('web/server-from-client', 'ingress', 'ipv4');
    const chainRules = async () =>
      (await world.inNode('iptables-save', ['-t', 'filter'])).split('\n').filter((line) => line.startsWith(`-A ${chain} `));
    // Someone else's edit: the policy's first rule now marks every source as allowed, and the chain keeps its count.
    const allowEverySource = () =>
      world.inNode('iptables', ['-R', chain, '1', '-j', 'MARK', '--set-xmark', '0x10000/0x10000']);
    const periodicRepairs = async () =>
      expect(
        await periodicSyncMismatches(enforcer.controller, world.lab, [
          { from: 'other/client', to: 'web/server', port: 80, open: false },
          { from: 'web/client', to: 'web/server', port: 80, open: true },
        ]),
      ).toEqual([]);
    const written = await chainRules();
    expect(written.length).toBeGreaterThan(0);
    await allowEverySource();
    expect(await chainRules()).toHaveLength(written.length);
    expect(await mismatches(world.lab, [{ from: 'other/client', to: 'web/server', port: 80, open: true }])).toEqual([]);
    await periodicRepairs();
    expect(await chainRules()).toEqual(written);
    // The same edit again before any other periodic sync: the chain written again was read back at once, so the next
    // periodic sync finds this edit too instead of adopting it.
    await allowEverySource();
    await periodicRepairs();
    expect(await chainRules()).toEqual(written);
    world.deletePolicy('web', 'server-from-client');
    await enforce();
  });

  it('denies pods that no policy selects with isolateUnselectedPods', async () => {
    await enforcer.stop();
    enforcer = await world.start({ options: { isolateUnselectedPods: true } });
    world.policy('web', 'allow-all', { podSelector: {}, policyTypes: ['Ingress', 'Egress'], ingress: [{}], egress: [{}] });
    await enforce();
    expect(
      await mismatches(world.lab, [
        { from: 'web/client', to: 'web/server', port: 80, open: true },
        { from: 'web/client', to: 'web/server', port: 80, family: 6, open: true },
        { from: 'other/client', to: 'web/server', port: 80, open: false },
        { from: 'web/server', to: 'other/client', port: 80, family: 6, open: false },
      ]),
    ).toEqual([]);
    world.deletePolicy('web', 'allow-all');
    await enforce();
    expect(await mismatches(world.lab, [{ from: 'web/client', to: 'web/server', port: 80, open: false }])).toEqual([]);
  });
  it('removes its chains and ipsets of a family that is no longer enabled, and keeps the other', async () => {
    await enforcer.stop();
    enforcer = await world.start();
    world.policy('web', 'server-isolated', { podSelector: { matchLabels: { app: 'server' } }, ingress: [] });
    await enforce();
    const [targets4, targets6] = [targetSetName('web/server-isolated', 'ipv4'), targetSetName('web/server-isolated', 'ipv6')];
    expect(await world.inNode('ip6tables-save', ['-t', 'filter'])).toContain('KUBE-ROUTER-FORWARD');
    expect(await world.inNode('ipset', ['list', '-n'])).toContain(targets6);
    await enforcer.stop();
    // Restarted with IPv6 off: the IPv6 chains would otherwise go on isolating web/server by a policy about to go, and
    // hold the IPv6 sets, which no sync could then destroy. The first removal fails (its ip6tables-restore is refused
    // once): the sync fails with it, IPv4 is enforced all the same, and the next sync removes them.
    const exec = new ExecRunner();
    let refuseIpv6Restore = true;
    const runner: CommandRunner = {
      run: (spec) => {
        if (refuseIpv6Restore && /^ip6tables(-nft|-legacy)?-restore$/.test(spec.command)) {
          refuseIpv6Restore = false;
          return Promise.reject(new Error('ip6tables-restore refused by the test'));
        }
        return exec.run(spec);
      },
    };
    // No loop of its own: the sync that meets the refusal is this test's.
    enforcer = await world.start({ options: { enableIpv6: false }, runner, scheduler: false });
    const failed = await enforce(false);
    expect(failed.ok).toBe(false);
    expect(String(failed.error)).toContain('disabled-family/ipv6');
    expect(refuseIpv6Restore).toBe(false);
    expect(await world.inNode('ip6tables-save', ['-t', 'filter'])).toContain('KUBE-ROUTER-FORWARD');
    // Not released: the sets the family's chains still match on stay with them.
    expect(await world.inNode('ipset', ['list', '-n'])).toContain(targets6);
    expect(await mismatches(world.lab, [{ from: 'web/client', to: 'web/server', port: 80, open: false }])).toEqual([]);
    await enforce();
    expect(await world.inNode('ip6tables-save', ['-t', 'filter'])).not.toMatch(/KUBE-ROUTER|KUBE-POD-FW-|KUBE-NWPLCY-/);
    const sets = await world.inNode('ipset', ['list', '-n']);
    expect(sets).not.toContain(targets6);
    expect(sets).toContain(targets4);
    expect(await world.inNode('iptables-save', ['-t', 'filter'])).toContain('KUBE-ROUTER-FORWARD');
    expect(
      await mismatches(world.lab, [
        { from: 'web/client', to: 'web/server', port: 80, open: false },
        { from: 'web/client', to: 'web/server', port: 80, family: 6, open: true },
      ]),
    ).toEqual([]);
    // A second sync finds nothing left to remove and nothing failing.
    await enforce();
    world.deletePolicy('web', 'server-isolated');
    await enforce();
  });
});
