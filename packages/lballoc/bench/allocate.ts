// Allocation of 10,000 LoadBalancer Services through the embedded API server: the first walk (plan + 10,000 status
// writes), a steady-state walk (list + plan, nothing to write), and planning alone, all measured in this one run.
import { CoreV1Api } from '@kubernetes/client-node';
import { reportBench } from '@kube-router/testkit/bench';
import { planAllocations } from '../src/plan.js';
import { AddressPool } from '../src/pool.js';
import { createTestAgent, loadBalancer, startCluster, waitFor } from '../src/testing/harness.js';

const SERVICES = Number(process.env.SERVICES ?? 10_000);
const RANGES = ['10.128.0.0/16', 'fd00:128::/112'];

const { server, kubeconfig } = await startCluster();
for (let i = 0; i < SERVICES; i++) {
  const dual = i % 10 === 0;
  server.create(loadBalancer(`svc-${i}`, dual ? { ipFamilyPolicy: 'RequireDualStack', ipFamilies: ['IPv4', 'IPv6'] } : {}));
}
const agent = createTestAgent(kubeconfig, 'bench', { ranges: RANGES, syncTimeoutMs: 0 });
await agent.start({ scheduler: false });
await waitFor('leadership', () => agent.isLeader());

const ms = (start: number) => performance.now() - start;
let start = performance.now();
const first = await agent.controller.runObservedSync('bench');
const firstMs = ms(start);
if (!first.ok) throw first.error;

start = performance.now();
const steady = await agent.controller.runObservedSync('bench');
const steadyMs = ms(start);
if (!steady.ok) throw steady.error;

const { items } = await agent.kube.kubeConfig.makeApiClient(CoreV1Api).listServiceForAllNamespaces();
start = performance.now();
planAllocations(items, new AddressPool(RANGES), { defaultClass: true });
const planMs = ms(start);
const fresh = items.map((s) => ({ ...s, status: {} }));
start = performance.now();
planAllocations(fresh, new AddressPool(RANGES), { defaultClass: true });
const planFreshMs = ms(start);

const allocated = new Set(server.list('v1', 'Service').flatMap((s) => ((s.status as { loadBalancer?: { ingress?: { ip: string }[] } })?.loadBalancer?.ingress ?? []).map((i) => i.ip)));
await agent.stop();
await server.close();

const fmt = (n: number) => n.toFixed(1);
console.log(`lballoc: ${SERVICES} LoadBalancer Services (10% dual-stack), ${allocated.size} distinct addresses handed out`);
console.log(`  first walk (plan + ${SERVICES} status writes): ${fmt(firstMs)} ms, ${fmt((firstMs / SERVICES) * 1000)} µs per Service`);
console.log(`  planning every address from scratch:          ${fmt(planFreshMs)} ms (${fmt((planFreshMs / firstMs) * 100)}% of the first walk; the rest is API writes)`);
console.log(`  steady walk (list + plan, nothing to write):   ${fmt(steadyMs)} ms, ${fmt((steadyMs / SERVICES) * 1000)} µs per Service`);
console.log(`  planning alone when all are served:            ${fmt(planMs)} ms (${fmt((planMs / steadyMs) * 100)}% of the steady walk)`);
console.log(`  ratio first walk / steady walk: ${fmt(firstMs / steadyMs)}x`);
reportBench({
  plugin: 'lballoc',
  figures: [
    { name: 'first walk per Service', value: (firstMs / SERVICES) * 1000, unit: 'µs', better: 'lower' },
    { name: 'steady walk', value: steadyMs, unit: 'ms', better: 'lower' },
    { name: 'planning every address from scratch', value: planFreshMs, unit: 'ms', better: 'lower' },
  ],
});
