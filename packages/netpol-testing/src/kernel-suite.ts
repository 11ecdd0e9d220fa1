import { policyChainName } from '@kube-router/netpol';
import { mismatches } from '@kube-router/testkit/netpol-conformance';
import { afterEach, describe, expect, it } from 'vitest';
import type { NetpolTestBackend } from './backend.js';
import { missingForRealTests, startWorld } from './world.js';
import type { World } from './world.js';

/** What a backend guarantees of the kernel it starts from, on a fresh lab node each: empty, or held by someone. */
export function runNetpolKernelSuite(backend: NetpolTestBackend): void {
  const missing = missingForRealTests(backend);
  describe.skipIf(missing !== undefined)(`kernel state owned by netpol-${backend.name}${missing ? ` (skipped: ${missing})` : ''}`, () => {
    let world: World | undefined;
    afterEach(async () => {
      await world?.close();
      world = undefined;
    }, 60_000);

    /** A fresh node with web/server and web/client, and these policies. */
    const startServerAndClient = async (policies: Record<string, unknown>) => {
      const started = await startWorld(backend);
      world = started;
      started.labelNamespace('web', {});
      await started.lab.addPod({ namespace: 'web', name: 'server', labels: { app: 'server' }, ports: [{ port: 80 }] });
      await started.lab.addPod({ namespace: 'web', name: 'client', labels: { app: 'client' }, ports: [{ port: 80 }] });
      for (const [name, spec] of Object.entries(policies)) started.policy('web', name, spec);
      return { world: started, enforcer: await started.start({ scheduler: false }) };
    };

    it('programs a rule that allows everything on the first sync of an empty kernel, failing nothing closed', async () => {
      const { world, enforcer } = await startServerAndClient({ 'allow-all': { podSelector: {}, ingress: [{}] } });
      const outcome = await enforcer.syncNow();
      expect(outcome.ok, String(outcome.error)).toBe(true);
      const failed = (await enforcer.metrics.registry.getSingleMetric('kube_router_netpol_failed_policies')?.get())?.values[0]?.value;
      expect(failed).toBe(0);
      expect(await mismatches(world.lab, [{ from: 'web/client', to: 'web/server', port: 80, open: true }])).toEqual([]);
    }, 90_000);

    it('still programs new policies when a stale chain cannot be deleted, and reports that chain', async () => {
      const { world, enforcer } = await startServerAndClient({ old: { podSelector: { matchLabels: { app: 'server' } }, ingress: [{}] } });
      expect((await enforcer.syncNow()).ok).toBe(true);
      // Another tool refers to our policy chain: the kernel will refuse to delete it once the policy is gone.
      const oldChain = policyChainName('web/old', 'ingress', 'ipv4');
      const reference = await backend.kernel.referenceChain(world.inNode, oldChain);

      world.deletePolicy('web', 'old');
      world.policy('web', 'deny-server', { podSelector: { matchLabels: { app: 'server' } }, policyTypes: ['Ingress'] });
      const outcome = await enforcer.syncNow();
      expect(outcome.ok).toBe(false);
      expect(String(outcome.error)).toContain(reference.failure);
      expect(await mismatches(world.lab, [{ from: 'web/client', to: 'web/server', port: 80, open: false }])).toEqual([]);
      expect(await reference.referenced()).toBe(true);
    }, 90_000);
  });
}
