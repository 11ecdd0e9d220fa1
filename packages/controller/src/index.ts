export { defineServiceKey, definePlugin, isFullSync } from './controller.js';
export { PLUGIN_CONTRACT_VERSION } from './contract-version.js';
export type {
  CleanupContext,
  Controller,
  ControllerPlugin,
  ControllerStartContext,
  KernelFeature,
  OptionsSchema,
  PluginContext,
  ServiceKey,
  Services,
  SyncReason,
} from './controller.js';
export { createSyncController, SyncTimeoutError } from './sync-controller.js';
export type { SyncContext, SyncControllerSpec } from './sync-controller.js';
export { SyncScheduler } from './scheduler.js';
export { MAX_TIMER_DELAY_MS, setLongTimeout } from './long-timer.js';
export type { LongTimer } from './long-timer.js';
export type { SchedulerOptions } from './scheduler.js';
export { JoinedSyncError, SyncFailures, messageOf } from './sync-error.js';
export { SyncWarnings } from './sync-warnings.js';
export type { RecordWarning } from './sync-warnings.js';
export type { SyncFailure } from './sync-error.js';
export { ServiceRegistry } from './services.js';
export { routeSyncServiceKey } from './routes.js';
export type { InjectedRoute, RouteSyncService } from './routes.js';
export { servicePathExplainerKey } from './service-path.js';
export type { ServiceConnectionPath, ServiceEndpointPath, ServiceFlow, ServicePath, ServicePathExplainer } from './service-path.js';
