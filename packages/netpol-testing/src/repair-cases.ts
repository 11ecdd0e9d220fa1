import { ExecRunner } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { TAIL_CHAIN, policyChainName } from '@kube-router/netpol';
import type { NetworkPolicySpecLike } from '@kube-router/netpol';
import { periodicSyncMismatches } from '@kube-router/testkit/netpol-conformance';
import pino from 'pino';
import { expect, it } from 'vitest';
import type { EnforcementContext } from './enforcement-context.js';
import { addForeignObjects } from './foreign.js';
import { ownObjects } from './objects.js';

/** web/server's ingress from web/client alone. */
const SERVER_FROM_CLIENT = {
  podSelector: { matchLabels: { app: 'server' } },
  ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }] }],
};

/** What the backend does when the kernel refuses it, is changed behind its back, loses a family, or is cleaned up. */
export function repairCases(context: EnforcementContext): void {
  /** kube_router_controller_drift_repaired_total of the netpol controller, every kind summed. */
  const driftRepaired = async (): Promise<number> =>
    (await context.enforcer().metrics.registry.getSingleMetric('kube_router_controller_drift_repaired_total')?.get())?.values
      .filter((value) => value.labels.controller === 'netpol')
      .reduce((sum, value) => sum + value.value, 0) ?? 0;
  const { backend, world, enforcer, enforce, restart, expectTraffic, enforcePolicies, removePolicies } = context;
  const lab = () => world().lab;
  const objects = (family: 'ipv4' | 'ipv6') => backend.kernel.objects(world().inNode, family);
  const failuresCounter = async () =>
    (await enforcer().metrics.registry.getSingleMetric('kube_router_controller_sync_failures_total')?.get())?.values.find(
      (value) => value.labels.controller === 'netpol',
    )?.value ?? 0;

  it('fails the targets of a policy the kernel refuses closed, enforces the others, counts the failure and stays live', async () => {
    const spec: NetworkPolicySpecLike = {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: 'client' } } }] }],
    };
    const { object, refusal } = await backend.kernel.obstructPolicy(world(), { namespace: 'web', name: 'clash', spec });
    world().policy('web', 'clash', spec);
    world().policy('web', 'client-from-server', {
      podSelector: { matchLabels: { app: 'client' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'server' } } }] }],
    });
    const failuresBefore = await failuresCounter();
    const outcome = await enforce(false);
    expect(outcome.ok).toBe(false);
    expect(String(outcome.error)).toContain('policy/web/clash');
    if (refusal) expect(String(outcome.error)).toMatch(refusal);
    expect(String(outcome.error)).not.toContain('client-from-server');
    expect(await failuresCounter()).toBe(failuresBefore + 1);
    expect(enforcer().health.livenessChecks().every((check) => check.ok)).toBe(true);
    await expectTraffic([
      // web/server fails closed: not even the client its policy would allow gets in, in either family.
      { from: 'web/client', to: 'web/server', port: 80, open: false },
      { from: 'web/client', to: 'web/server', port: 80, family: 6, open: false },
      { from: 'other/client', to: 'web/server', port: 80, family: 6, open: false },
      // The other policy is enforced.
      { from: 'web/server', to: 'web/client', port: 80, open: true },
      { from: 'other/client', to: 'web/client', port: 80, open: false },
    ]);
    type EventLike = { reason?: string; involvedObject?: { name?: string } };
    await expect
      .poll(() => (world().api.list('v1', 'Event', 'web') as EventLike[]).some((e) => e.reason === 'NetworkPolicyNotProgrammed' && e.involvedObject?.name === 'clash'))
      .toBe(true);

    await removePolicies('web/clash', 'web/client-from-server');
    // The object in the way had one of our names and is no longer wanted: it is gone.
    expect(await objects('ipv4')).not.toContain(object);
    await expectTraffic([{ from: 'web/client', to: 'web/server', port: 80, open: true }]);
  });

  it('repairs drift on a periodic sync: what sends traffic through the rules comes back, counted as drift', async () => {
    await enforcePolicies({ 'web/server-from-client': SERVER_FROM_CLIENT }, [{ from: 'other/client', to: 'web/server', port: 80, open: false }]);
    // Two periodic syncs with nothing changed behind the agent: no drift, however its objects were found.
    const atStart = await driftRepaired();
    for (let sync = 0; sync < 2; sync++) expect((await enforcer().controller.runObservedSync('periodic')).ok).toBe(true);
    const driftBefore = await driftRepaired();
    expect(driftBefore).toBe(atStart);
    await backend.kernel.breakServerIngress(world());
    await expectTraffic([
      { from: 'other/client', to: 'web/server', port: 80, open: true },
      { from: 'other/client', to: 'web/server', port: 80, family: 6, open: true },
    ]);
    expect(
      await periodicSyncMismatches(enforcer().controller, lab(), [
        { from: 'other/client', to: 'web/server', port: 80, open: false },
        { from: 'other/client', to: 'web/server', port: 80, family: 6, open: false },
        { from: 'web/client', to: 'web/server', port: 80, open: true },
        { from: 'web/client', to: 'web/server', port: 80, family: 6, open: true },
      ]),
    ).toEqual([]);
    expect(await driftRepaired()).toBeGreaterThan(driftBefore);
    await removePolicies('web/server-from-client');
  });

  it('repairs a rule replaced in place on a periodic sync: its chain keeps its rule count', async () => {
    await enforcePolicies({ 'web/server-from-client': SERVER_FROM_CLIENT }, [{ from: 'other/client', to: 'web/server', port: 80, open: false }]);
    // The periodic sync reads the kernel back: what it sees is what the chains hold as written.
    expect((await enforcer().controller.runObservedSync('periodic')).ok).toBe(true);
    const chain = policyChainName('web/server-from-client', 'ingress', 'ipv4');
    const chainRules = () => backend.kernel.chainRules(world().inNode, chain);
    const periodicRepairs = async () =>
      expect(
        await periodicSyncMismatches(enforcer().controller, lab(), [
          { from: 'other/client', to: 'web/server', port: 80, open: false },
          { from: 'web/client', to: 'web/server', port: 80, open: true },
        ]),
      ).toEqual([]);
    const written = await chainRules();
    expect(written.length).toBeGreaterThan(0);
    await backend.kernel.allowEverySource(world().inNode, chain);
    expect(await chainRules()).toHaveLength(written.length);
    await expectTraffic([{ from: 'other/client', to: 'web/server', port: 80, open: true }]);
    await periodicRepairs();
    expect(await chainRules()).toEqual(written);
    // The same edit again before any other periodic sync: the chain written again was read back at once, so the next
    // periodic sync finds this edit too instead of adopting it.
    await backend.kernel.allowEverySource(world().inNode, chain);
    await periodicRepairs();
    expect(await chainRules()).toEqual(written);
    await removePolicies('web/server-from-client');
  });

  it('removes its objects of a family that is no longer enabled, and keeps the other', async () => {
    world().policy('web', 'server-isolated', { podSelector: { matchLabels: { app: 'server' } }, ingress: [] });
    await enforce();
    const ipv6Before = await objects('ipv6');
    expect(ipv6Before.length).toBeGreaterThan(0);
    // Restarted with IPv6 off: the IPv6 objects would otherwise go on isolating web/server by a policy about to go.
    // The first removal fails (the test refuses it once): the sync fails with it, IPv4 is enforced all the same, the
    // family's objects stay as they were, and the next sync removes them.
    const exec = new ExecRunner();
    const removal = backend.kernel.disabledFamilyRemoval;
    let refuse = true;
    const runner: CommandRunner = {
      run: (spec) => {
        if (refuse && removal.matches(spec)) {
          refuse = false;
          return Promise.reject(new Error('refused by the test'));
        }
        return exec.run(spec);
      },
    };
    await restart({ options: { enableIpv6: false }, runner });
    const failed = await enforce(false);
    expect(failed.ok).toBe(false);
    expect(String(failed.error)).toContain(removal.failure);
    expect(refuse).toBe(false);
    expect(await objects('ipv6')).toEqual(ipv6Before);
    await expectTraffic([{ from: 'web/client', to: 'web/server', port: 80, open: false }]);
    await enforce();
    expect(await objects('ipv6')).toEqual([]);
    expect((await objects('ipv4')).length).toBeGreaterThan(0);
    await expectTraffic([
      { from: 'web/client', to: 'web/server', port: 80, open: false },
      { from: 'web/client', to: 'web/server', port: 80, family: 6, open: true },
    ]);
    // A second sync finds nothing left to remove and nothing failing.
    await enforce();
    await removePolicies('web/server-isolated');
  });

  it('cleanup removes every object of ours, default deny included, and nothing else; an agent started after it programs from empty', async () => {
    const foreignState = await addForeignObjects(world().inNode);
    world().policy('web', 'deny', { podSelector: {}, policyTypes: ['Ingress'] });
    await restart({ options: { defaultDeny: true } });
    await enforce();
    await enforcer().stop();
    expect(await objects('ipv4')).toEqual(expect.arrayContaining([TAIL_CHAIN, 'kube-router-local-pods']));
    const foreignBefore = await foreignState();

    const plugin = backend.createPlugin({ runner: new ExecRunner({}) });
    // The defaults (IPv4 only): the objects an earlier dual-stack run left in IPv6 go too.
    const options = plugin.options.parse({ netns: lab().nodeNetns });
    const ctx = { nodeName: lab().nodeName, logger: pino({ level: 'silent' }) };
    await plugin.cleanup?.(ctx, options);
    expect(await ownObjects(backend, world().inNode)).toEqual([]);
    expect(await foreignState()).toBe(foreignBefore);
    // Nothing to remove is not an error.
    await plugin.cleanup?.(ctx, options);

    // From an empty kernel, a policy whose rule allows everything (it goes to the default chain) is written at once.
    world().deletePolicy('web', 'deny');
    world().policy('web', 'allow-all', { podSelector: { matchLabels: { app: 'server' } }, ingress: [{}] });
    await restart();
    await enforce();
    await expectTraffic([{ from: 'other/client', to: 'web/server', port: 80, open: true }]);
    await removePolicies('web/allow-all');
  });
}
