export { HealthRegistry } from './registry.js';
export type {
  CheckResult,
  ComponentOptions,
  ComponentStatus,
  HealthComponent,
  HealthRegistryOptions,
  ReadinessCheck,
} from './registry.js';
export { runSync } from './run-sync.js';
export type { ProgressBeat, SyncOutcome } from './run-sync.js';
export { healthRoutes } from './routes.js';
export type { HealthRoutesOptions } from './routes.js';

/** kube-router's health port. */
export const DEFAULT_HEALTH_PORT = 20244;
