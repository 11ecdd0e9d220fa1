/**
 * Long compiles are written as generators that yield between units of work (a batch of pods, one policy), so that
 * one implementation serves both the synchronous compile and the one that gives the event loop a turn between slices.
 */
export type Steps<T> = Generator<void, T, void>;

/** Runs every step at once. */
export function runToEnd<T>(steps: Steps<T>): T {
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/** Runs the steps in slices of about `sliceMs` of CPU, yielding to the event loop (setImmediate) between slices. */
export async function runInSlices<T>(steps: Steps<T>, sliceMs: number): Promise<T> {
  let sliceStarted = performance.now();
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    if (performance.now() - sliceStarted >= sliceMs) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      sliceStarted = performance.now();
    }
  }
}
