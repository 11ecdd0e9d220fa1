import type { Counter, Gauge, Registry } from 'prom-client';
import { SKIP_REASONS } from './object-reader.js';
import type { SkipReason } from './object-reader.js';
import { counterOn, gaugeOn } from '@kube-router/metrics';

/** What informers report about themselves. A registry is optional so that informers also run without metrics. */
export class InformerMetrics {
  readonly #healthy: Gauge<'resource'> | undefined;
  readonly #restarts: Counter<'resource'> | undefined;
  readonly #expired: Counter<'resource'> | undefined;
  readonly #objects: Gauge<'resource'> | undefined;
  readonly #skipped: Counter<'resource' | 'reason'> | undefined;

  constructor(registry?: Registry) {
    if (!registry) return;
    this.#healthy = gaugeOn(registry, {
      name: 'kube_router_informer_watch_healthy',
      help: 'Whether the watch of an informer is established (1) or failed and waiting to restart (0)',
      labelNames: ['resource'],
    });
    this.#restarts = counterOn(registry, {
      name: 'kube_router_informer_restarts_total',
      help: 'Number of times the watchdog restarted an informer after its list or watch failed',
      labelNames: ['resource'],
    });
    this.#expired = counterOn(registry, {
      name: 'kube_router_informer_watch_expired_total',
      help: 'Number of times the API server ended the watch of an informer with 410 Gone (its resourceVersion too old), each followed by a relist',
      labelNames: ['resource'],
    });
    this.#objects = gaugeOn(registry, {
      name: 'kube_router_informer_objects',
      help: 'Number of objects in the cache of an informer',
      labelNames: ['resource'],
    });
    this.#skipped = counterOn(registry, {
      name: 'kube_router_informer_objects_skipped_total',
      help: 'Listed or watched objects an informer skipped because the agent cannot read them (counted once per object version)',
      labelNames: ['resource', 'reason'],
    });
  }

  /** Creates every series of an informer, so that dashboards see 0 instead of nothing before the first event. */
  register(resource: string): void {
    this.#healthy?.set({ resource }, 0);
    this.#restarts?.inc({ resource }, 0);
    this.#expired?.inc({ resource }, 0);
    this.#objects?.set({ resource }, 0);
    for (const reason of SKIP_REASONS) this.#skipped?.inc({ resource, reason }, 0);
  }

  healthy(resource: string, healthy: boolean): void {
    this.#healthy?.set({ resource }, healthy ? 1 : 0);
  }

  restarted(resource: string): void {
    this.#restarts?.inc({ resource });
  }

  expired(resource: string): void {
    this.#expired?.inc({ resource });
  }

  skipped(resource: string, reason: SkipReason): void {
    this.#skipped?.inc({ resource, reason });
  }

  objects(resource: string, count: number): void {
    this.#objects?.set({ resource }, count);
  }
}
