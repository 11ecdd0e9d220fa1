export { startBird, renderBirdConfig, parseBirdProtocols, parseBirdRoutes } from './bird.js';
export { startFrr, renderFrrConfig, parseFrrNeighbors, parseFrrRoutes } from './frr.js';
export { stopAllBgpRouters, DEFAULT_BGP_WAIT_MS } from './router.js';
export { bgpRoutersSkipReason } from './preconditions.js';

export type {
  BgpExportPolicy,
  BgpFamily,
  BgpImportPolicy,
  BgpRouterConfig,
  BgpRouterNeighbor,
  BgpStaticRoute,
} from './config.js';
export type { BgpDaemonKind, BgpRoute, BgpRouter, BgpSession, BgpSessionState } from './router.js';
