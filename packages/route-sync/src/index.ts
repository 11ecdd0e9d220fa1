export { createRouteSyncPlugin, routeSyncPlugin } from './plugin.js';
export type { RouteSyncPluginOverrides } from './plugin.js';
export { ROUTE_PROTOCOL, routeSyncOptions } from './options.js';
export type { ResolvedRouteSyncOptions, RouteSyncOptions } from './options.js';
export { createRouteSyncController, ROUTE_SYNC_CONTROLLER } from './controller.js';
export type { RouteSyncSettings } from './controller.js';
export { WantedRoutes } from './wanted-routes.js';
export type { RouteProblem } from './wanted-routes.js';
export { InvalidRouteError, MAIN_TABLE } from './kernel-route.js';
