/** A request's abort signal: its own deadline, or its caller's stop, whichever comes first. */
export interface DeadlineSignal {
  readonly signal: AbortSignal;
  /** Whether the deadline, not the caller, aborted it. */
  timedOut(): boolean;
  /** Unlinks it from the caller's signal and clears its timer: call once the request has ended. */
  dispose(): void;
}

/** Node's timers wait at most this long; a longer deadline is none in effect. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A signal that aborts after `timeoutMs` or when `parent` aborts, linked to `parent` by hand. `AbortSignal.any` would
 * do the same, but on Node 20 it keeps every combined signal reachable from the long-lived parent (nodejs/node#55351):
 * the leader elector's stop signal gained one per Lease request, 64 a minute, for the life of the process.
 */
export function deadlineSignal(timeoutMs: number, parent?: AbortSignal): DeadlineSignal {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(
    () => {
      if (controller.signal.aborted) return;
      timedOut = true;
      controller.abort(new DOMException(`the request took more than ${timeoutMs} ms`, 'TimeoutError'));
    },
    Math.min(timeoutMs, MAX_TIMER_MS),
  );
  // As AbortSignal.timeout: a pending deadline keeps no process alive.
  timer.unref();
  const onParentAbort = (): void => controller.abort(parent?.reason);
  if (parent?.aborted) onParentAbort();
  else parent?.addEventListener('abort', onParentAbort, { once: true });
  return {
    signal: controller.signal,
    timedOut: () => timedOut,
    dispose: () => {
      clearTimeout(timer);
      parent?.removeEventListener('abort', onParentAbort);
    },
  };
}
