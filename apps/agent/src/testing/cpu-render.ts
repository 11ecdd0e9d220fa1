import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';

/**
 * Stand-ins for a controller rendering a large rule set: CPU-bound work for a given time. Three ways to run it show
 * what keeps /healthz answering: in a worker thread, on the event loop in short slices, or blocking (the anti-pattern).
 */

/** One slice of "rendering": formats rule lines, as an iptables-restore renderer would. */
function renderSlice(untilMs: number, seed: number): number {
  let lines = 0;
  let text = '';
  while (performance.now() < untilMs) {
    for (let i = 0; i < 200; i++, lines++) {
      text += `-A KUBE-ROUTER-NWPLCY-${(seed + lines).toString(36)} -m set --match-set KUBE-SRC-${lines % 977} src -j ACCEPT\n`;
    }
    if (text.length > 1 << 20) text = '';
  }
  return lines;
}

/** Renders on the event loop, yielding after every slice so that I/O (a probe) is served in between. */
export async function renderYielding(durationMs: number, sliceMs = 5, onProgress?: () => void): Promise<number> {
  const end = performance.now() + durationMs;
  let lines = 0;
  let nextProgress = performance.now() + 100;
  while (performance.now() < end) {
    lines += renderSlice(Math.min(end, performance.now() + sliceMs), lines);
    if (onProgress && performance.now() >= nextProgress) {
      onProgress();
      nextProgress += 100;
    }
    await yieldToEventLoop();
  }
  return lines;
}

/** Renders on the event loop without yielding: every probe waits until it ends. For contrast only. */
export function renderBlocking(durationMs: number): number {
  return renderSlice(performance.now() + durationMs, 0);
}

// The worker runs plain JavaScript from a string, so it needs no TypeScript loader whatever runs the tests.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
// Linux nice values are per thread: this lowers the render thread only, so that on a busy node the event loop that
// answers the kubelet's probes wins the CPU over the agent's own rendering. Lowering needs no privilege.
try { require('node:os').setPriority(workerData.nice); } catch {}
${renderSlice.toString()}
const end = performance.now() + workerData.durationMs;
let lines = 0;
while (performance.now() < end) {
  lines += renderSlice(Math.min(end, performance.now() + workerData.progressEveryMs), lines);
  parentPort.postMessage({ progress: lines });
}
parentPort.postMessage({ done: lines });
`;

/**
 * Renders in a worker thread at a lower CPU priority (nice 10 by default): the event loop stays free, and each
 * progress message beats for the sync.
 */
export function renderInWorker(
  durationMs: number,
  options: { onProgress?: () => void; signal?: AbortSignal; progressEveryMs?: number; nice?: number } = {},
): Promise<number> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { durationMs, progressEveryMs: options.progressEveryMs ?? 100, nice: options.nice ?? 10 },
    });
    const abort = () => void worker.terminate().then(() => reject(options.signal?.reason ?? new Error('aborted')));
    options.signal?.addEventListener('abort', abort, { once: true });
    worker.on('message', (message: { progress?: number; done?: number }) => {
      if (message.done !== undefined) {
        options.signal?.removeEventListener('abort', abort);
        resolve(message.done);
        void worker.terminate();
      } else options.onProgress?.();
    });
    worker.on('error', reject);
    worker.on('exit', (code) => {
      if (code !== 0) reject(new Error(`render worker exited with code ${code}`));
    });
  });
}
