import { mismatches, probeThroughout } from '@kube-router/testkit/netpol-conformance';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NetpolTestBackend } from './backend.js';
import { addForeignObjects } from './foreign.js';
import { policyObjects } from './objects.js';
import { addServerAndClients, missingForRealTests, startWorld } from './world.js';
import type { World } from './world.js';

/**
 * An agent restart: a forbidden path probed continuously while the agent stops, starts again and catches up never
 * opens; what the first agent wrote is adopted as it is (not written again); other tools' rules, sets and tables
 * beside ours are left alone, then and when every policy goes.
 */
export function runNetpolRestartSuite(backend: NetpolTestBackend): void {
  const missing = missingForRealTests(backend);
  describe.skipIf(missing !== undefined)(`agent restart (${backend.name})${missing ? ` (skipped: ${missing})` : ''}`, () => {
    let world: World;
    let foreignState: () => Promise<string>;
    const snapshot = () => backend.kernel.snapshot(world.inNode);

    beforeAll(async () => {
      world = await startWorld(backend);
      await addServerAndClients(world);
      foreignState = await addForeignObjects(world.inNode);
    }, 90_000);

    afterAll(async () => {
      await world?.close();
    }, 60_000);

    it('never opens a forbidden path while the agent stops, restarts and catches up, adopts what is in place, and leaves other rules alone', async () => {
      const foreignBefore = await foreignState();
      world.policy('web', 'server-from-web', {
        podSelector: { matchLabels: { app: 'server' } },
        ingress: [{ from: [{ podSelector: {} }] }],
      });
      const first = await world.start();
      expect((await first.syncNow()).ok).toBe(true);
      expect(
        await mismatches(world.lab, [
          { from: 'web/client', to: 'web/server', port: 80, open: true },
          { from: 'other/client', to: 'web/server', port: 80, open: false },
          { from: 'other/client', to: 'web/server', port: 80, family: 6, open: false },
        ]),
      ).toEqual([]);
      const before = await snapshot();

      const probes = probeThroughout(world.lab, [
        { from: 'other/client', to: 'web/server', port: 80, family: 4, open: false },
        { from: 'other/client', to: 'web/server', port: 80, family: 6, open: false },
      ]);
      await new Promise((resolve) => setTimeout(resolve, 300));
      await first.stop();
      // Stopping leaves everything in the kernel.
      expect(await snapshot()).toBe(before);
      await new Promise((resolve) => setTimeout(resolve, 500));
      const second = await world.start();
      expect((await second.syncNow()).ok).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 500));
      const { rounds, forbiddenOpened } = await probes.stop();

      expect(rounds).toBeGreaterThan(3);
      expect(forbiddenOpened).toBe(0);
      expect(await mismatches(world.lab, [{ from: 'web/client', to: 'web/server', port: 80, open: true }])).toEqual([]);
      // Adopted, not written again: the same names, handles, sets as before.
      expect(await snapshot()).toBe(before);
      expect(await foreignState()).toBe(foreignBefore);

      // Removing every policy removes our pod and policy objects but nothing of theirs.
      world.deletePolicy('web', 'server-from-web');
      expect((await second.syncNow()).ok).toBe(true);
      expect(await policyObjects(backend, world.inNode)).toEqual([]);
      expect(await foreignState()).toBe(foreignBefore);
      expect(await mismatches(world.lab, [{ from: 'other/client', to: 'web/server', port: 80, open: true }])).toEqual([]);
    }, 60_000);
  });
}
