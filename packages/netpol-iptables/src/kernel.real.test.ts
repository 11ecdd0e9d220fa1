import { afterEach, describe, expect, it } from 'vitest';
import { policyChainName } from '@kube-router/netpol';
import { mismatches } from '@kube-router/testkit/netpol-conformance';
import { missingForRealTests, startWorld, type World } from './testing/world.js';

const missing = missingForRealTests();

/** The kernel applier's own guarantees, on a fresh lab node each: what it adopts, what it leaves, where it jumps. */
describe.skipIf(missing !== undefined)('kernel state owned by netpol-iptables', () => {
  let world: World | undefined;
  afterEach(async () => {
    await world?.close();
    world = undefined;
  }, 60_000);

  it('programs a rule that allows everything on the first sync of an empty kernel, failing nothing closed', async () => {
    world = await startWorld();
    world.labelNamespace('web', {});
    await world.lab.addPod({ namespace: 'web', name: 'server', labels: { app: 'server' }, ports: [{ port: 80 }] });
    await world.lab.addPod({ namespace: 'web', name: 'client', labels: { app: 'client' }, ports: [{ port: 80 }] });
    world.policy('web', 'allow-all', { podSelector: {}, ingress: [{}] });
    const enforcer = await world.start({ scheduler: false });
    const outcome = await enforcer.syncNow();
    expect(outcome.ok, String(outcome.error)).toBe(true);
    const failed = (await enforcer.metrics.registry.getSingleMetric('kube_router_netpol_failed_policies')?.get())?.values[0]?.value;
    expect(failed).toBe(0);
    expect(await mismatches(world.lab, [{ from: 'web/client', to: 'web/server', port: 80, open: true }])).toEqual([]);
  }, 90_000);

  it("leaves other controllers' KUBE-ROUTER-* chains alone, even when they look stale", async () => {
    world = await startWorld();
    for (const tool of ['iptables', 'ip6tables']) {
      await world.inNode(tool, ['-N', 'KUBE-ROUTER-SERVICES']);
      await world.inNode(tool, ['-A', 'KUBE-ROUTER-SERVICES', '-p', 'tcp', '--dport', '7', '-j', 'ACCEPT']);
      await world.inNode(tool, ['-N', 'KUBE-NWPLCY-NOT-OURS']);
    }
    await world.inNode('iptables', ['-I', 'INPUT', '1', '-j', 'KUBE-ROUTER-SERVICES']);
    const enforcer = await world.start({ scheduler: false });
    expect((await enforcer.syncNow()).ok).toBe(true);
    expect((await enforcer.syncNow()).ok).toBe(true);
    for (const tool of ['iptables-save', 'ip6tables-save']) {
      const saved = await world.inNode(tool, ['-t', 'filter']);
      expect(saved).toContain('-A KUBE-ROUTER-SERVICES -p tcp -m tcp --dport 7 -j ACCEPT');
      expect(saved).toContain(':KUBE-NWPLCY-NOT-OURS');
    }
    expect(await world.inNode('iptables-save', ['-t', 'filter'])).toContain('-A INPUT -j KUBE-ROUTER-SERVICES');
  }, 90_000);

  it('moves its jumps back to rule 1 when another tool inserts an ACCEPT ahead of them', async () => {
    world = await startWorld();
    world.labelNamespace('web', {});
    await world.lab.addPod({ namespace: 'web', name: 'server', labels: { app: 'server' }, ports: [{ port: 80 }] });
    await world.lab.addPod({ namespace: 'web', name: 'client', labels: { app: 'client' }, ports: [{ port: 80 }] });
    world.policy('web', 'deny-all', { podSelector: { matchLabels: { app: 'server' } }, policyTypes: ['Ingress'] });
    const enforcer = await world.start({ scheduler: false });
    expect((await enforcer.syncNow()).ok).toBe(true);
    const blocked = [{ from: 'web/client', to: 'web/server', port: 80, open: false }];
    expect(await mismatches(world.lab, blocked)).toEqual([]);

    // Like kube-proxy's KUBE-FORWARD after a restart: an ACCEPT inserted ahead of our jump opens the pod.
    await world.inNode('iptables', ['-I', 'FORWARD', '1', '-m', 'comment', '--comment', 'another tool', '-j', 'ACCEPT']);
    expect(await mismatches(world.lab, blocked)).not.toEqual([]);

    // The periodic sync re-reads the kernel and puts our jump first again, keeping the other tool's rule.
    const outcome = await enforcer.controller.runObservedSync('periodic');
    expect(outcome.ok, outcome.ok ? '' : String(outcome.error)).toBe(true);
    const forward = (await world.inNode('iptables-save', ['-t', 'filter'])).split('\n').filter((line) => line.startsWith('-A FORWARD '));
    expect(forward[0]).toMatch(/-j KUBE-ROUTER-FORWARD$/);
    expect(forward.filter((line) => line.endsWith('-j KUBE-ROUTER-FORWARD'))).toHaveLength(1);
    expect(forward).toContain('-A FORWARD -m comment --comment "another tool" -j ACCEPT');
    expect(await mismatches(world.lab, blocked)).toEqual([]);
  }, 90_000);

  it('still programs new policies when a stale chain cannot be deleted, and reports that chain', async () => {
    world = await startWorld();
    world.labelNamespace('web', {});
    await world.lab.addPod({ namespace: 'web', name: 'server', labels: { app: 'server' }, ports: [{ port: 80 }] });
    await world.lab.addPod({ namespace: 'web', name: 'client', labels: { app: 'client' }, ports: [{ port: 80 }] });
    world.policy('web', 'old', { podSelector: { matchLabels: { app: 'server' } }, ingress: [{}] });
    const enforcer = await world.start({ scheduler: false });
    expect((await enforcer.syncNow()).ok).toBe(true);
    // Another tool jumps to our policy chain: the kernel will refuse to delete it once the policy is gone.
    const oldChain = policyChainName('web/old', 'ingress', 'ipv4');
    await world.inNode('iptables', ['-N', 'OTHER-TOOL']);
    await world.inNode('iptables', ['-A', 'OTHER-TOOL', '-j', oldChain]);

    world.deletePolicy('web', 'old');
    world.policy('web', 'deny-server', { podSelector: { matchLabels: { app: 'server' } }, policyTypes: ['Ingress'] });
    const outcome = await enforcer.syncNow();
    expect(outcome.ok).toBe(false);
    expect(String(outcome.error)).toContain(`stale-chains/ipv4/${oldChain}`);
    expect(await mismatches(world.lab, [{ from: 'web/client', to: 'web/server', port: 80, open: false }])).toEqual([]);
    expect(await world.inNode('iptables-save', ['-t', 'filter'])).toContain(`-A OTHER-TOOL -j ${oldChain}`);
  }, 90_000);
});
