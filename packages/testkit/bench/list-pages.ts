/**
 * The embedded API server's list pages at 1k, 10k and 50k pods: a page of 500 (as informers and kubectl ask for)
 * should cost what the page costs, not a copy and sort of the whole collection.
 *
 * - a page in the middle of the collection (a `continue` token from the first page, or one taken halfway), over HTTP
 *   as an informer reads it, median of many;
 * - the same page while 200 pods changed since the first page (served at the first page's resourceVersion, so the
 *   server also undoes those changes);
 * - a page with a label selector that one pod in ten matches;
 * - every page of the collection one after another (what an informer's first list costs the server).
 *
 *   LIST_PAGES_SIZES=1000,10000,50000 npm run bench -w @kube-router/testkit
 */
import type { ApiServer } from '../src/apiserver/server.js';
import { startApiServer } from '../src/apiserver/server.js';
import type { BenchFigure } from '../src/bench/index.js';
import { reportBench } from '../src/bench/index.js';

const SIZES = (process.env.LIST_PAGES_SIZES ?? '1000,10000,50000').split(',').map(Number);
const PAGE = 500;
const SAMPLES = Number(process.env.LIST_PAGES_SAMPLES ?? 41);
const PODS_PER_NAMESPACE = 100;

const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const sizeName = (n: number) => (n >= 1000 ? `${n / 1000}k` : String(n));

function pod(i: number) {
  const ip = `10.${128 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `web-5d8f7c9b6d-${String(i).padStart(6, '0')}`,
      namespace: `ns-${Math.floor(i / PODS_PER_NAMESPACE)}`,
      labels: { app: `app-${i % 200}`, 'pod-template-hash': '5d8f7c9b6d', tier: i % 10 === 0 ? 'edge' : 'web' },
    },
    spec: {
      nodeName: `node-${i % 250}`,
      containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.10', ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }] }],
    },
    status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] },
  };
}

type ListBody = { items: unknown[]; metadata: { continue?: string } };

async function get(base: string, path: string): Promise<{ ms: number; body: ListBody }> {
  const started = performance.now();
  const response = await fetch(`${base}${path}`);
  const text = await response.text();
  const ms = performance.now() - started;
  if (!response.ok) throw new Error(`GET ${path}: ${response.status} ${text.slice(0, 300)}`);
  return { ms, body: JSON.parse(text) as ListBody };
}

const podName = (i: number) => `web-5d8f7c9b6d-${String(i).padStart(6, '0')}`;
const namespaceOf = (i: number) => `ns-${Math.floor(i / PODS_PER_NAMESPACE)}`;
/** A continue token of `token`'s resourceVersion that points halfway into the collection of `size` pods. */
function halfway(token: string, size: number): string {
  const { rv } = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { rv: number };
  const middle = Math.floor(size / 2);
  return Buffer.from(JSON.stringify({ rv, start: `${namespaceOf(middle)}/${podName(middle)}` })).toString('base64url');
}

interface Cluster {
  size: number;
  server: ApiServer;
  /** The path of a page halfway through the collection: what every later page of an informer's list costs. */
  page: string;
  first: string;
  selected: string;
  /** The same page at the resourceVersion before 200 pods changed: served as the collection was then. */
  changed: string;
  times: Record<'page' | 'first' | 'selected' | 'changed', number[]>;
}

// One server per size, all in this process, sampled in turns: the machine's load moves every size's figures alike,
// and the ratios hold.
const clusters: Cluster[] = [];
try {
  for (const size of SIZES) {
    const server = await startApiServer({ port: 0, historyLimit: 1000, validation: false });
    for (let i = 0; i < size; i++) {
      if (i % PODS_PER_NAMESPACE === 0) server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespaceOf(i) } });
      server.create(pod(i));
    }
    const before = (await get(server.url, `/api/v1/pods?limit=${PAGE}`)).body.metadata.continue as string;
    for (let i = 0; i < 200; i++) {
      const n = Math.floor((size / 200) * i);
      server.patch('v1', 'Pod', namespaceOf(n), podName(n), { metadata: { labels: { churn: 'yes' } } });
    }
    const now = (await get(server.url, `/api/v1/pods?limit=${PAGE}`)).body.metadata.continue as string;
    const page = `/api/v1/pods?limit=${PAGE}&continue=${halfway(now, size)}`;
    const expected = Math.min(PAGE, size - Math.floor(size / 2) - 1);
    if ((await get(server.url, page)).body.items.length !== expected) throw new Error(`the middle page at ${size} does not hold the ${expected} pods after the middle`);
    clusters.push({
      size,
      server,
      page,
      first: `/api/v1/pods?limit=${PAGE}`,
      selected: `/api/v1/pods?limit=${PAGE}&labelSelector=tier%3Dedge&continue=${halfway(now, size)}`,
      changed: `/api/v1/pods?limit=${PAGE}&continue=${halfway(before, size)}`,
      times: { page: [], first: [], selected: [], changed: [] },
    });
  }
  // Warm up the routes and the JIT before measuring.
  for (let round = 0; round < 5; round++) for (const cluster of clusters) await get(cluster.server.url, cluster.page);
  for (let round = 0; round < SAMPLES; round++) {
    for (const cluster of clusters) {
      for (const kind of ['page', 'first', 'selected', 'changed'] as const) cluster.times[kind].push((await get(cluster.server.url, cluster[kind])).ms);
    }
  }

  const figures: BenchFigure[] = [];
  for (const cluster of clusters) {
    // Every page, one after another, as an informer lists.
    const started = performance.now();
    let pages = 0;
    let next: string | undefined;
    do {
      next = (await get(cluster.server.url, `/api/v1/pods?limit=${PAGE}${next ? `&continue=${next}` : ''}`)).body.metadata.continue;
      pages++;
    } while (next);
    const wholeList = performance.now() - started;
    const name = sizeName(cluster.size);
    const [page, first, selected, changed] = (['page', 'first', 'selected', 'changed'] as const).map((kind) => median(cluster.times[kind]));
    figures.push(
      { name: `list page at ${name}`, value: page!, unit: 'ms', better: 'lower' },
      { name: `first list page at ${name}`, value: first!, unit: 'ms', better: 'lower' },
      { name: `list page, 200 changes since its first page, at ${name}`, value: changed!, unit: 'ms', better: 'lower' },
      { name: `list page with a label selector (1 in 10) at ${name}`, value: selected!, unit: 'ms', better: 'lower' },
      { name: `whole list in ${pages} pages at ${name}`, value: wholeList, unit: 'ms', better: 'lower' },
    );
  }
  const smallest = clusters[0]!;
  const ratios: BenchFigure[] = clusters.slice(1).map((cluster) => ({
    name: `list page at ${sizeName(cluster.size)} / at ${sizeName(smallest.size)}`,
    value: median(cluster.times.page) / median(smallest.times.page),
    unit: 'x',
    better: 'lower',
  }));
  reportBench({ plugin: 'testkit', figures: [...ratios, ...figures] });
} finally {
  for (const cluster of clusters) await cluster.server.close();
}
