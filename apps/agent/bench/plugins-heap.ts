/**
 * Every plugin but netpol under churn at a constant size, each alone in an agent (bundled, run by plain node, in its
 * own network namespace, as scale.ts runs netpol's): the heap after a full GC once 4 warm-up rounds are done and again
 * after PLUGIN_CHURN_ROUNDS more (default 20). src/testing/plugin-churn.ts says what each round changes and how its
 * end is read from the kernel (lballoc: the API server); the leak test (src/memory-leak.plugins.test.ts) holds the
 * same growth under 3 MiB.
 *
 *   npm run bench -w @kube-router/agent       (this file runs before scale.ts; about 3 minutes)
 *   PLUGIN_CHURN_ROUNDS=40, PLUGIN_CHURN_ONLY=proxy-nftables,lballoc (a subset)
 *
 * proxy-ipvs runs with IPVS standing in (the host kernel has none; src/testing/stand-ins.ts), its ipsets, iptables
 * chains and VIPs real. Needs root, iproute2, nft, ipset, iptables, conntrack, gobgpd and BIRD; a plugin whose tools
 * are missing is left out with a note. Prints what it measured; it never passes or fails on numbers.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hasTool } from '@kube-router/netfilter';
import { reportBench, type BenchFigure } from '@kube-router/testkit/bench';
import { bundleAgent } from '../src/testing/measured-agent.js';
import { heapGrowthUnderChurn, PLUGIN_CHURNS } from '../src/testing/plugin-churn.js';

const WARMUP_ROUNDS = 4;
const ROUNDS = Number(process.env.PLUGIN_CHURN_ROUNDS ?? 20);
const ONLY = process.env.PLUGIN_CHURN_ONLY?.split(',').map((name) => name.trim());
const MiB = 2 ** 20;
const benchStart = performance.now();
const step = (what: string) => console.error(`[${((performance.now() - benchStart) / 1000).toFixed(0)} s] ${what}`);

const figures: BenchFigure[] = [];
const dir = await mkdtemp(join(tmpdir(), 'sc-plugins-'));
try {
  if (process.getuid?.() !== 0) throw new Error('the plugins bench needs root (network namespaces)');
  // One bundle per CLI entry: the reference CLI, and the one with IPVS and a BGP-less router standing in.
  const bundles = new Map<string | undefined, Promise<string>>();
  const bundleFor = (entry: string | undefined) => {
    let bundle = bundles.get(entry);
    if (!bundle) {
      bundle = mkdtemp(join(dir, 'agent-')).then((bundleDir) => bundleAgent(bundleDir, ...(entry === undefined ? [] : [entry])));
      bundles.set(entry, bundle);
    }
    return bundle;
  };
  console.log(`agent plugins under churn: ${WARMUP_ROUNDS} warm-up rounds, then ${ROUNDS}; the agent bundled, run by plain node (node ${process.version})`);
  for (const churn of PLUGIN_CHURNS) {
    if (ONLY && !ONLY.includes(churn.plugin)) continue;
    const missing = ['ip', ...churn.tools].filter((tool) => !hasTool(tool));
    if (missing.length > 0) {
      console.log(`  ${churn.plugin}: not measured, ${missing.join(', ')} missing`);
      continue;
    }
    step(`${churn.plugin}: ${churn.describe}`);
    const bundle = await bundleFor(churn.entry);
    const growth = await heapGrowthUnderChurn(churn, {
      warmupRounds: WARMUP_ROUNDS,
      measuredRounds: ROUNDS,
      bundle,
      onRound: (round) => {
        if ((round + 1) % 8 === 0) step(`${churn.plugin}: round ${round + 1} of ${WARMUP_ROUNDS + ROUNDS}`);
      },
    });
    const mib = (bytes: number) => (bytes / MiB).toFixed(2);
    console.log(`  ${churn.plugin}: ${churn.describe}`);
    console.log(`    heap after GC ${mib(growth.before.heapUsedBytes)} MiB after the warm-up, ${mib(growth.after.heapUsedBytes)} MiB after ${ROUNDS} rounds: ${growth.growthBytes >= 0 ? '+' : ''}${mib(growth.growthBytes)} MiB; RSS ${mib(growth.after.rssBytes)} MiB; ready after ${(growth.readyMs / 1000).toFixed(1)} s; ${growth.syncFailures} failed syncs`);
    if (growth.syncFailures > 0) console.log(`    the agent's last lines:\n${growth.recentLogs}`);
    figures.push({ name: `plugins: heap growth under churn, ${churn.plugin}`, value: growth.growthBytes / MiB, unit: 'MiB', better: 'lower' });
  }
} catch (error) {
  console.error(error);
  process.exitCode = 1;
} finally {
  await rm(dir, { recursive: true, force: true });
}
if (figures.length > 0) reportBench({ plugin: 'agent', bench: 'plugins-heap', figures });
