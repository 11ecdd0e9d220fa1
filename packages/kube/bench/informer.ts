/**
 * Informer throughput and memory, against the embedded API server over HTTP, in one run:
 * - list-sync: 10k pods listed into a synced lister (paged, 500 per page), against a bare client-node list of the
 *   same pods (one request, no cache) as the baseline;
 * - watch delivery: N updates made on the server, until the last one is visible in the lister;
 * - heap held by the informer's cache per 10k pods, against the size of the same pods as JSON;
 * - the shape check each listed or watched object passes (ObjectReader: schema check and deserialization), per pod
 *   and as a share of the list-sync.
 *
 * Absolute times depend on the machine; the ratios are what to compare between runs.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { CoreV1Api } from '@kubernetes/client-node';
import type { KubeConfig } from '@kubernetes/client-node';
import { startApiServer } from '@kube-router/testkit';
import type { ApiServer } from '@kube-router/testkit';
import { reportBench } from '@kube-router/testkit/bench';
import { pino } from 'pino';
import { InformerFactory, loadKubeConfig } from '../src/index.js';
import type { PodLister } from '../src/index.js';
import { ObjectReader } from '../src/object-reader.js';
import { RESOURCES } from '../src/resources.js';

const POD_COUNT = Number(process.env.BENCH_PODS ?? 10_000);
const UPDATE_COUNT = Number(process.env.BENCH_UPDATES ?? 10_000);
const ROUNDS = 3;

const gc = exposeGc();

function exposeGc(): () => void {
  const existing = (globalThis as { gc?: () => void }).gc;
  if (existing) return existing;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

function heapUsed(): number {
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
}

function podSpec(i: number) {
  const node = `node-${i % 100}`;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `pod-${String(i).padStart(6, '0')}`,
      namespace: `ns-${i % 50}`,
      labels: { app: `app-${i % 200}`, 'pod-template-hash': '5d8f7c9b6d', tier: i % 2 ? 'web' : 'db' },
    },
    spec: {
      nodeName: node,
      containers: [
        {
          name: 'main',
          image: 'registry.k8s.io/pause:3.10',
          ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }],
        },
      ],
    },
    status: { phase: 'Running', podIP: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, podIPs: [{ ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}` }] },
  };
}

async function waitUntil(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve));
}

async function bareList(core: CoreV1Api, pageSize: number): Promise<{ ms: number; count: number }> {
  const started = performance.now();
  let count = 0;
  let token: string | undefined;
  do {
    const page = await core.listPodForAllNamespaces({ ...(pageSize > 0 && { limit: pageSize }), ...(token && { _continue: token }) });
    count += page.items.length;
    token = page.metadata?._continue || undefined;
  } while (token);
  return { ms: performance.now() - started, count };
}

async function informerSync(kubeConfig: KubeConfig, pageSize: number) {
  const factory = new InformerFactory({ kubeConfig, logger: pino({ level: 'warn' }), pageSize });
  const pods = factory.pods();
  const started = performance.now();
  await factory.start({ cacheSyncTimeoutMs: 300_000 });
  const ms = performance.now() - started;
  if (pods.list().length !== POD_COUNT) throw new Error(`lister holds ${pods.list().length} pods`);
  return { factory, pods, ms };
}

/** The watch stream is ordered, so once the last update is in the lister, all are. */
async function measureWatchDelivery(server: ApiServer, pods: PodLister): Promise<{ applyMs: number; deliveryMs: number }> {
  const targets = server.list('v1', 'Pod').slice(0, UPDATE_COUNT);
  const started = performance.now();
  for (const [i, target] of targets.entries()) {
    const updated = structuredClone(target);
    updated.metadata.labels = { ...updated.metadata.labels, revision: String(i) };
    server.update(updated);
  }
  const applyMs = performance.now() - started;
  const last = targets.at(-1)!;
  const expected = String(targets.length - 1);
  await waitUntil(() => pods.get(last.metadata.namespace ?? '', last.metadata.name ?? '')?.metadata?.labels?.revision === expected);
  return { applyMs, deliveryMs: performance.now() - started };
}

const perSecond = (count: number, ms: number) => Math.round((count / ms) * 1000);
const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);

const server = await startApiServer({ port: 0, historyLimit: UPDATE_COUNT + 1000 });
try {
  for (let i = 0; i < 50; i++) server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: `ns-${i}` } });
  for (let i = 0; i < POD_COUNT; i++) server.create(podSpec(i));
  const kubeConfig = loadKubeConfig({ kubeconfig: await server.writeKubeconfig(), env: {} });
  const core = kubeConfig.makeApiClient(CoreV1Api);
  await bareList(core, 0); // warm up the server, the HTTP path and the deserializer
  const jsonBytes = Buffer.byteLength(JSON.stringify(server.list('v1', 'Pod')));

  console.log(`informer benchmark: ${POD_COUNT} pods, ${UPDATE_COUNT} updates (node ${process.version})`);
  // Baseline: bare client-node lists, deserialized, nothing cached. Best of three for each side, as JIT warm-up
  // alone moves a single measurement by 2×.
  const bare = { ms: Infinity };
  for (let run = 0; run < ROUNDS; run++) {
    const result = await bareList(core, 0);
    if (result.count !== POD_COUNT) throw new Error('bare list miscounted');
    bare.ms = Math.min(bare.ms, result.ms);
  }
  let bestSingleMs = Infinity;
  for (let run = 1; run < ROUNDS; run++) {
    const warmup = await informerSync(kubeConfig, 0);
    bestSingleMs = Math.min(bestSingleMs, warmup.ms);
    await warmup.factory.stop();
  }
  let single: Awaited<ReturnType<typeof informerSync>> | undefined = await informerSync(kubeConfig, 0);
  bestSingleMs = Math.min(bestSingleMs, single.ms);
  console.log(`  list-sync, one request:    bare list ${bare.ms.toFixed(0)} ms; informer ${bestSingleMs.toFixed(0)} ms, ${perSecond(POD_COUNT, bestSingleMs)} pods/s; ratio informer/bare ${(bestSingleMs / bare.ms).toFixed(2)}`);

  await waitUntil(() => server.openWatches('pods') === 1);
  const delivery = await measureWatchDelivery(server, single.pods);
  console.log(`  watch delivery:            ${UPDATE_COUNT} updates in ${delivery.deliveryMs.toFixed(0)} ms end to end, ${perSecond(UPDATE_COUNT, delivery.deliveryMs)} updates/s; the server took ${delivery.applyMs.toFixed(0)} ms to apply them (ratio delivery/apply ${(delivery.deliveryMs / delivery.applyMs).toFixed(2)})`);
  const onNode = single.pods.listOnNode('node-7').length;
  if (onNode !== POD_COUNT / 100) throw new Error(`index: ${onNode} pods on node-7`);
  await single.factory.stop();

  // The cache's heap: with the lister, then without it once nothing refers to it any more.
  const withCache = heapUsed();
  single = undefined;
  await new Promise((resolve) => setTimeout(resolve, 100));
  const cacheBytes = withCache - heapUsed();
  console.log(`  heap held by the cache:    ${mb((cacheBytes / POD_COUNT) * 10_000)} MB per 10k pods; ratio heap/JSON size ${(cacheBytes / jsonBytes).toFixed(2)} (JSON ${mb(jsonBytes)} MB)`);

  // The shape check alone, on the same pods as plain JSON (best of three, as above).
  const reader = new ObjectReader(RESOURCES.pods);
  await reader.load();
  const rawPods = server.list('v1', 'Pod');
  let readMs = Infinity;
  for (let run = 0; run < ROUNDS; run++) {
    const copies = structuredClone(rawPods);
    const started = performance.now();
    for (const raw of copies) if (!reader.read(raw).ok) throw new Error('a benchmark pod is unreadable');
    readMs = Math.min(readMs, performance.now() - started);
  }
  console.log(`  shape check (ObjectReader): ${((readMs / POD_COUNT) * 1000).toFixed(1)} µs per pod, schema and deserialization; ${((readMs / bestSingleMs) * 100).toFixed(0)} % of the list-sync`);

  const barePaged = await bareList(core, 500);
  const paged = await informerSync(kubeConfig, 500);
  console.log(`  list-sync, pages of 500:   bare list ${barePaged.ms.toFixed(0)} ms; informer ${paged.ms.toFixed(0)} ms, ${perSecond(POD_COUNT, paged.ms)} pods/s; ratio informer/bare ${(paged.ms / barePaged.ms).toFixed(2)}`);
  console.log(`    (paging costs ${(barePaged.ms / bare.ms).toFixed(1)}× a single list here: the embedded server rereads the whole collection for each page)`);
  reportBench({
    plugin: 'kube',
    figures: [
      { name: 'list-sync / bare list', value: bestSingleMs / bare.ms, unit: 'x', better: 'lower' },
      { name: 'list-sync, pages of 500 / bare paged list', value: paged.ms / barePaged.ms, unit: 'x', better: 'lower' },
      { name: 'watch delivery / server apply', value: delivery.deliveryMs / delivery.applyMs, unit: 'x', better: 'lower' },
      { name: 'watch updates delivered', value: perSecond(UPDATE_COUNT, delivery.deliveryMs), unit: '/s', better: 'higher' },
      { name: 'cache heap / pods JSON size', value: cacheBytes / jsonBytes, unit: 'x', better: 'lower' },
      { name: 'cache heap per 10k pods', value: (cacheBytes / POD_COUNT) * 10_000 / 1024 / 1024, unit: 'MiB', better: 'lower' },
      { name: 'shape check per pod', value: (readMs / POD_COUNT) * 1000, unit: 'µs', better: 'lower' },
    ],
  });
  await paged.factory.stop();
} finally {
  await server.close();
}
