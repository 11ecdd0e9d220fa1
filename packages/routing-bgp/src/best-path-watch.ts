import type { Logger } from 'pino';
import type { GobgpClient, WatchHandlers } from './gobgp-api.js';

export interface BestPathWatchOptions {
  gobgp: () => Pick<GobgpClient, 'watchEvents'>;
  /** What the stream reports: best-path changes and peer state changes. */
  handlers: Pick<WatchHandlers, 'onPaths' | 'onSnapshot' | 'onPeerChange'>;
  /** The stream ended on its own (gobgpd went away): asks for a sync, which watches again once gobgpd answers. */
  onLost(): void;
  /**
   * The stream ended on its own, called at once (onLost follows after the pause): a table that `reopen` asked for and
   * that had not come yet will not come on it.
   */
  onEnd?(error?: Error): void;
  logger: Logger;
  retryDelayMs?: number;
}

/**
 * gobgpd's event stream of best paths and peer states: learned routes follow it between syncs. At most one stream is
 * open; a stream that ends asks for a sync after a pause rather than reconnecting in a loop while gobgpd is down.
 */
export class BestPathWatch {
  #cancel: (() => void) | undefined;
  #retry: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(private readonly options: BestPathWatchOptions) {}

  get watching(): boolean {
    return this.#cancel !== undefined;
  }

  /** Opens the stream unless one is open. */
  ensure(): void {
    if (this.#stopped || this.#cancel) return;
    this.#cancel = this.options.gobgp().watchEvents({
      ...this.options.handlers,
      onEnd: (error) => {
        this.#cancel = undefined;
        if (this.#stopped) return;
        this.options.onEnd?.(error);
        this.options.logger.debug({ err: error }, 'gobgp event watch ended; watching again');
        clearTimeout(this.#retry);
        this.#retry = setTimeout(() => this.options.onLost(), this.options.retryDelayMs ?? 1_000);
      },
    });
  }

  /**
   * A new stream in place of the open one, which starts with gobgpd's table as it is now: what the old stream had
   * queued behind (gobgpd sends a burst path by path, slower than it receives it) is dropped rather than read.
   * Returns whether it did: with no stream open (or stopped) no table is on its way, and none should be waited for.
   */
  reopen(): boolean {
    if (this.#stopped || !this.#cancel) return false;
    this.cancel();
    this.ensure();
    return this.#cancel !== undefined;
  }

  /** The stream is on a gobgpd that is gone or was reset: the next `ensure` opens a new one. */
  cancel(): void {
    this.#cancel?.();
    this.#cancel = undefined;
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#retry);
    this.cancel();
  }
}
