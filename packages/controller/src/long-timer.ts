/**
 * The longest delay Node's timers take: a signed 32-bit number of milliseconds (about 24.8 days). A longer delay is
 * not an error there: the timer fires after 1 ms, with only a TimeoutOverflowWarning, so that a sync timeout derived
 * from `--loadbalancer-sync-period=720h` would fail every sync at once.
 */
export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

export interface LongTimer {
  clear(): void;
}

/**
 * setTimeout for any delay the agent accepts: a delay beyond MAX_TIMER_DELAY_MS is waited out in chunks, and an
 * infinite one never fires. Negative and NaN delays fire at once, as setTimeout's do.
 */
export function setLongTimeout(callback: () => void, delayMs: number): LongTimer {
  if (delayMs === Number.POSITIVE_INFINITY) return { clear() {} };
  const dueAt = performance.now() + Math.max(0, delayMs || 0);
  let timer: NodeJS.Timeout;
  const arm = () => {
    const remaining = dueAt - performance.now();
    if (remaining <= MAX_TIMER_DELAY_MS) timer = setTimeout(callback, Math.max(0, remaining));
    else timer = setTimeout(arm, MAX_TIMER_DELAY_MS);
  };
  arm();
  return { clear: () => clearTimeout(timer) };
}
