// Planning against an exhausted pool: a full /18 (16,384 Services holding every address) and 100 Services waiting for
// one. Each waiting Service used to scan the whole pool again; now a walk scans it once. CPU time, medians of 5.
import { reportBench } from '@kube-router/testkit/bench';
import { planAllocations, type ServiceLike } from '../src/plan.js';
import { AddressPool } from '../src/pool.js';

const RANGE = '10.64.0.0/18';
const WAITING = Number(process.env.WAITING ?? 100);
const base = 1_700_000_000_000;

const holders: ServiceLike[] = Array.from({ length: 16_384 }, (_, i) => ({
  metadata: { namespace: 'default', name: `holder-${i}`, creationTimestamp: new Date(base + i) },
  spec: { type: 'LoadBalancer' },
  status: { loadBalancer: { ingress: [{ ip: `10.64.${i >> 8}.${i & 255}` }] } },
}));
const waiting: ServiceLike[] = Array.from({ length: WAITING }, (_, i) => ({
  metadata: { namespace: 'default', name: `waiting-${i}`, creationTimestamp: new Date(base + 20_000 + i) },
  spec: { type: 'LoadBalancer' },
}));

function cpuMs(run: () => void): number {
  const started = process.cpuUsage();
  run();
  const used = process.cpuUsage(started);
  return (used.user + used.system) / 1000;
}
function median(values: number[]): number {
  return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
}

const measure = (services: ServiceLike[]) =>
  median(Array.from({ length: 5 }, () => cpuMs(() => planAllocations(services, new AddressPool([RANGE]), { defaultClass: true }))));
const full = measure(holders);
const withWaiting = measure([...holders, ...waiting]);
console.log(`lballoc: exhausted pool ${RANGE} (16,384 addresses, all held), planning CPU time, medians of 5`);
const perWaiting = (withWaiting - full) / WAITING;
console.log(`  every Service served, none waiting: ${full.toFixed(1)} ms`);
console.log(`  plus ${WAITING} Services waiting:       ${withWaiting.toFixed(1)} ms (${perWaiting.toFixed(2)} ms per waiting Service)`);
reportBench({
  plugin: 'lballoc',
  figures: [
    { name: 'exhausted pool planning', value: full, unit: 'ms', better: 'lower' },
    { name: 'exhausted pool, with waiting / without', value: withWaiting / full, unit: 'x', better: 'lower' },
  ],
});
