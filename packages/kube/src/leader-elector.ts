import type { KubeConfig } from '@kubernetes/client-node';
import type { AgentMetrics } from '@kube-router/metrics';
import type { Logger } from 'pino';
import type { Gauge, Registry } from 'prom-client';
import { describeKubeError } from './api-errors.js';
import { LeaseConflictError, LeaseLock } from './lease-lock.js';
import type { LeaderElectionRecord, ObservedLease } from './lease-lock.js';
import { gaugeOn } from '@kube-router/metrics';

/** kube-router's leader election timings. */
export const DEFAULT_LEASE_DURATION_MS = 15_000;
export const DEFAULT_RENEW_DEADLINE_MS = 10_000;
export const DEFAULT_RETRY_PERIOD_MS = 2_000;

export interface LeaderElectorOptions {
  kubeConfig: KubeConfig;
  /** The Lease's namespace and name. */
  namespace: string;
  name: string;
  /** This candidate's unique identity: POD_NAME, else the host name (see resolveIdentity). */
  identity: string;
  /** How long other candidates wait after the last renewal they saw before taking over. Default 15 s. */
  leaseDurationMs?: number;
  /** A leader that has not renewed within this steps down. Must be shorter than the lease duration. Default 10 s. */
  renewDeadlineMs?: number;
  /** Between attempts to acquire or renew. Default 2 s. */
  retryPeriodMs?: number;
  /** Bound on each API call. Default half the renew deadline. */
  requestTimeoutMs?: number;
  /** Called when this candidate becomes leader; `signal` is aborted when it stops leading. Must not block. */
  onStartedLeading?: (signal: AbortSignal) => void;
  /** Called when this candidate stops leading, before another candidate can take the lease. */
  onStoppedLeading?: () => void;
  /** Called when the observed leader changes (including to this candidate); '' when the lease is released. */
  onNewLeader?: (identity: string) => void;
  logger: Logger;
  /** Adds kube_router_leader_election_is_leader{lease} to the agent's registry. */
  metrics?: AgentMetrics | Registry;
  now?: () => number;
  random?: () => number;
}

export interface StopOptions {
  /** Release the lease if leading, so another candidate takes over at once. Default true. */
  release?: boolean;
}

/** client-go's jitter for candidates' retries: each wait is the retry period plus up to 1.2 times it. */
const JITTER_FACTOR = 1.2;

/**
 * Leader election on a coordination.k8s.io/v1 Lease, as client-go does it:
 * - a candidate takes the lease only when it is free, released, or its holder has not renewed it for a lease
 *   duration as measured on the candidate's own clock from when it last saw the lease change (no clock-skew trust);
 * - every write carries the resourceVersion read before it, so concurrent candidates cannot both win (409);
 * - a leader that cannot renew within the renew deadline (shorter than the lease duration) steps down, and
 *   isLeader() turns false at that deadline even if the event loop is late to run the step-down.
 * After stepping down, the elector keeps running as a candidate and can lead again.
 */
export class LeaderElector {
  readonly identity: string;
  readonly #lock: LeaseLock;
  readonly #options: LeaderElectorOptions;
  readonly #leaseDurationMs: number;
  readonly #renewDeadlineMs: number;
  readonly #retryPeriodMs: number;
  readonly #now: () => number;
  readonly #random: () => number;
  readonly #log: Logger;
  readonly #gauge: Gauge<'lease'> | undefined;
  #running = false;
  #loop: Promise<void> | undefined;
  #stopping = new AbortController();
  #wake: (() => void) | undefined;
  #leading = false;
  #leadership: AbortController | undefined;
  /** When the last successful write of this leader was sent: its lease runs from no earlier than that. */
  #renewedAt = 0;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #observed: ObservedLease | undefined;
  #observedAt = 0;
  #knownLeader: string | undefined;

  constructor(options: LeaderElectorOptions) {
    this.#options = options;
    this.identity = options.identity;
    this.#leaseDurationMs = options.leaseDurationMs ?? DEFAULT_LEASE_DURATION_MS;
    this.#renewDeadlineMs = options.renewDeadlineMs ?? DEFAULT_RENEW_DEADLINE_MS;
    this.#retryPeriodMs = options.retryPeriodMs ?? DEFAULT_RETRY_PERIOD_MS;
    if (!options.identity) throw new Error('leader election needs a non-empty identity');
    if (!(this.#leaseDurationMs > this.#renewDeadlineMs)) {
      throw new Error(`lease duration (${this.#leaseDurationMs} ms) must exceed the renew deadline (${this.#renewDeadlineMs} ms)`);
    }
    if (!(this.#renewDeadlineMs > this.#retryPeriodMs * JITTER_FACTOR)) {
      throw new Error(
        `renew deadline (${this.#renewDeadlineMs} ms) must exceed ${JITTER_FACTOR} × the retry period (${this.#retryPeriodMs} ms)`,
      );
    }
    this.#now = options.now ?? Date.now;
    this.#random = options.random ?? Math.random;
    this.#lock = new LeaseLock(
      options.kubeConfig,
      options.namespace,
      options.name,
      options.requestTimeoutMs ?? Math.max(1, Math.floor(this.#renewDeadlineMs / 2)),
    );
    this.#log = options.logger.child({ lease: this.#lock.description, identity: options.identity });
    const registry = options.metrics && 'registry' in options.metrics ? options.metrics.registry : options.metrics;
    if (registry) {
      this.#gauge = gaugeOn(registry, {
        name: 'kube_router_leader_election_is_leader',
        help: 'Whether this agent holds the leader election Lease (1) or not (0)',
        labelNames: ['lease'],
      });
      this.#gauge.set({ lease: this.#lock.description }, 0);
    }
  }

  /** Starts campaigning in the background; returns at once. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#stopping = new AbortController();
    // #run handles its own failures; this is the last line against an unhandled rejection that would end the agent.
    this.#loop = this.#run().catch((error: unknown) => {
      this.#running = false;
      this.#stepDown('the election loop failed');
      this.#log.error({ err: describeKubeError(error) }, 'leader election stopped: its loop failed');
    });
  }

  /** True while this candidate leads and its last renewal is within the renew deadline. */
  isLeader(): boolean {
    return this.#leading && this.#now() - this.#renewedAt < this.#renewDeadlineMs;
  }

  /** The identity in the Lease as last seen ('' when released), if any was seen. */
  get leader(): string | undefined {
    return this.#knownLeader;
  }

  /** Stops campaigning; if leading, stops leading (onStoppedLeading runs) and then releases the lease. */
  async stop(options: StopOptions = {}): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    const wasLeading = this.#leading;
    this.#stepDown('elector stopped');
    this.#stopping.abort();
    this.#wake?.();
    await this.#loop;
    if (wasLeading && (options.release ?? true)) await this.#release();
  }

  async #run(): Promise<void> {
    while (this.#running) {
      const attemptStartedAt = this.#now();
      const outcome = await this.#tryAcquireOrRenew(attemptStartedAt);
      if (!this.#running) break;
      // The deadline passed while the attempt was under way and before the deadline timer could run.
      if (this.#leading && !this.isLeader()) {
        this.#stepDown(`could not renew the lease within the renew deadline (${this.#renewDeadlineMs} ms)`);
      }
      // A write that took longer than the renew deadline gives no time to lead: the next attempt will renew it.
      if (outcome === 'held' && this.#now() - attemptStartedAt < this.#renewDeadlineMs) {
        this.#renewedAt = attemptStartedAt;
        if (!this.#leading) this.#startLeading();
        else this.#armDeadline();
      } else if (this.#leading && outcome === 'taken') {
        this.#stepDown(`the lease is now held by ${this.#knownLeader || 'nobody'}`);
      }
      // A failed renewal is retried until the renew deadline, which the deadline timer enforces.
      const wait = this.#leading
        ? this.#retryPeriodMs
        : this.#retryPeriodMs * (1 + JITTER_FACTOR * this.#random());
      await this.#sleep(wait);
    }
  }

  /** 'held': this candidate holds the lease now; 'taken': someone else does; 'failed': the API call failed. */
  async #tryAcquireOrRenew(attemptStartedAt: number): Promise<'held' | 'taken' | 'failed'> {
    const signal = this.#stopping.signal;
    const leaseDurationSeconds = Math.ceil(this.#leaseDurationMs / 1000);
    try {
      const current = await this.#lock.get(signal);
      if (!current) {
        const now = new Date(attemptStartedAt);
        const created = await this.#lock.create(
          { holderIdentity: this.identity, leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
          signal,
        );
        this.#see(created);
        return 'held';
      }
      this.#see(current);
      const holder = current.record.holderIdentity;
      if (holder && holder !== this.identity && this.#leaseValid(current.record)) return 'taken';
      const now = new Date(attemptStartedAt);
      const record: LeaderElectionRecord = {
        holderIdentity: this.identity,
        leaseDurationSeconds,
        acquireTime: holder === this.identity ? current.record.acquireTime : now,
        renewTime: now,
        leaseTransitions: holder === this.identity ? current.record.leaseTransitions : current.record.leaseTransitions + 1,
      };
      this.#see(await this.#lock.update(current, record, signal));
      return 'held';
    } catch (error) {
      if (signal.aborted) return 'failed';
      if (error instanceof LeaseConflictError) {
        this.#log.debug('lost a race for the lease (409 Conflict)');
        return 'taken';
      }
      this.#log.warn({ err: describeKubeError(error) }, this.#leading ? 'failed to renew the lease' : 'failed to read or acquire the lease');
      return 'failed';
    }
  }

  /** Validity as seen from here: from when this candidate saw the record change, not from the holder's clock. */
  #leaseValid(record: LeaderElectionRecord): boolean {
    const durationMs = Math.max(record.leaseDurationSeconds * 1000, this.#leaseDurationMs);
    return this.#observedAt + durationMs > this.#now();
  }

  #see(observed: ObservedLease): void {
    if (this.#observed?.resourceVersion !== observed.resourceVersion) {
      this.#observed = observed;
      this.#observedAt = this.#now();
    }
    const holder = observed.record.holderIdentity;
    if (holder !== this.#knownLeader) {
      this.#knownLeader = holder;
      if (holder !== this.identity) this.#log.info({ leader: holder || undefined }, holder ? 'new leader observed' : 'lease released');
      this.#callback('onNewLeader', () => this.#options.onNewLeader?.(holder));
    }
  }

  #startLeading(): void {
    this.#leading = true;
    this.#leadership = new AbortController();
    this.#armDeadline();
    this.#gauge?.set({ lease: this.#lock.description }, 1);
    this.#log.info('started leading');
    const signal = this.#leadership.signal;
    this.#callback('onStartedLeading', () => this.#options.onStartedLeading?.(signal));
  }

  #armDeadline(): void {
    clearTimeout(this.#deadlineTimer);
    const remaining = this.#renewedAt + this.#renewDeadlineMs - this.#now();
    this.#deadlineTimer = setTimeout(() => {
      if (this.#leading) this.#stepDown(`could not renew the lease within the renew deadline (${this.#renewDeadlineMs} ms)`);
    }, Math.max(0, remaining));
  }

  #stepDown(reason: string): void {
    if (!this.#leading) return;
    this.#leading = false;
    clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = undefined;
    this.#gauge?.set({ lease: this.#lock.description }, 0);
    this.#leadership?.abort(new Error(`stopped leading: ${reason}`));
    this.#log.warn({ reason }, 'stopped leading');
    this.#callback('onStoppedLeading', () => this.#options.onStoppedLeading?.());
  }

  /** Hands the lease over at once: empty holder, so candidates need not wait for it to expire. */
  async #release(): Promise<void> {
    try {
      const current = await this.#lock.get();
      if (!current || current.record.holderIdentity !== this.identity) return;
      const now = new Date(this.#now());
      await this.#lock.update(current, {
        holderIdentity: '',
        leaseDurationSeconds: 1,
        acquireTime: now,
        renewTime: now,
        leaseTransitions: current.record.leaseTransitions,
      });
      this.#log.info('released the lease');
    } catch (error) {
      this.#log.warn({ err: describeKubeError(error) }, 'could not release the lease; others take over once it expires');
    }
  }

  #callback(name: string, call: () => void): void {
    try {
      call();
    } catch (error) {
      this.#log.error({ err: describeKubeError(error) }, `${name} threw`);
    }
  }

  #sleep(ms: number): Promise<void> {
    const stopping = this.#stopping.signal;
    if (stopping.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        stopping.removeEventListener('abort', done);
        resolve();
      }
      this.#wake = done;
      stopping.addEventListener('abort', done, { once: true });
    });
  }
}
