import { afterEach, describe, expect, it } from 'vitest';
import { missingForRealTests, runNetpolKernelSuite, startWorld } from '@kube-router/netpol-testing';
import type { World } from '@kube-router/netpol-testing';
import { mismatches } from '@kube-router/testkit/netpol-conformance';
import { iptablesBackend } from './testing/backend.js';

runNetpolKernelSuite(iptablesBackend);

const missing = missingForRealTests(iptablesBackend);

/** What only this backend has to guarantee, on a fresh lab node each: the filter table it shares, where it jumps. */
describe.skipIf(missing !== undefined)(`the filter table netpol-iptables shares${missing ? ` (skipped: ${missing})` : ''}`, () => {
  let world: World | undefined;
  afterEach(async () => {
    await world?.close();
    world = undefined;
  }, 60_000);

  it("leaves other controllers' KUBE-ROUTER-* chains alone, even when they look stale", async () => {
    world = await startWorld(iptablesBackend);
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
    world = await startWorld(iptablesBackend);
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
});
