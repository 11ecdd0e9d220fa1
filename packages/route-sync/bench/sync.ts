/**
 * route-sync against the real kernel (a fresh network namespace), 5,000 IPv4 pod CIDR routes via on-link gateways:
 *
 *   - installing all of them from nothing, one route-sync pass, over a bare `ip -batch` of the same `route add`
 *     lines (the ratio is what this package adds: listing, planning, per-command failure reporting);
 *   - a pass with every route in place and nothing to change (the periodic reconcile of a converged node).
 *
 *   npm run bench -w @kube-router/route-sync
 *
 * Needs root and iproute2. Prints medians of a few rounds measured in this run; it never passes or fails on times.
 */
import { performance } from 'node:perf_hooks';
import type { InjectedRoute } from '@kube-router/controller';
import { reportBench } from '@kube-router/testkit/bench';
import { createRouteNode, createRouteSync, missingForRealTests } from '../src/testing/world.js';

const ROUTES = 5_000;
const ROUNDS = 5;

const missing = missingForRealTests();
if (missing) {
  console.log(`route-sync bench skipped: ${missing}`);
  process.exit(0);
}

const routes: InjectedRoute[] = Array.from({ length: ROUTES }, (_, i) => ({
  destination: `10.${64 + (i >> 8)}.${i & 255}.0/24`,
  gateway: `192.0.2.${2 + (i % 250)}`,
}));
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const time = async (fn: () => Promise<unknown>) => {
  const started = performance.now();
  await fn();
  return performance.now() - started;
};

const node = await createRouteNode('bench');
try {
  const rs = await createRouteSync(node, { syncTimeoutMs: 0 });
  await rs.controller.start({ requestSync: () => undefined, signal: new AbortController().signal });
  const sync = async () => {
    const outcome = await rs.controller.runObservedSync('bench');
    if (!outcome.ok) throw outcome.error;
  };
  const count = async () => (await node.ip.routes({ protocol: 17 })).length;
  const flush = () => node.ip.run(['-4', 'route', 'flush', 'proto', '17']);
  const bareLines = routes.map((r) => `route add ${r.destination} via ${r.gateway} proto 17 table 254`);

  const bare: number[] = [];
  const install: number[] = [];
  const unchanged: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    await flush();
    bare.push(await time(() => node.ip.batch(bareLines)));
    if ((await count()) !== ROUTES) throw new Error('the bare batch did not install every route');
    await flush();
    rs.service.setRoutes('bench', routes);
    install.push(await time(sync));
    if ((await count()) !== ROUTES) throw new Error('route-sync did not install every route');
    for (let pass = 0; pass < 3; pass++) unchanged.push(await time(sync));
    rs.service.setRoutes('bench', []);
  }
  await sync();
  await rs.controller.stop();

  const fmt = (ms: number) => `${ms.toFixed(1)} ms`;
  console.log(`route-sync, ${ROUTES} IPv4 routes, medians of ${ROUNDS} rounds (node ${process.version})`);
  console.log(`  bare ip -batch of the route add lines:      ${fmt(median(bare))}`);
  console.log(`  route-sync pass installing them:            ${fmt(median(install))}  (${(median(install) / median(bare)).toFixed(2)}x bare, ${Math.round(ROUTES / (median(install) / 1000))} routes/s)`);
  console.log(`  route-sync pass, all in place, no change:   ${fmt(median(unchanged))}  (${(median(unchanged) / median(bare)).toFixed(2)}x bare install)`);
  reportBench({
    plugin: 'route-sync',
    figures: [
      { name: 'install pass / bare ip -batch', value: median(install) / median(bare), unit: 'x', better: 'lower' },
      { name: 'unchanged pass / bare ip -batch', value: median(unchanged) / median(bare), unit: 'x', better: 'lower' },
      { name: 'install pass', value: median(install), unit: 'ms', better: 'lower' },
    ],
  });
} finally {
  await node.remove();
}
