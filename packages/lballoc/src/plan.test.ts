import { describe, expect, it, vi } from 'vitest';
import { planAllocations, REQUESTED_IPS_ANNOTATION, type Decision, type ServiceLike } from './plan.js';
import { AddressPool } from './pool.js';

let clock = 0;
function svc(name: string, spec: ServiceLike['spec'] = {}, extra: Partial<ServiceLike> = {}): ServiceLike {
  return {
    metadata: { namespace: 'default', name, creationTimestamp: new Date(1_700_000_000_000 + clock++ * 1000), ...extra.metadata },
    spec: { type: 'LoadBalancer', ...spec },
    status: extra.status ?? {},
  };
}
const decisions = (planned: ReturnType<typeof planAllocations>): Record<string, Decision> =>
  Object.fromEntries(planned.map((p) => [p.key.split('/')[1], p.decision]));
const defaults = { defaultClass: true };

describe('planAllocations', () => {
  it('serves services of class kube-router, and of no class or default only with the default class', () => {
    const services = [
      svc('none'),
      svc('default', { loadBalancerClass: 'default' }),
      svc('ours', { loadBalancerClass: 'kube-router' }),
      svc('theirs', { loadBalancerClass: 'metallb' }),
      svc('cluster', { type: 'ClusterIP' }),
    ];
    const on = decisions(planAllocations(services, new AddressPool(['10.0.0.0/28']), defaults));
    expect(Object.entries(on).map(([n, d]) => [n, d.action])).toEqual([
      ['none', 'assign'],
      ['default', 'assign'],
      ['ours', 'assign'],
      ['theirs', 'keep'],
      ['cluster', 'keep'],
    ]);
    const off = decisions(planAllocations(services, new AddressPool(['10.0.0.0/28']), { defaultClass: false }));
    expect(off.none?.action).toBe('keep');
    expect(off.ours).toEqual({ action: 'assign', ingress: ['10.0.0.0'], added: ['10.0.0.0'], problems: [], repairs: [] });
  });

  it('never hands out an address another Service holds as ingress or external IP', () => {
    const services = [
      svc('holder', { loadBalancerClass: 'metallb', externalIPs: ['10.0.0.1'] }, { status: { loadBalancer: { ingress: [{ ip: '10.0.0.0' }] } } }),
      svc('new'),
    ];
    const planned = decisions(planAllocations(services, new AddressPool(['10.0.0.0/30']), defaults));
    expect(planned.new).toEqual({ action: 'assign', ingress: ['10.0.0.2'], added: ['10.0.0.2'], problems: [], repairs: [] });
  });

  it('keeps a Service that is already served', () => {
    const served = svc('served', {}, { status: { loadBalancer: { ingress: [{ ip: '10.0.0.3' }] } } });
    expect(planAllocations([served], new AddressPool(['10.0.0.0/30']), defaults)[0]?.decision).toEqual({ action: 'keep' });
  });

  it('fails the Services that find the pool exhausted and serves the others', () => {
    const planned = decisions(planAllocations([svc('a'), svc('b'), svc('c')], new AddressPool(['10.0.0.0/31']), defaults));
    expect(planned.a?.action).toBe('assign');
    expect(planned.b?.action).toBe('assign');
    expect(planned.c).toEqual({ action: 'fail', reason: 'the IPv4 pool is exhausted (2 addresses in use)' });
  });

  it('allocates both families for dual-stack Services and fails RequireDualStack without both ranges', () => {
    const pool = new AddressPool(['10.0.0.0/30', '2001:db8::/126']);
    const dual = svc('dual', { ipFamilies: ['IPv6', 'IPv4'], ipFamilyPolicy: 'RequireDualStack' });
    const v6 = svc('v6', { ipFamilies: ['IPv6'] });
    const planned = decisions(planAllocations([dual, v6], pool, defaults));
    expect(planned.dual).toEqual({ action: 'assign', ingress: ['2001:db8::', '10.0.0.0'], added: ['2001:db8::', '10.0.0.0'], problems: [], repairs: [] });
    expect(planned.v6).toEqual({ action: 'assign', ingress: ['2001:db8::1'], added: ['2001:db8::1'], problems: [], repairs: [] });

    const v4only = new AddressPool(['10.0.0.0/30']);
    expect(planAllocations([dual], v4only, defaults)[0]?.decision).toEqual({
      action: 'fail',
      reason: 'RequireDualStack but no IPv6 range is configured',
    });
    const prefer = svc('prefer', { ipFamilyPolicy: 'PreferDualStack' });
    expect(planAllocations([prefer], v4only, defaults)[0]?.decision).toEqual({
      action: 'assign',
      ingress: ['10.0.0.0'],
      added: ['10.0.0.0'],
      problems: [],
      repairs: [],
    });
  });

  it('never gives a RequireDualStack Service half of what it requires', () => {
    const pool = new AddressPool(['10.0.0.0/32', '2001:db8::/128']);
    const first = svc('first');
    const dual = svc('dual', { ipFamilyPolicy: 'RequireDualStack', ipFamilies: ['IPv4', 'IPv6'] });
    const later = svc('later', { ipFamilies: ['IPv6'] });
    const planned = decisions(planAllocations([first, dual, later], pool, defaults));
    expect(planned.dual).toEqual({ action: 'fail', reason: 'the IPv4 pool is exhausted (1 addresses in use)' });
    // The IPv6 address the dual-stack Service could not use stays free for others.
    expect(planned.later).toEqual({ action: 'assign', ingress: ['2001:db8::'], added: ['2001:db8::'], problems: [], repairs: [] });
  });

  it('honours a requested address when free and reports it when not', () => {
    const pool = new AddressPool(['10.0.0.0/28']);
    const holder = svc('holder', {}, { status: { loadBalancer: { ingress: [{ ip: '10.0.0.5' }] } } });
    const wantsFree = svc('wants-free', { loadBalancerIP: '10.0.0.9' });
    const wantsTaken = svc('wants-taken', {}, { metadata: { annotations: { [REQUESTED_IPS_ANNOTATION]: '10.0.0.5' } } });
    const wantsOutside = svc('wants-outside', { loadBalancerIP: '192.0.2.1' });
    const wantsGarbage = svc('wants-garbage', {}, { metadata: { annotations: { [REQUESTED_IPS_ANNOTATION]: 'ten.zero' } } });
    const dynamic = svc('dynamic');
    const planned = decisions(planAllocations([holder, wantsFree, wantsTaken, wantsOutside, wantsGarbage, dynamic], pool, defaults));
    expect(planned['wants-free']).toEqual({ action: 'assign', ingress: ['10.0.0.9'], added: ['10.0.0.9'], problems: [], repairs: [] });
    expect(planned['wants-taken']).toEqual({ action: 'fail', reason: 'requested address 10.0.0.5 is in use by default/holder' });
    expect(planned['wants-outside']).toEqual({
      action: 'fail',
      reason: 'requested address 192.0.2.1 is not in any --loadbalancer-ip-range',
    });
    expect(planned['wants-garbage']).toEqual({ action: 'fail', reason: 'invalid requested address "ten.zero"' });
    expect(planned.dynamic).toEqual({ action: 'assign', ingress: ['10.0.0.0'], added: ['10.0.0.0'], problems: [], repairs: [] });
  });

  it('reserves requested addresses ahead of dynamic allocation, and gives a contested one to the older Service', () => {
    const pool = new AddressPool(['10.0.0.0/31']);
    const dynamic = svc('dynamic');
    const older = svc('older', {}, { metadata: { annotations: { [REQUESTED_IPS_ANNOTATION]: '10.0.0.0' } } });
    const younger = svc('younger', { loadBalancerIP: '10.0.0.0' });
    const planned = decisions(planAllocations([younger, dynamic, older], pool, defaults));
    expect(planned.dynamic).toEqual({ action: 'assign', ingress: ['10.0.0.1'], added: ['10.0.0.1'], problems: [], repairs: [] });
    expect(planned.older).toEqual({ action: 'assign', ingress: ['10.0.0.0'], added: ['10.0.0.0'], problems: [], repairs: [] });
    expect(planned.younger).toEqual({ action: 'fail', reason: 'requested address 10.0.0.0 is in use by default/older' });
  });

  it('moves a Service to a newly requested address and releases the old one from its status', () => {
    const pool = new AddressPool(['10.0.0.0/28']);
    const moved = svc('moved', { loadBalancerIP: '10.0.0.7' }, { status: { loadBalancer: { ingress: [{ ip: '10.0.0.2' }] } } });
    expect(planAllocations([moved], pool, defaults)[0]?.decision).toEqual({ action: 'assign', ingress: ['10.0.0.7'], added: ['10.0.0.7'], problems: [], repairs: [] });
  });

  it('reports, on every sync, what a PreferDualStack Service could not get, without failing for a family with no range', () => {
    const v4only = new AddressPool(['10.0.0.0/32']);
    const prefer = svc('prefer', { ipFamilyPolicy: 'PreferDualStack', ipFamilies: ['IPv4', 'IPv6'] });
    // Second sync: the IPv4 address is in place; no IPv6 range is configured, which PreferDualStack accepts.
    const served = { ...prefer, status: { loadBalancer: { ingress: [{ ip: '10.0.0.0' }] } } };
    expect(planAllocations([served], v4only, defaults)[0]?.decision).toEqual({ action: 'keep' });
    // A configured but exhausted IPv6 pool is a problem that the write does not hide.
    const dualPool = new AddressPool(['10.0.0.0/31', '2001:db8::/128']);
    const holder = svc('holder', { ipFamilies: ['IPv6'] }, { status: { loadBalancer: { ingress: [{ ip: '2001:db8::' }] } } });
    const late = svc('late', { ipFamilyPolicy: 'PreferDualStack', ipFamilies: ['IPv4', 'IPv6'] });
    expect(decisions(planAllocations([holder, late], dualPool, defaults)).late).toEqual({
      action: 'assign',
      ingress: ['10.0.0.0'],
      added: ['10.0.0.0'],
      problems: ['the IPv6 pool is exhausted (1 addresses in use)'],
      repairs: [],
    });
  });

  it('refuses requested addresses of a family the Service does not have, or two of one family', () => {
    const pool = new AddressPool(['10.0.0.0/28', '2001:db8::/120']);
    const wrongFamily = svc('wrong-family', { ipFamilies: ['IPv4'], loadBalancerIP: '2001:db8::5' });
    const two = svc('two', {}, { metadata: { annotations: { [REQUESTED_IPS_ANNOTATION]: '10.0.0.1,10.0.0.2' } } });
    const planned = decisions(planAllocations([wrongFamily, two], pool, defaults));
    expect(planned['wrong-family']).toEqual({
      action: 'fail',
      reason: "requested address 2001:db8::5 is IPv6, but the Service's ipFamilies are IPv4",
    });
    expect(planned.two).toEqual({ action: 'fail', reason: 'more than one requested IPv4 address (10.0.0.1, 10.0.0.2)' });
  });

  it('repairs an address that two Services hold: the older keeps it, the younger gets a new one', () => {
    const pool = new AddressPool(['10.0.0.0/30']);
    const older = svc('older', {}, { status: { loadBalancer: { ingress: [{ ip: '10.0.0.1' }] } } });
    const younger = svc('younger', {}, { status: { loadBalancer: { ingress: [{ ip: '10.0.0.1' }] } } });
    const planned = decisions(planAllocations([younger, older], pool, defaults));
    expect(planned.older).toEqual({ action: 'keep' });
    expect(planned.younger).toEqual({
      action: 'assign',
      ingress: ['10.0.0.0'],
      added: ['10.0.0.0'],
      problems: [],
      repairs: ['address 10.0.0.1 is also held by default/older'],
    });
  });

  it('releases our addresses from a Service that is no longer of type LoadBalancer', () => {
    const pool = new AddressPool(['10.0.0.0/28']);
    const former = svc('former', { type: 'ClusterIP' }, { status: { loadBalancer: { ingress: [{ ip: '10.0.0.3' }, { ip: '192.0.2.1' }] } } });
    const next = svc('next');
    const planned = decisions(planAllocations([former, next], pool, defaults));
    expect(planned.former).toEqual({ action: 'release', ingress: ['192.0.2.1'], released: ['10.0.0.3'] });
    // Not reused within the same walk: the status still holds it until the release is written.
    expect(planned.next?.action).toBe('assign');
    expect(planned.next).not.toMatchObject({ added: ['10.0.0.3'] });
  });

  it('fails each malformed Service alone, keeps what it holds held, and serves the others', () => {
    const pool = new AddressPool(['10.0.0.0/29']);
    const malformed = (name: string, patch: (service: ServiceLike) => void): ServiceLike => {
      const service = svc(name);
      patch(service);
      return service;
    };
    const bad = [
      malformed('null-ingress', (s) => Object.assign(s, { status: { loadBalancer: { ingress: [null, { ip: '10.0.0.0' }] } } })),
      malformed('scalar-ingress', (s) => Object.assign(s, { status: { loadBalancer: { ingress: 5 } } })),
      malformed('scalar-external-ips', (s) => Object.assign(s.spec!, { externalIPs: 5 })),
      malformed('numeric-external-ip', (s) => Object.assign(s.spec!, { externalIPs: ['10.0.0.1', 7] })),
      malformed('numeric-ip', (s) => Object.assign(s.spec!, { loadBalancerIP: 7 })),
      malformed('numeric-annotation', (s) => Object.assign(s.metadata!, { annotations: { [REQUESTED_IPS_ANNOTATION]: 10 } })),
      malformed('scalar-families', (s) => Object.assign(s.spec!, { ipFamilies: 5, clusterIPs: 'x' })),
    ];
    const good = [svc('good-1'), svc('good-2')];
    const list = [...bad, null, 'garbage', ...good] as unknown as ServiceLike[];
    const planned = decisions(planAllocations(list, pool, defaults));
    expect(planned['null-ingress']).toEqual({
      action: 'fail',
      reason: 'the Service cannot be read: status.loadBalancer.ingress: entry 0 is null, expected an object',
    });
    expect(planned['scalar-ingress']).toEqual({
      action: 'fail',
      reason: 'the Service cannot be read: status.loadBalancer.ingress: expected a list, got number 5',
    });
    expect(planned['scalar-external-ips']).toEqual({
      action: 'fail',
      reason: 'the Service cannot be read: spec.externalIPs: expected a list of addresses, got number 5',
    });
    expect(planned['numeric-external-ip']?.action).toBe('fail');
    expect(planned['numeric-ip']).toEqual({
      action: 'fail',
      reason: 'the Service cannot be read: requested addresses: spec.loadBalancerIP is number 7, expected a string',
    });
    expect(planned['numeric-annotation']).toMatchObject({ action: 'fail', reason: expect.stringContaining(REQUESTED_IPS_ANNOTATION) });
    // ipFamilies of the wrong type is read as absent, as for a Service the API server has not defaulted.
    expect(planned['scalar-families']?.action).toBe('assign');
    // 10.0.0.0 and 10.0.0.1 are what the malformed Services could still be read to hold.
    expect(planned['good-1']).toMatchObject({ action: 'assign', added: ['10.0.0.3'] });
    expect(planned['good-2']).toMatchObject({ action: 'assign', added: ['10.0.0.4'] });
  });

  it('takes an address from a younger Service that requests it while an older one lists and requests it', () => {
    const pool = new AddressPool(['10.0.0.0/30']);
    const older = svc('older', { externalIPs: ['10.0.0.1'], loadBalancerIP: '10.0.0.1' });
    const younger = svc('younger', { loadBalancerIP: '10.0.0.1' }, { status: { loadBalancer: { ingress: [{ ip: '10.0.0.1' }] } } });
    const planned = decisions(planAllocations([younger, older], pool, defaults));
    expect(planned.older).toEqual({ action: 'assign', ingress: ['10.0.0.1'], added: ['10.0.0.1'], problems: [], repairs: [] });
    expect(planned.younger).toEqual({
      action: 'assign',
      ingress: [],
      added: [],
      problems: ['requested address 10.0.0.1 is in use by default/older'],
      repairs: ['address 10.0.0.1 is also held by default/older'],
    });
  });

  it('takes a contested address even from a Service it can do nothing else for', () => {
    const pool = new AddressPool(['10.0.0.0/30']);
    const older = svc('older', {}, { status: { loadBalancer: { ingress: [{ ip: '10.0.0.1' }] } } });
    const younger = svc(
      'younger',
      { ipFamilyPolicy: 'RequireDualStack' },
      { status: { loadBalancer: { ingress: [{ ip: '10.0.0.1' }] } } },
    );
    expect(decisions(planAllocations([older, younger], pool, defaults)).younger).toEqual({
      action: 'assign',
      ingress: [],
      added: [],
      problems: ['RequireDualStack but no IPv6 range is configured'],
      repairs: ['address 10.0.0.1 is also held by default/older'],
    });
  });

  it('scans an exhausted pool once per walk, not once per waiting Service', () => {
    const pool = new AddressPool(['10.0.0.0/28']);
    const holders = Array.from({ length: 16 }, (_, i) =>
      svc(`holder-${i}`, {}, { status: { loadBalancer: { ingress: [{ ip: `10.0.0.${i}` }] } } }),
    );
    const waiting = Array.from({ length: 20 }, (_, i) => svc(`waiting-${i}`));
    const allocate = vi.spyOn(pool, 'allocate');
    const planned = planAllocations([...holders, ...waiting], pool, defaults);
    expect(allocate).toHaveBeenCalledTimes(1);
    expect(planned.filter((p) => p.decision.action === 'fail')).toHaveLength(20);
  });

  it('hands the address a failing RequireDualStack Service took back to the next Service, but keeps a requested one reserved', () => {
    const pool = new AddressPool(['10.0.0.0/32', '2001:db8::/128']);
    const holder = svc('holder', { ipFamilies: ['IPv6'] }, { status: { loadBalancer: { ingress: [{ ip: '2001:db8::' }] } } });
    // Takes 10.0.0.0, finds IPv6 exhausted, and gives 10.0.0.0 back.
    const dual = svc('dual', { ipFamilyPolicy: 'RequireDualStack', ipFamilies: ['IPv4', 'IPv6'] });
    const v4 = svc('v4');
    const planned = decisions(planAllocations([holder, dual, v4], pool, defaults));
    expect(planned.dual?.action).toBe('fail');
    expect(planned.v4).toMatchObject({ action: 'assign', added: ['10.0.0.0'] });

    const requesting = svc('requesting', { ipFamilyPolicy: 'RequireDualStack', ipFamilies: ['IPv4', 'IPv6'], loadBalancerIP: '10.0.0.0' });
    const later = svc('later');
    const again = decisions(planAllocations([holder, requesting, later], pool, defaults));
    expect(again.requesting?.action).toBe('fail');
    expect(again.later).toEqual({ action: 'fail', reason: 'the IPv4 pool is exhausted (1 addresses in use)' });
  });
});
