/**
 * The pod informer at 50,000 pods, against the embedded API server over HTTP, in one run:
 * - list memory: the heap (after GC) the synced cache holds per pod, against the pod's size as JSON;
 * - watch memory: the same once every pod has been replaced by a newer version through the watch (a cache that kept
 *   old versions, or the raw event text, shows here);
 * - event to sync request: from one pod's update on the server to the informer's change handler, which is where a
 *   controller requests its sync (median and p99 of single updates with the watch idle).
 *
 *   INFORMER_SCALE_PODS=50000 npm run bench -w @kube-router/kube
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { startApiServer } from '@kube-router/testkit';
import { reportBench } from '@kube-router/testkit/bench';
import { pino } from 'pino';
import { InformerFactory, loadKubeConfig } from '../src/index.js';

const POD_COUNT = Number(process.env.INFORMER_SCALE_PODS ?? 50_000);
const EVENT_SAMPLES = 200;
const NAMESPACES = Math.max(1, Math.ceil(POD_COUNT / 100));

const gc: () => void = (globalThis as { gc?: () => void }).gc ?? (setFlagsFromString('--expose-gc'), runInNewContext('gc') as () => void);
function heapAfterGc(): number {
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
}
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const percentile = (values: readonly number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((values.length * p) / 100))]!;

/** A pod as a ReplicaSet makes it: labels, an owner, one container with a port, probes and resources, a status. */
function pod(i: number) {
  const ip = `10.${128 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `web-5d8f7c9b6d-${String(i).padStart(6, '0')}`,
      namespace: `ns-${i % NAMESPACES}`,
      labels: { app: `app-${i % 200}`, 'pod-template-hash': '5d8f7c9b6d', tier: i % 2 ? 'web' : 'db' },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d8f7c9b6d', uid: '6f1c2f7e-1b1a-4f7e-9c1d-2b0a6d3c4e5f', controller: true }],
    },
    spec: {
      nodeName: `node-${i % 250}`,
      containers: [
        {
          name: 'main',
          image: 'registry.k8s.io/pause:3.10',
          ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }],
          resources: { requests: { cpu: '100m', memory: '128Mi' } },
          readinessProbe: { httpGet: { path: '/healthz', port: 8080 }, periodSeconds: 10 },
        },
      ],
    },
    status: { phase: 'Running', podIP: ip, podIPs: [{ ip }], hostIP: `192.168.${(i % 250) >> 8}.${i % 250}` },
  };
}

// The server shares this process's heap: a short watch history keeps what it holds of old versions out of the
// informer's figures (the watch streams as the server writes, so it never needs to resume from far back).
const server = await startApiServer({ port: 0, historyLimit: 1000 });
try {
  for (let n = 0; n < NAMESPACES; n++) server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: `ns-${n}` } });
  for (let i = 0; i < POD_COUNT; i++) server.create(pod(i));
  const jsonBytesPerPod = Buffer.byteLength(JSON.stringify(server.list('v1', 'Pod'))) / POD_COUNT;
  const kubeConfig = loadKubeConfig({ kubeconfig: await server.writeKubeconfig(), env: {} });

  const before = heapAfterGc();
  const factory = new InformerFactory({ kubeConfig, logger: pino({ level: 'warn' }) });
  const pods = factory.pods();
  let changes = 0;
  let changedAt = 0;
  factory.onChange('pods', () => {
    changes++;
    changedAt = performance.now();
  });
  // The API server shares this loop, so the stall is an upper bound of what the informer alone holds it for.
  const loopDelay = monitorEventLoopDelay({ resolution: 5 });
  loopDelay.enable();
  const listStarted = performance.now();
  await factory.start({ cacheSyncTimeoutMs: 600_000 });
  const listMs = performance.now() - listStarted;
  loopDelay.disable();
  const listStallMs = loopDelay.max / 1e6;
  if (pods.list().length !== POD_COUNT) throw new Error(`the lister holds ${pods.list().length} pods`);
  const listBytesPerPod = (heapAfterGc() - before) / POD_COUNT;

  // Every pod replaced by a newer version through the watch; the last one in the lister means all are.
  const all = server.list('v1', 'Pod');
  const watchStarted = performance.now();
  for (const [i, current] of all.entries()) {
    server.patch('v1', 'Pod', current.metadata.namespace, current.metadata.name!, { metadata: { labels: { revision: String(i) } } }, 'merge');
    if (i % 250 === 249) await sleep(0); // let the watch stream drain as the server writes
  }
  const last = all.at(-1)!;
  while (pods.get(last.metadata.namespace ?? '', last.metadata.name ?? '')?.metadata?.labels?.revision !== String(all.length - 1)) await sleep(5);
  const watchMs = performance.now() - watchStarted;
  const watchBytesPerPod = (heapAfterGc() - before) / POD_COUNT;

  // Single events with the watch idle: server write -> change handler (the controllers' requestSync).
  const latencies: number[] = [];
  for (let sample = 0; sample < EVENT_SAMPLES; sample++) {
    await sleep(20);
    const target = all[(sample * 211) % all.length]!;
    const seen = changes;
    const started = performance.now();
    server.patch('v1', 'Pod', target.metadata.namespace, target.metadata.name!, { metadata: { labels: { sample: String(sample) } } }, 'merge');
    while (changes === seen) await new Promise((resolve) => setImmediate(resolve));
    latencies.push(changedAt - started);
  }
  await factory.stop();

  const kib = (bytes: number) => (bytes / 1024).toFixed(2);
  console.log(`pod informer at ${POD_COUNT} pods (node ${process.version})`);
  console.log(`  list-sync ${listMs.toFixed(0)} ms, longest event-loop stall ${listStallMs.toFixed(0)} ms (server and informer share the loop); cache heap ${kib(listBytesPerPod)} KiB per pod (JSON ${kib(jsonBytesPerPod)} KiB, ratio ${(listBytesPerPod / jsonBytesPerPod).toFixed(2)})`);
  console.log(`  every pod updated through the watch in ${watchMs.toFixed(0)} ms; cache heap then ${kib(watchBytesPerPod)} KiB per pod (ratio to list ${(watchBytesPerPod / listBytesPerPod).toFixed(2)})`);
  console.log(`  watch event -> change handler: median ${percentile(latencies, 50).toFixed(2)} ms, p99 ${percentile(latencies, 99).toFixed(2)} ms, max ${Math.max(...latencies).toFixed(2)} ms`);
  const size = `${POD_COUNT / 1000}k pods`;
  reportBench({
    plugin: 'kube',
    figures: [
      { name: `${size}: list memory per pod`, value: listBytesPerPod / 1024, unit: 'KiB', better: 'lower' },
      { name: `${size}: list memory / JSON size`, value: listBytesPerPod / jsonBytesPerPod, unit: 'x', better: 'lower' },
      { name: `${size}: watch memory per pod`, value: watchBytesPerPod / 1024, unit: 'KiB', better: 'lower' },
      { name: `${size}: watch memory / list memory`, value: watchBytesPerPod / listBytesPerPod, unit: 'x', better: 'lower' },
      { name: `${size}: list-sync`, value: listMs, unit: 'ms', better: 'lower' },
      { name: `${size}: list-sync longest event-loop stall`, value: listStallMs, unit: 'ms', better: 'lower' },
      { name: `${size}: watch event -> sync request, median`, value: percentile(latencies, 50), unit: 'ms', better: 'lower' },
      { name: `${size}: watch event -> sync request, p99`, value: percentile(latencies, 99), unit: 'ms', better: 'lower' },
    ],
  });
} finally {
  await server.close();
}
