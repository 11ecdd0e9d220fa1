import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startApiServer, type ApiServer } from '@kube-router/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScaleNetns, labelChangeToEnforced, MeasuredAgent, type ScaleNetns } from './testing/measured-agent.js';
import { scaleShape, ScaleWorld } from './testing/scale-world.js';
import { hasTool } from './testing/support.js';

const missing = [
  process.getuid?.() !== 0 && 'root',
  ...['ip', 'iptables', 'ip6tables', 'ipset'].filter((tool) => !hasTool(tool)),
].filter(Boolean);

// 1,000 pods (200 local) and 200 policies; every round replaces 30% of the pods under new names and addresses,
// relabels another tenth and rewrites a fifth of the policies, then waits until its last change is in the kernel.
// Measured on the 2-core dev VM: the heap after GC moves by about 0.5 MiB over the 12 measured rounds; with the
// informer made to keep every deleted pod (3,600 of them) it grew 5.3 MiB and this test failed. A per-object cache
// never pruned, or a metric series per departed pod or policy, grows the same way.
const PODS = 1_000;
const WARMUP_ROUNDS = 4;
const MEASURED_ROUNDS = 12;
const GROWTH_BOUND_BYTES = 3 * 2 ** 20;

describe.skipIf(missing.length > 0)(
  `the agent's heap under churn at a constant size${missing.length > 0 ? ` (skipped: needs ${missing.join(', ')})` : ''}`,
  { timeout: 120_000 },
  () => {
    let netns: ScaleNetns;
    let api: ApiServer;
    let agent: MeasuredAgent;
    let dir: string;
    let world: ScaleWorld;

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'sc-leak-'));
      netns = await createScaleNetns();
      api = await startApiServer({ host: netns.hostIp, port: 0, historyLimit: 100_000 });
      world = new ScaleWorld(api, scaleShape(PODS));
      world.seed();
      agent = new MeasuredAgent(netns, await api.writeKubeconfig(join(dir, 'kubeconfig')));
      await agent.waitUntilReady(60_000);
    }, 90_000);

    afterAll(async () => {
      await agent?.stop();
      await api?.close();
      await netns?.remove();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    /** Churn rounds, each ending once its last change is in the kernel, so that the agent has seen all of it. */
    async function churn(rounds: number, offset: number): Promise<void> {
      const policies = world.policiesSelectingLocalPods();
      for (let round = 0; round < rounds; round++) {
        world.churn({ replace: (PODS * 3) / 10, flip: PODS / 10, update: world.shape.policies / 5 });
        await labelChangeToEnforced(netns.name, world.labelProbe(policies[(offset + round) % policies.length]!, offset + round));
      }
    }

    it('holds no more heap after churn than before it, once garbage is collected', async () => {
      await churn(WARMUP_ROUNDS, 0);
      const before = await agent.afterGc();
      await churn(MEASURED_ROUNDS, WARMUP_ROUNDS);
      const after = await agent.afterGc();
      const growth = after.heapUsedBytes - before.heapUsedBytes;
      expect(growth, `heap after GC grew ${(growth / 2 ** 20).toFixed(2)} MiB over ${MEASURED_ROUNDS} rounds`).toBeLessThan(GROWTH_BOUND_BYTES);
    });
  },
);
