export interface BackoffOptions {
  /** First delay. Default 1 s. */
  initialMs?: number;
  /** Cap. Default 30 s. */
  maxMs?: number;
  /** Spread each delay by up to this fraction, so that agents on every node do not retry in step. Default 0.2. */
  jitter?: number;
  random?: () => number;
}

/** Capped exponential backoff: initial, 2×, 4×, … up to the cap, each spread by a little jitter. */
export class Backoff {
  readonly initialMs: number;
  readonly maxMs: number;
  readonly #jitter: number;
  readonly #random: () => number;
  #attempt = 0;

  constructor(options: BackoffOptions = {}) {
    this.initialMs = options.initialMs ?? 1000;
    this.maxMs = options.maxMs ?? 30_000;
    this.#jitter = options.jitter ?? 0.2;
    this.#random = options.random ?? Math.random;
    if (!(this.initialMs > 0) || !(this.maxMs >= this.initialMs)) {
      throw new Error(`invalid backoff: initial ${this.initialMs} ms, max ${this.maxMs} ms`);
    }
  }

  /** The delay before the next attempt. */
  next(): number {
    const base = Math.min(this.maxMs, this.initialMs * 2 ** Math.min(this.#attempt, 30));
    this.#attempt++;
    const spread = base * this.#jitter * this.#random();
    return Math.round(Math.min(this.maxMs, base + spread));
  }

  reset(): void {
    this.#attempt = 0;
  }

  get attempts(): number {
    return this.#attempt;
  }
}
