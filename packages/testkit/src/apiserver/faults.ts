import type { ApiError } from './errors.js';
import { errorForCode } from './errors.js';
import type { KubeVerb } from './resources.js';

/** Faults a test can inject into the embedded API server. */
export interface ApiServerFaults {
  /** Answers the next `times` (default 1) watch requests on `resource` (a plural, e.g. 'pods') with `status`. */
  failNextWatch(resource: string, status: number, times?: number): void;
  /** Answers the next `times` (default 1) requests of `verb` on `resource` with `status`. */
  failNextRequest(verb: KubeVerb, resource: string, status: number, times?: number): void;
  /** Ends every open watch stream, or those on one resource; returns how many were closed. */
  closeWatches(resource?: string): number;
  /**
   * Writes one line to every open watch stream on `resource`: `event` as JSON, or a string as it is (which need not
   * be JSON). For tests of clients that must survive what no store change produces: an event without an object, an
   * object without metadata, a line that is not JSON. Returns how many streams got it.
   */
  sendWatchEvent(resource: string, event: unknown): number;
  /** Compacts the change history: a watch from any resourceVersion before now gets 410 Expired. */
  expireResourceVersions(): void;
  /** Delays every response by `ms` milliseconds (0 turns it off). */
  setLatency(ms: number): void;
  /** Clears pending failures and latency. */
  reset(): void;
}

interface PendingFailure {
  verb: KubeVerb;
  resource: string;
  status: number;
  remaining: number;
}

/** The fault state the HTTP layer consults; closing watches and compaction are delegated to their owners. */
export class FaultInjector implements ApiServerFaults {
  latencyMs = 0;
  private readonly pending: PendingFailure[] = [];

  constructor(
    private readonly closeWatchStreams: (resource?: string) => number,
    private readonly compactHistory: () => void,
    private readonly writeWatchLine: (resource: string, line: string) => number,
  ) {}

  failNextWatch(resource: string, status: number, times = 1): void {
    this.failNextRequest('watch', resource, status, times);
  }

  failNextRequest(verb: KubeVerb, resource: string, status: number, times = 1): void {
    this.pending.push({ verb, resource, status, remaining: times });
  }

  closeWatches(resource?: string): number {
    return this.closeWatchStreams(resource);
  }

  sendWatchEvent(resource: string, event: unknown): number {
    return this.writeWatchLine(resource, typeof event === 'string' ? event : JSON.stringify(event));
  }

  expireResourceVersions(): void {
    this.compactHistory();
  }

  setLatency(ms: number): void {
    this.latencyMs = Math.max(0, ms);
  }

  reset(): void {
    this.pending.length = 0;
    this.latencyMs = 0;
  }

  /** The injected failure for this request, if one is pending; consumes it. */
  take(verb: KubeVerb, resource: string): ApiError | undefined {
    const index = this.pending.findIndex((failure) => failure.verb === verb && failure.resource === resource);
    if (index < 0) return undefined;
    const failure = this.pending[index] as PendingFailure;
    if (--failure.remaining <= 0) this.pending.splice(index, 1);
    return errorForCode(failure.status, `injected fault: ${verb} ${resource} fails with ${failure.status}`);
  }
}
