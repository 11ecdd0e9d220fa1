import type { Counter, Gauge, Registry } from 'prom-client';
import { counterOn, gaugeOn } from './prom.js';

/** What informers report about themselves. A registry is optional so that informers also run without metrics. */
export class InformerMetrics {
  readonly #healthy: Gauge<'resource'> | undefined;
  readonly #restarts: Counter<'resource'> | undefined;
  readonly #objects: Gauge<'resource'> | undefined;

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
    this.#objects = gaugeOn(registry, {
      name: 'kube_router_informer_objects',
      help: 'Number of objects in the cache of an informer',
      labelNames: ['resource'],
    });
  }

  /** Creates every series of an informer, so that dashboards see 0 instead of nothing before the first event. */
  register(resource: string): void {
    this.#healthy?.set({ resource }, 0);
    this.#restarts?.inc({ resource }, 0);
    this.#objects?.set({ resource }, 0);
  }

  healthy(resource: string, healthy: boolean): void {
    this.#healthy?.set({ resource }, healthy ? 1 : 0);
  }

  restarted(resource: string): void {
    this.#restarts?.inc({ resource });
  }

  objects(resource: string, count: number): void {
    this.#objects?.set({ resource }, count);
  }
}
