import { Observable } from '@kubernetes/client-node';
import type { ConfigurationOptions, ObservableMiddleware, RequestContext, ResponseContext } from '@kubernetes/client-node';
import { deadlineSignal } from './deadline-signal.js';

export class KubeRequestTimeoutError extends Error {
  constructor(what: string, timeoutMs: number) {
    super(`${what}: no response from the API server within ${timeoutMs} ms`);
    this.name = 'KubeRequestTimeoutError';
  }
}

/**
 * Calls one of client-node's generated API methods with a bound on its duration. client-node sets no timeout of its
 * own, and a call that hangs (a black-holed API server) would otherwise hang its caller for ever, be it an informer's
 * list or a leader's renewal. `signal` aborts the call early (on stop).
 */
export async function callApi<T>(
  what: string,
  timeoutMs: number,
  call: (options: ConfigurationOptions) => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  const deadline = deadlineSignal(timeoutMs, signal);
  const middleware: ObservableMiddleware = {
    pre(context: RequestContext): Observable<RequestContext> {
      context.setSignal(deadline.signal);
      return new Observable(Promise.resolve(context));
    },
    post(context: ResponseContext): Observable<ResponseContext> {
      return new Observable(Promise.resolve(context));
    },
  };
  try {
    return await call({ middleware: [middleware], middlewareMergeStrategy: 'append' });
  } catch (error) {
    if (deadline.timedOut()) throw new KubeRequestTimeoutError(what, timeoutMs);
    throw error;
  } finally {
    deadline.dispose();
  }
}
