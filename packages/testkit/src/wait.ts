export interface WaitOptions {
  /** Default 30 s: BGP sessions and lab pods take seconds on a loaded machine. */
  timeoutMs?: number;
  /** Between checks; default 50 ms. */
  intervalMs?: number;
}

/**
 * Polls `check` until it returns true and resolves with the milliseconds that took. A check that throws counts as
 * "not yet" (a probe of a daemon that is still starting), and its last error is part of the timeout's message, so a
 * failed wait says what it was waiting for and what it last saw. The repository's one waiter: tests, benches and the
 * lab all use it.
 */
export async function waitFor(
  what: string,
  check: () => boolean | Promise<boolean>,
  options: number | WaitOptions = {},
): Promise<number> {
  const { timeoutMs = 30_000, intervalMs = 50 } = typeof options === 'number' ? { timeoutMs: options } : options;
  const started = performance.now();
  let lastError: unknown;
  for (;;) {
    try {
      if (await check()) return performance.now() - started;
      lastError = undefined;
    } catch (error) {
      lastError = error;
    }
    if (performance.now() - started >= timeoutMs) {
      const seen = lastError === undefined ? '' : ` (last error: ${lastError instanceof Error ? lastError.message : String(lastError)})`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${seen}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
