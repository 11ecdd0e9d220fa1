import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { HarnessEnforcer } from './harness.js';

// What both backends' sync benchmarks (bench/sync.ts) need besides the enforcer: metrics read back, commands in a
// namespace, the loop started, the time of each step.

const run = promisify(execFile);

/** The `_sum` of a histogram of the enforcer's registry: the seconds it observed in all. */
export async function metricSum(enforcer: HarnessEnforcer, name: string): Promise<number> {
  const values = (await enforcer.metrics.registry.getSingleMetric(name)?.get())?.values ?? [];
  return values.find((value) => (value as { metricName?: string }).metricName === `${name}_sum`)?.value ?? 0;
}

/** The value of a gauge of the enforcer's registry without labels. */
export async function gauge(enforcer: HarnessEnforcer, name: string): Promise<number> {
  return (await enforcer.metrics.registry.getSingleMetric(name)?.get())?.values[0]?.value ?? 0;
}

/** Runs a command in a network namespace and resolves with its stdout; `input` goes to its stdin. */
export async function inNetns(netns: string, command: string, args: readonly string[], input?: string): Promise<string> {
  if (input === undefined) return (await run('ip', ['netns', 'exec', netns, command, ...args], { maxBuffer: 1 << 28 })).stdout;
  return new Promise((resolve, reject) => {
    const child = execFile('ip', ['netns', 'exec', netns, command, ...args], { maxBuffer: 1 << 28 }, (error, stdout) =>
      error ? reject(error) : resolve(stdout),
    );
    child.stdin?.end(input);
  });
}

/** Starts the event-driven loop and lets its initial sync (a full re-read of the kernel) pass before measuring. */
export async function startScheduler(enforcer: HarnessEnforcer): Promise<void> {
  enforcer.scheduler.start();
  while (enforcer.scheduler.syncs < 1) await new Promise((resolve) => setTimeout(resolve, 10));
}

/** Logs each step of a bench with the seconds since it began; formats milliseconds. */
export function benchClock(): { step(what: string): void; ms(value: number): string } {
  const started = performance.now();
  return {
    step: (what) => console.error(`[${((performance.now() - started) / 1000).toFixed(1)} s] ${what}`),
    ms: (value) => `${value.toFixed(0)} ms`,
  };
}
