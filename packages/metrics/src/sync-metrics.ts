import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { runSync, type HealthComponent, type ProgressBeat, type SyncOutcome } from '@kube-router/healthcheck';

export interface AgentMetricsOptions {
  /** Collect process and Node.js runtime metrics. Default true. */
  collectDefaultMetrics?: boolean;
  /** Clock in milliseconds, for tests. */
  now?: () => number;
}

/**
 * The agent's metrics: one prom-client Registry that the agent owns (never the global default registry, so that two
 * agents in one process, as in tests, do not share series) and the sync outcome metrics every controller reports
 * through.
 */
export class AgentMetrics {
  readonly registry = new Registry();
  readonly #lastSuccess: Gauge<'controller'>;
  readonly #failures: Counter<'controller'>;
  readonly #duration: Histogram<'controller' | 'result'>;
  readonly #driftRepaired: Counter<'controller' | 'object'>;
  readonly #now: () => number;

  constructor(options: AgentMetricsOptions = {}) {
    this.#now = options.now ?? Date.now;
    if (options.collectDefaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    this.#lastSuccess = new Gauge({
      name: 'kube_router_controller_sync_last_success',
      help: 'Unix time in seconds of the last successful sync of a controller; 0 until its first success',
      labelNames: ['controller'],
      registers: [this.registry],
    });
    this.#failures = new Counter({
      name: 'kube_router_controller_sync_failures_total',
      help: 'Number of syncs of a controller that failed, including partial failures',
      labelNames: ['controller'],
      registers: [this.registry],
    });
    this.#duration = new Histogram({
      name: 'kube_router_controller_sync_duration_seconds',
      help: 'Duration of controller syncs by result',
      labelNames: ['controller', 'result'],
      buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers: [this.registry],
    });
    this.#driftRepaired = new Counter({
      name: 'kube_router_controller_drift_repaired_total',
      help: 'Kernel objects a full sync found changed or removed behind the controller and put back, by kind',
      labelNames: ['controller', 'object'],
      registers: [this.registry],
    });
  }

  /**
   * Counts kernel objects (`object` names their kind: ipvs_service, route, chain, ipset, ...) that a controller's
   * full sync found changed or gone, not by its own hand, and restored. A steady rise means something else on the
   * node fights the agent.
   */
  recordDriftRepaired(controller: string, object: string, count: number): void {
    if (count > 0) this.#driftRepaired.inc({ controller, object }, count);
  }

  /**
   * The single entry point for sync outcomes. The first report creates both series whatever its outcome, so a
   * controller that never succeeded shows last_success 0 and a failure count instead of an empty vector.
   */
  recordSyncResult(controller: string, error?: unknown): void {
    const labels = { controller };
    if (error === undefined) {
      this.#lastSuccess.set(labels, Math.floor(this.#now() / 1000));
      this.#failures.inc(labels, 0);
    } else {
      this.#lastSuccess.inc(labels, 0);
      this.#failures.inc(labels, 1);
    }
  }

  /** runSync (beat, sync, beat) followed by recordSyncResult, and the duration histogram. Never throws. */
  async runObservedSync(
    component: HealthComponent,
    sync: (progress: ProgressBeat) => unknown,
  ): Promise<SyncOutcome> {
    const outcome = await runSync(component, sync);
    this.recordSyncResult(component.name, outcome.ok ? undefined : outcome.error ?? new Error('sync failed'));
    this.#duration.observe(
      { controller: component.name, result: outcome.ok ? 'success' : 'failure' },
      outcome.durationMs / 1000,
    );
    return outcome;
  }
}
