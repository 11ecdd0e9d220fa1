import { describe, expect, it } from 'vitest';
import { heapGrowthUnderChurn, PLUGIN_CHURNS } from './testing/plugin-churn.js';
import { hasTool } from './testing/support.js';

// memory-leak.test.ts holds netpol to the same bound; these are the other plugins, each alone in an agent, churned at a
// constant size (plugin-churn.ts says how). Each round ends once its last change is in the kernel (lballoc: in the API
// server), so that the agent has seen all of it before the heap is read. A per-object cache never pruned, a metric
// series per departed Service, route or Node, or a listener added per sync grows with the rounds and fails here.
const WARMUP_ROUNDS = 4;
const MEASURED_ROUNDS = 20;
const GROWTH_BOUND_BYTES = 3 * 2 ** 20;
const MiB = 2 ** 20;

for (const churn of PLUGIN_CHURNS) {
  const missing = [process.getuid?.() !== 0 && 'root', ...['ip', ...churn.tools].filter((tool) => !hasTool(tool))].filter(Boolean);
  describe.skipIf(missing.length > 0)(
    `${churn.plugin}: the agent's heap under churn at a constant size${missing.length > 0 ? ` (skipped: needs ${missing.join(', ')})` : ''}`,
    { timeout: 600_000 },
    () => {
      it(`holds no more heap after ${MEASURED_ROUNDS} rounds than before them, once garbage is collected (${churn.describe})`, async () => {
        const growth = await heapGrowthUnderChurn(churn, { warmupRounds: WARMUP_ROUNDS, measuredRounds: MEASURED_ROUNDS });
        const summary = `${churn.plugin}: heap after GC ${(growth.before.heapUsedBytes / MiB).toFixed(2)} -> ${(growth.after.heapUsedBytes / MiB).toFixed(2)} MiB over ${MEASURED_ROUNDS} rounds`;
        console.log(summary);
        // A churn that failed to sync would measure the failure path, not the plugin's work.
        expect(growth.syncFailures, `${churn.plugin}: failed syncs of ${churn.controllers.join(', ')}; the agent's last lines:\n${growth.recentLogs}`).toBe(0);
        expect(growth.growthBytes, summary).toBeLessThan(GROWTH_BOUND_BYTES);
      });
    },
  );
}
