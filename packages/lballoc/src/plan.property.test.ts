/*
 * The allocator's invariant, checked over random histories: however Services come, go, request addresses, list
 * external IPs or have their status edited by hand, after every walk no address of the pool is held by two Services,
 * and no address is handed out that another Service lists in its externalIPs.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planAllocations, REQUESTED_IPS_ANNOTATION, type ServiceLike } from './plan.js';
import { AddressPool, canonical } from './pool.js';

const NAMES = ['s0', 's1', 's2', 's3', 's4', 's5'];
const RANGE_SETS = [
  ['10.0.0.0/30'],
  ['10.0.0.0/31', '10.0.0.4-10.0.0.5'],
  ['10.0.0.0/30', '2001:db8::/126'],
  ['2001:db8::/127'],
];
// Inside and outside the ranges, in several textual forms of one address.
const ADDRESSES = ['10.0.0.0', '10.0.0.1', '10.0.0.2', '10.0.0.4', '10.0.0.9', '2001:db8::1', '2001:DB8:0::1', '::ffff:10.0.0.1'];

interface ServiceState {
  readonly name: string;
  readonly created: number;
  readonly type: 'LoadBalancer' | 'ClusterIP';
  readonly loadBalancerClass?: string;
  readonly ipFamilyPolicy?: string;
  readonly ipFamilies?: string[];
  readonly loadBalancerIP?: string;
  readonly annotation?: string;
  readonly externalIPs?: string[];
  readonly ingress: string[];
}

const serviceArb: fc.Arbitrary<ServiceState> = fc.record(
  {
    name: fc.constantFrom(...NAMES),
    created: fc.nat(5),
    type: fc.constantFrom('LoadBalancer' as const, 'LoadBalancer' as const, 'ClusterIP' as const),
    loadBalancerClass: fc.constantFrom('kube-router', 'metallb'),
    ipFamilyPolicy: fc.constantFrom('SingleStack', 'PreferDualStack', 'RequireDualStack'),
    ipFamilies: fc.subarray(['IPv4', 'IPv6']),
    loadBalancerIP: fc.constantFrom(...ADDRESSES),
    annotation: fc.constantFrom(...ADDRESSES),
    externalIPs: fc.subarray(ADDRESSES, { maxLength: 2 }),
    ingress: fc.subarray(ADDRESSES, { maxLength: 2 }),
  },
  { requiredKeys: ['name', 'created', 'type', 'ingress'] },
);

type Step =
  | { readonly kind: 'upsert'; readonly service: ServiceState }
  | { readonly kind: 'delete'; readonly name: string }
  /** Someone writes a status by hand (a restore, another tool): duplicates the walk must repair. */
  | { readonly kind: 'edit-status'; readonly name: string; readonly ingress: string[] }
  | { readonly kind: 'walk' };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 3, arbitrary: serviceArb.map((service) => ({ kind: 'upsert' as const, service })) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('delete' as const), name: fc.constantFrom(...NAMES) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('edit-status' as const),
      name: fc.constantFrom(...NAMES),
      ingress: fc.subarray(ADDRESSES, { maxLength: 2 }),
    }),
  },
  { weight: 3, arbitrary: fc.constant({ kind: 'walk' as const }) },
);

function toService(state: ServiceState): ServiceLike {
  return {
    metadata: {
      namespace: 'default',
      name: state.name,
      creationTimestamp: new Date(1_700_000_000_000 + state.created * 1000),
      ...(state.annotation !== undefined && { annotations: { [REQUESTED_IPS_ANNOTATION]: state.annotation } }),
    },
    spec: {
      type: state.type,
      ...(state.loadBalancerClass !== undefined && { loadBalancerClass: state.loadBalancerClass }),
      ...(state.ipFamilyPolicy !== undefined && { ipFamilyPolicy: state.ipFamilyPolicy }),
      ...(state.ipFamilies !== undefined && { ipFamilies: state.ipFamilies }),
      ...(state.loadBalancerIP !== undefined && { loadBalancerIP: state.loadBalancerIP }),
      ...(state.externalIPs !== undefined && { externalIPs: state.externalIPs }),
    },
    status: { loadBalancer: { ingress: state.ingress.map((ip) => ({ ip })) } },
  };
}

/** Pool addresses held as ingress by more than one Service that the allocator serves. */
function heldTwice(services: ReadonlyMap<string, ServiceState>, pool: AddressPool, served: (s: ServiceState) => boolean): string[] {
  const holders = new Map<string, string[]>();
  for (const service of services.values()) {
    if (!served(service)) continue;
    for (const ip of new Set(service.ingress.map((text) => canonical(text) ?? text))) {
      if (!pool.contains(ip)) continue;
      holders.set(ip, [...(holders.get(ip) ?? []), service.name]);
    }
  }
  return [...holders].filter(([, names]) => names.length > 1).map(([ip, names]) => `${ip}: ${names.join(', ')}`);
}

describe('planAllocations invariant', () => {
  it('after every walk, no address of the pool is held twice and none handed out is another Service’s external IP', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...RANGE_SETS),
        fc.boolean(),
        fc.array(stepArb, { minLength: 1, maxLength: 30 }),
        (ranges, defaultClass, steps) => {
          const pool = new AddressPool(ranges);
          const options = { defaultClass };
          const services = new Map<string, ServiceState>();
          // The walk repairs only what it serves: a Service of another class keeps what its own allocator gave it.
          const served = (s: ServiceState) =>
            s.type === 'LoadBalancer' &&
            (s.loadBalancerClass === 'kube-router' ||
              (defaultClass && (s.loadBalancerClass === undefined || s.loadBalancerClass === 'default')));
          for (const step of [...steps, { kind: 'walk' as const }]) {
            if (step.kind === 'upsert') {
              const existing = services.get(step.service.name);
              // An update keeps the creation time and the status, as the API server does.
              services.set(
                step.service.name,
                existing ? { ...step.service, created: existing.created, ingress: existing.ingress } : step.service,
              );
            } else if (step.kind === 'delete') services.delete(step.name);
            else if (step.kind === 'edit-status') {
              const existing = services.get(step.name);
              if (existing && served(existing)) services.set(step.name, { ...existing, ingress: step.ingress });
            } else {
              const planned = planAllocations([...services.values()].map(toService), pool, options);
              const listers = new Map<string, Set<string>>();
              for (const service of services.values()) {
                for (const ip of service.externalIPs ?? []) {
                  const c = canonical(ip) ?? ip;
                  listers.set(c, new Set([...(listers.get(c) ?? []), service.name]));
                }
              }
              for (const { service, decision } of planned) {
                const name = service.metadata?.name as string;
                if (decision.action === 'assign') {
                  for (const ip of decision.added) {
                    // Its own external IP may be requested; anyone else's may not be handed out.
                    const others = [...(listers.get(ip) ?? [])].filter((lister) => lister !== name);
                    const own = listers.get(ip)?.has(name) ?? false;
                    expect(own || others.length === 0, `${ip} handed to ${name} is ${others.join(', ')}'s external IP`).toBe(true);
                  }
                }
                if (decision.action === 'assign' || decision.action === 'release') {
                  services.set(name, { ...(services.get(name) as ServiceState), ingress: decision.ingress });
                }
              }
              expect(heldTwice(services, pool, served)).toEqual([]);
            }
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});
