/** One failure inside a sync, with the object it concerns (`service/default/web`, `policy/x/deny-all`, a route). */
export interface SyncFailure {
  object: string;
  error: unknown;
}

/**
 * Many failures of one sync, reported together. A sync attempts every independent step and joins what failed, so one
 * broken object never stops the rest from being programmed, and a partial failure still counts as a failed sync.
 */
export class JoinedSyncError extends AggregateError {
  readonly failures: readonly SyncFailure[];

  constructor(failures: readonly SyncFailure[], context?: string) {
    const head = `${context ? `${context}: ` : ''}${failures.length} failure${failures.length === 1 ? '' : 's'}`;
    super(
      failures.map((f) => f.error),
      `${head}: ${failures.map((f) => `${f.object}: ${messageOf(f.error)}`).join('; ')}`,
    );
    this.name = 'JoinedSyncError';
    this.failures = failures;
  }
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Collects the failures of a sync's independent steps. `attempt` never throws; `throwIfAny` ends the sync with a
 * JoinedSyncError when anything failed. Nested JoinedSyncErrors are flattened so each failure keeps its object.
 */
export class SyncFailures {
  readonly #failures: SyncFailure[] = [];

  get size(): number {
    return this.#failures.length;
  }

  get list(): readonly SyncFailure[] {
    return this.#failures;
  }

  add(object: string, error: unknown): void {
    if (error instanceof JoinedSyncError) this.#failures.push(...error.failures);
    else this.#failures.push({ object, error });
  }

  /** Runs one step; a failure is recorded against `object` and the step's result is undefined. */
  async attempt<T>(object: string, step: () => T | Promise<T>): Promise<T | undefined> {
    try {
      return await step();
    } catch (error) {
      this.add(object, error);
      return undefined;
    }
  }

  /** Runs `step` for every item, one after another, joining the failures. */
  async attemptEach<I>(items: Iterable<I>, objectOf: (item: I) => string, step: (item: I) => unknown): Promise<void> {
    for (const item of items) await this.attempt(objectOf(item), () => step(item));
  }

  throwIfAny(context?: string): void {
    if (this.#failures.length > 0) throw new JoinedSyncError([...this.#failures], context);
  }
}
