export { AgentMetrics } from './sync-metrics.js';
export type { AgentMetricsOptions } from './sync-metrics.js';
export { metricsRoutes } from './routes.js';
export { counterOn, gaugeOn, histogramOn } from './registered.js';
export { registerServiceTrafficSeries } from './service-traffic.js';
export type { ServiceTraffic, ServiceTrafficLabels } from './service-traffic.js';
export type { MetricsRoutesOptions } from './routes.js';

/** kube-router serves metrics only when --metrics-port is set; 0 means disabled. */
export const DEFAULT_METRICS_PATH = '/metrics';
