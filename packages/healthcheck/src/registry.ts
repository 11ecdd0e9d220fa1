/**
 * Heartbeats and staleness windows.
 *
 * A heartbeat asserts only that a component's loop is not wedged. It says nothing about whether the last sync
 * succeeded: that is what the sync metrics are for. A component is stale when it has not beaten within its window
 * (sync period plus a grace), measured from its registration until its first beat.
 */

export interface ComponentOptions {
  /** How often the component's loop runs at least, in milliseconds. */
  syncPeriodMs: number;
  /** Extra time granted on top of the sync period before the component counts as stale. */
  graceMs?: number;
  /** Overrides syncPeriodMs + graceMs altogether. */
  windowMs?: number;
}

export interface CheckResult {
  name: string;
  ok: boolean;
  /** Why the check failed; absent when ok. */
  reason?: string;
}

export interface ComponentStatus {
  name: string;
  windowMs: number;
  registeredAt: number;
  lastBeatAt: number | undefined;
  beats: number;
  /** True once a sync has ended, whatever its outcome. */
  firstSyncEnded: boolean;
}

/** The handle a component beats through. runSync is the only code that should call it. */
export interface HealthComponent {
  readonly name: string;
  beat(): void;
  /** Marks that a sync has ended (successfully or not): feeds readiness, never liveness. */
  syncEnded(): void;
}

export type ReadinessCheck = () => string | undefined;

export interface HealthRegistryOptions {
  /** Grace added to each component's sync period unless the component sets its own. Default 30 s. */
  defaultGraceMs?: number;
  /** Per-component window overrides by name, applied at registration (the operator's word wins). */
  windowOverridesMs?: Record<string, number>;
  /** Clock, for tests. */
  now?: () => number;
}

const NAME_PATTERN = /^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/;

export class HealthRegistry {
  readonly #components = new Map<string, ComponentStatus>();
  readonly #readinessChecks = new Map<string, ReadinessCheck>();
  readonly #defaultGraceMs: number;
  readonly #overrides: Record<string, number>;
  readonly #now: () => number;

  constructor(options: HealthRegistryOptions = {}) {
    this.#defaultGraceMs = options.defaultGraceMs ?? 30_000;
    this.#overrides = { ...options.windowOverridesMs };
    this.#now = options.now ?? Date.now;
  }

  /** Registers a component at runtime. Names are free-form ids (lowercase, digits, `.`, `_`, `-`). */
  register(name: string, options: ComponentOptions): HealthComponent {
    if (!NAME_PATTERN.test(name)) throw new Error(`invalid health component name ${JSON.stringify(name)}`);
    if (this.#components.has(name)) throw new Error(`health component ${name} is already registered`);
    if (!(options.syncPeriodMs > 0)) throw new Error(`health component ${name}: syncPeriodMs must be positive`);
    const windowMs =
      this.#overrides[name] ?? options.windowMs ?? options.syncPeriodMs + (options.graceMs ?? this.#defaultGraceMs);
    const status: ComponentStatus = {
      name,
      windowMs,
      registeredAt: this.#now(),
      lastBeatAt: undefined,
      beats: 0,
      firstSyncEnded: false,
    };
    this.#components.set(name, status);
    return {
      name,
      beat: () => {
        status.lastBeatAt = this.#now();
        status.beats++;
      },
      syncEnded: () => {
        status.firstSyncEnded = true;
      },
    };
  }

  /**
   * Judges the components that have not beaten yet from now on. The agent calls it when the loops start: a
   * component registers when its plugin is created, and the wait for informer caches in between is not its loop's
   * time, so a slow cache sync on a large cluster must not count against its window.
   */
  restartClocks(): void {
    const now = this.#now();
    for (const component of this.#components.values()) {
      if (component.lastBeatAt === undefined) component.registeredAt = now;
    }
  }

  /** Adds a readiness condition, such as "informers have synced". It returns a reason while not ready. */
  addReadinessCheck(name: string, check: ReadinessCheck): void {
    this.#readinessChecks.set(name, check);
  }

  status(name: string): ComponentStatus | undefined {
    const status = this.#components.get(name);
    return status && { ...status };
  }

  /** Liveness of every component: stale ones fail. */
  livenessChecks(): CheckResult[] {
    const now = this.#now();
    return [...this.#components.values()].map((component) => {
      const since = component.lastBeatAt ?? component.registeredAt;
      const age = now - since;
      if (age <= component.windowMs) return { name: component.name, ok: true };
      const what = component.lastBeatAt === undefined ? 'no heartbeat since registration' : 'last heartbeat';
      return {
        name: component.name,
        ok: false,
        reason: `${what} ${seconds(age)} ago, window ${seconds(component.windowMs)}`,
      };
    });
  }

  /** Readiness: the agent's own conditions, then every component's first sync. */
  readinessChecks(): CheckResult[] {
    const results: CheckResult[] = [...this.#readinessChecks].map(([name, check]) => {
      const reason = safeCheck(check);
      return reason === undefined ? { name, ok: true } : { name, ok: false, reason };
    });
    for (const component of this.#components.values()) {
      results.push(
        component.firstSyncEnded
          ? { name: component.name, ok: true }
          : { name: component.name, ok: false, reason: 'first sync has not ended yet' },
      );
    }
    return results;
  }
}

function safeCheck(check: ReadinessCheck): string | undefined {
  try {
    return check();
  } catch (error) {
    return `check threw: ${error instanceof Error ? error.message : String(error)}`;
  }
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`;
}
