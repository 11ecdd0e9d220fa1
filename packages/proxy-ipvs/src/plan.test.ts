import type { IpvsVirtualServer } from '@kube-router/netfilter';
import { describe, expect, it } from 'vitest';
import type { DesiredVirtualServer } from './model.js';
import { drainKey, planIpvs } from './plan.js';
import type { PlanContext } from './plan.js';

const key = { protocol: 'tcp' as const, address: '10.96.0.1', port: 80 };
const service = { ...key, scheduler: 'rr', flags: [] };
const dest = (address: string, weight = 1) => ({ address, port: 8080, forwarding: 'masquerade' as const, weight });
const want = (destinations: ReturnType<typeof dest>[], overrides: Partial<DesiredVirtualServer['service']> = {}): Map<string, DesiredVirtualServer> =>
  new Map([['tcp/10.96.0.1/80', { id: 'tcp/10.96.0.1/80', owner: 'ns/web', portName: 'http', kind: 'cluster-ip', service: { ...service, ...overrides }, destinations, preserveClientAddress: false, hairpin: false }]]);
const have = (destinations: ReturnType<typeof dest>[]): IpvsVirtualServer[] => [{ service, destinations }];
const context = (overrides: Partial<PlanContext> = {}): PlanContext => ({ isExcluded: () => false, gracefulPeriodMs: 0, now: 1_000, draining: new Map(), ...overrides });
const lines = (plan: ReturnType<typeof planIpvs>) => [...plan.deletions, ...[...plan.byService.values()].flat()];

describe('planIpvs', () => {
  it('creates a missing service with its real servers', () => {
    expect(lines(planIpvs([], want([dest('10.244.0.2')]), context()))).toEqual(['-A -t 10.96.0.1:80 -s rr', '-a -t 10.96.0.1:80 -r 10.244.0.2:8080 -m -w 1']);
  });

  it('issues nothing for a kernel that matches, and one operation per changed endpoint', () => {
    expect(lines(planIpvs(have([dest('10.244.0.2')]), want([dest('10.244.0.2')]), context()))).toEqual([]);
    expect(lines(planIpvs(have([dest('10.244.0.2')]), want([dest('10.244.0.2'), dest('10.244.0.3')]), context()))).toEqual(['-a -t 10.96.0.1:80 -r 10.244.0.3:8080 -m -w 1']);
    expect(lines(planIpvs(have([dest('10.244.0.2'), dest('10.244.0.3')]), want([dest('10.244.0.2')]), context()))).toEqual(['-d -t 10.96.0.1:80 -r 10.244.0.3:8080']);
  });

  it('edits a service whose scheduler or persistence changed, in place', () => {
    expect(lines(planIpvs(have([]), want([], { scheduler: 'sh', persistentSeconds: 30 }), context()))).toEqual(['-E -t 10.96.0.1:80 -s sh -p 30']);
  });

  it('deletes services nobody wants, except in --excluded-cidrs', () => {
    const current: IpvsVirtualServer[] = [{ service: { ...service, address: '10.200.0.1' }, destinations: [] }, { service: { ...service, address: '10.201.0.1' }, destinations: [] }];
    const plan = planIpvs(current, new Map(), context({ isExcluded: (address) => address.startsWith('10.201.') }));
    expect(plan.deletions).toEqual(['-D -t 10.200.0.1:80']);
  });

  it('drains a removed endpoint under graceful termination: weight 0, then deleted when idle or at the deadline', () => {
    const graceful = { gracefulPeriodMs: 30_000 };
    const first = planIpvs(have([dest('10.244.0.2'), dest('10.244.0.3')]), want([dest('10.244.0.2')]), context(graceful));
    expect(lines(first)).toEqual(['-e -t 10.96.0.1:80 -r 10.244.0.3:8080 -m -w 0']);
    const entry = first.draining.get(drainKey(key, dest('10.244.0.3')));
    expect(entry?.deadline).toBe(31_000);

    const busy = new Map([[drainKey(key, dest('10.244.0.3')), { service: key, address: '10.244.0.3', port: 8080, activeConnections: 1, inactiveConnections: 0 }]]);
    const drainingState = have([dest('10.244.0.2'), dest('10.244.0.3', 0)]);
    const waiting = planIpvs(drainingState, want([dest('10.244.0.2')]), context({ ...graceful, now: 5_000, draining: first.draining, connections: busy }));
    expect(lines(waiting)).toEqual([]);
    expect(waiting.draining.size).toBe(1);

    const idle = new Map([[drainKey(key, dest('10.244.0.3')), { service: key, address: '10.244.0.3', port: 8080, activeConnections: 0, inactiveConnections: 0 }]]);
    expect(lines(planIpvs(drainingState, want([dest('10.244.0.2')]), context({ ...graceful, now: 5_000, draining: first.draining, connections: idle })))).toEqual(['-d -t 10.96.0.1:80 -r 10.244.0.3:8080']);
    expect(lines(planIpvs(drainingState, want([dest('10.244.0.2')]), context({ ...graceful, now: 31_000, draining: first.draining, connections: busy })))).toEqual(['-d -t 10.96.0.1:80 -r 10.244.0.3:8080']);
  });

  it('brings a draining endpoint back to weight 1 when it returns', () => {
    expect(lines(planIpvs(have([dest('10.244.0.3', 0)]), want([dest('10.244.0.3')]), context({ gracefulPeriodMs: 30_000 })))).toEqual(['-e -t 10.96.0.1:80 -r 10.244.0.3:8080 -m -w 1']);
  });
  describe('stale UDP flows', () => {
    const udpKey = { protocol: 'udp' as const, address: '10.96.0.10', port: 53 };
    const udp = { ...udpKey, scheduler: 'rr', flags: [] };
    const udpDest = (address: string, weight = 1) => ({ address, port: 5353, forwarding: 'masquerade' as const, weight });
    const wantUdp = (destinations: ReturnType<typeof udpDest>[]): Map<string, DesiredVirtualServer> =>
      new Map([['udp/10.96.0.10/53', { id: 'udp/10.96.0.10/53', owner: 'ns/dns', portName: 'dns', kind: 'cluster-ip', service: udp, destinations, preserveClientAddress: false, hairpin: false }]]);
    const haveUdp = (destinations: ReturnType<typeof udpDest>[]): IpvsVirtualServer[] => [{ service: udp, destinations }];

    it('names the flows of a UDP real server that is deleted, and nothing for one that stays or is added', () => {
      expect(planIpvs(haveUdp([udpDest('10.244.0.2'), udpDest('10.244.0.3')]), wantUdp([udpDest('10.244.0.2')]), context()).staleFlows).toEqual([
        { service: udp, endpoint: { address: '10.244.0.3', port: 5353 } },
      ]);
      expect(planIpvs(haveUdp([udpDest('10.244.0.2')]), wantUdp([udpDest('10.244.0.2'), udpDest('10.244.0.3')]), context()).staleFlows).toEqual([]);
    });

    it('waits for graceful termination to end: nothing while a real server drains, its flows once it is deleted', () => {
      const graceful = { gracefulPeriodMs: 30_000 };
      const first = planIpvs(haveUdp([udpDest('10.244.0.2'), udpDest('10.244.0.3')]), wantUdp([udpDest('10.244.0.2')]), context(graceful));
      expect(first.staleFlows).toEqual([]);
      const ended = planIpvs(haveUdp([udpDest('10.244.0.2'), udpDest('10.244.0.3', 0)]), wantUdp([udpDest('10.244.0.2')]), context({ ...graceful, now: 31_000, draining: first.draining }));
      expect(ended.staleFlows).toEqual([{ service: udp, endpoint: { address: '10.244.0.3', port: 5353 } }]);
    });

    it('names every flow to the address and port of a UDP service that gets its first real server, or goes', () => {
      expect(planIpvs(haveUdp([]), wantUdp([udpDest('10.244.0.2')]), context()).staleFlows).toEqual([{ service: udp }]);
      expect(planIpvs([], wantUdp([udpDest('10.244.0.2')]), context()).staleFlows).toEqual([{ service: udp }]);
      // Its only real server draining (weight 0) took no new flows: the new one starts afresh as well.
      expect(planIpvs(haveUdp([udpDest('10.244.0.3', 0)]), wantUdp([udpDest('10.244.0.2')]), context({ gracefulPeriodMs: 30_000 })).staleFlows).toEqual([{ service: udp }]);
      expect(planIpvs([], wantUdp([]), context()).staleFlows).toEqual([]);
      expect(planIpvs(haveUdp([udpDest('10.244.0.2')]), new Map(), context()).staleFlows).toEqual([{ service: udp }]);
    });

    it('leaves TCP alone: its connections end or reset on their own', () => {
      expect(planIpvs(have([dest('10.244.0.2'), dest('10.244.0.3')]), want([dest('10.244.0.2')]), context()).staleFlows).toEqual([]);
      expect(planIpvs(have([]), new Map(), context()).staleFlows).toEqual([]);
    });
  });
});
