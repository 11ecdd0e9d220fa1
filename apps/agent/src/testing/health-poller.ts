import { Worker } from 'node:worker_threads';

export interface ProbeResult {
  /** Milliseconds since the poll started. */
  at: number;
  status: number;
  latencyMs: number;
  body: string;
  error?: string;
}

// Runs in its own thread so that its timers and clock keep going while the agent's event loop is busy: a poller on
// the agent's own loop would be stalled along with it and under-report the delay.
const POLLER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const http = require('node:http');
const { url, intervalMs, durationMs, timeoutMs } = workerData;
function probe() {
  return new Promise((resolve) => {
    const started = performance.now();
    // Like the kubelet: a new connection per probe, closed afterwards.
    const request = http.get(url, { agent: false, headers: { connection: 'close' } }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode, latencyMs: performance.now() - started, body }));
    });
    request.setTimeout(timeoutMs, () => request.destroy(new Error('probe timed out')));
    request.on('error', (error) => resolve({ status: 0, latencyMs: performance.now() - started, body: '', error: error.message }));
  });
}
(async () => {
  // A few unreported probes first: the first request of a thread pays for loading and compiling the HTTP client,
  // which says nothing about the server. The kubelet's prober is warm too.
  for (let i = 0; i < 3; i++) await probe();
  parentPort.postMessage({ ready: true });
  const results = [];
  const begin = performance.now();
  let next = begin;
  while (performance.now() - begin < durationMs) {
    const at = performance.now() - begin;
    results.push({ at, ...(await probe()) });
    next += intervalMs;
    const wait = next - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    else next = performance.now();
  }
  parentPort.postMessage({ results });
})();
`;

export interface HealthPoll {
  /** Resolves once the poller is warm and its timed probes begin. */
  ready: Promise<void>;
  /** Every timed probe with its latency, once durationMs has passed. */
  results: Promise<ProbeResult[]>;
}

/** Probes `url` every intervalMs for durationMs from a separate thread and returns every answer with its latency. */
export function pollHealth(
  url: string,
  options: { intervalMs?: number; durationMs: number; timeoutMs?: number },
): HealthPoll {
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const results = new Promise<ProbeResult[]>((resolve, reject) => {
    const worker = new Worker(POLLER_SOURCE, {
      eval: true,
      workerData: {
        url,
        intervalMs: options.intervalMs ?? 50,
        durationMs: options.durationMs,
        timeoutMs: options.timeoutMs ?? 10_000,
      },
    });
    worker.on('message', (message: { ready?: true; results?: ProbeResult[] }) => {
      if (message.ready) markReady();
      if (message.results) {
        resolve(message.results);
        void worker.terminate();
      }
    });
    worker.once('error', reject);
  });
  return { ready, results };
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] as number;
}
