export { lballocPlugin, lballocOptions, LBALLOC_LEASE } from './plugin.js';
export type { LballocOptions } from './plugin.js';
export { createLballocController, LBALLOC_CONTROLLER } from './controller.js';
export type { LballocCluster, LballocSettings } from './controller.js';
export { AddressPool, InvalidRangeError, canonical, validateLoadBalancerIPRanges } from './pool.js';
export type { Family } from './pool.js';
export { planAllocations, REQUESTED_IPS_ANNOTATION, LOADBALANCER_CLASS, isOurs, wantedFamilies } from './plan.js';
export type { Decision, PlanOptions, PlannedService, ServiceLike } from './plan.js';
