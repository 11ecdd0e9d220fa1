import type { InjectedRoute } from '@kube-router/controller';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ApiPath } from './gobgp-api.js';
import { LearnedRoutes } from './learned-routes.js';
import { podCidrPath } from './paths.js';
import { RestartGrace } from './restart-grace.js';
import { FakeGobgpd } from './testing/fake-gobgpd.js';

/** A best path a peer sent. */
const fromPeer = (cidr: string, nextHop: string, extra: Partial<ApiPath> = {}): ApiPath => ({
  ...podCidrPath(cidr, nextHop),
  neighborIp: nextHop,
  best: true,
  ...extra,
});

function harness(options: { wantedPeers?: Set<string> } = {}) {
  const gobgpd = new FakeGobgpd();
  const handedOver: InjectedRoute[][] = [];
  const wantedPeers = options.wantedPeers ?? new Set(['10.0.0.2', '10.0.0.3']);
  const learned = new LearnedRoutes({
    owner: 'routing-bgp',
    routes: { setRoutes: (_owner, routes) => handedOver.push([...routes]) },
    gobgp: () => gobgpd.client(),
    localPrefixes: () => Promise.resolve(['10.0.0.1/24']),
    isPeerWanted: (address) => wantedPeers.has(address),
    restartGraceMs: 1_000,
    logger: pino({ level: 'silent' }),
  });
  learned.setNode(['ipv4'], ['10.1.0.0/24']);
  const last = () => handedOver.at(-1)?.map((r) => `${r.destination} via ${r.gateway}`).sort();
  return { gobgpd, learned, handedOver, last, wantedPeers };
}

describe('LearnedRoutes', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('hands a burst of best-path events to route-sync once: on-link next hops only, never its own pod CIDR', async () => {
    const { learned, handedOver, last } = harness();
    await learned.refreshOnLinkPrefixes();
    learned.applyBestPathEvents([fromPeer('10.2.0.0/24', '10.0.0.2')]);
    learned.applyBestPathEvents([fromPeer('10.9.0.0/24', '192.0.2.1'), fromPeer('10.1.0.0/24', '10.0.0.3')]);
    learned.applyBestPathEvents([fromPeer('10.3.0.0/24', '10.0.0.3')]);
    expect(handedOver).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(20);
    expect(handedOver).toHaveLength(1);
    expect(last()).toEqual(['10.2.0.0/24 via 10.0.0.2', '10.3.0.0/24 via 10.0.0.3']);
  });

  it('a withdrawal, or its own path becoming best, ends the route; an unchanged set is not handed over again', async () => {
    const { learned, handedOver, last } = harness();
    await learned.refreshOnLinkPrefixes();
    learned.applyBestPathEvents([fromPeer('10.2.0.0/24', '10.0.0.2'), fromPeer('10.3.0.0/24', '10.0.0.3')]);
    await vi.advanceTimersByTimeAsync(20);
    learned.applyBestPathEvents([fromPeer('10.2.0.0/24', '10.0.0.2', { isWithdraw: true }), { ...podCidrPath('10.3.0.0/24', '10.0.0.1') }]);
    await vi.advanceTimersByTimeAsync(20);
    expect(last()).toEqual([]);
    learned.applyBestPathEvents([fromPeer('10.2.0.0/24', '10.0.0.2', { isWithdraw: true })]);
    await vi.advanceTimersByTimeAsync(20);
    expect(handedOver).toHaveLength(2);
  });

  it('a relisting replaces what events said; a failed one keeps the routes handed over and says so', async () => {
    const { gobgpd, learned, last, handedOver } = harness();
    await learned.refreshOnLinkPrefixes();
    learned.applyBestPathEvents([fromPeer('10.2.0.0/24', '10.0.0.2')]);
    await vi.advanceTimersByTimeAsync(20);
    gobgpd.paths.push(fromPeer('10.3.0.0/24', '10.0.0.3'), fromPeer('10.4.0.0/24', '10.0.0.3', { best: false }));
    await learned.relist();
    expect(last()).toEqual(['10.3.0.0/24 via 10.0.0.3']);
    gobgpd.failing.set('listGlobalPaths', new Error('unavailable'));
    await expect(learned.relist()).rejects.toThrow(/learned routes.*learned-routes\/ipv4: unavailable/);
    expect(handedOver).toHaveLength(2);
  });

  it('lists again when events arrive while it lists (they may be older or newer), three times at most', async () => {
    const { gobgpd, learned, last } = harness();
    await learned.refreshOnLinkPrefixes();
    gobgpd.paths.push(fromPeer('10.2.0.0/24', '10.0.0.2'));
    const client = gobgpd.client();
    const list = client.listGlobalPaths;
    let listings = 0;
    client.listGlobalPaths = (afi) => {
      listings++;
      learned.applyBestPathEvents([]);
      return list(afi);
    };
    gobgpd.client = () => client;
    await learned.relist();
    expect(listings).toBe(3);
    expect(last()).toEqual(['10.2.0.0/24 via 10.0.0.2']);
  });

  it('hands nothing over before a sync has read the node', async () => {
    const gobgpd = new FakeGobgpd();
    const setRoutes = vi.fn();
    const learned = new LearnedRoutes({
      owner: 'routing-bgp',
      routes: { setRoutes },
      gobgp: () => gobgpd.client(),
      localPrefixes: () => Promise.resolve([]),
      isPeerWanted: () => true,
      restartGraceMs: 1_000,
      logger: pino({ level: 'silent' }),
    });
    await learned.relist();
    learned.applyBestPathEvents([fromPeer('10.2.0.0/24', '10.0.0.2')]);
    await vi.advanceTimersByTimeAsync(20);
    expect(setRoutes).not.toHaveBeenCalled();
  });

  it('after a gobgpd restart, keeps the routes for the grace while their peers are wanted, then lets them go', async () => {
    const { gobgpd, learned, last, wantedPeers } = harness();
    await learned.refreshOnLinkPrefixes();
    gobgpd.paths.push(fromPeer('10.2.0.0/24', '10.0.0.2'), fromPeer('10.3.0.0/24', '10.0.0.3'));
    await learned.relist();
    learned.gobgpdRestarted();
    gobgpd.paths.length = 0;
    await learned.relist();
    expect(last()).toEqual(['10.2.0.0/24 via 10.0.0.2', '10.3.0.0/24 via 10.0.0.3']);
    // A Node deleted during the grace loses its routes at once.
    wantedPeers.delete('10.0.0.3');
    await learned.relist();
    expect(last()).toEqual(['10.2.0.0/24 via 10.0.0.2']);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(last()).toEqual([]);
  });

  it('stop() ends the pending hand-over', async () => {
    const { learned, handedOver } = harness();
    await learned.refreshOnLinkPrefixes();
    learned.applyBestPathEvents([fromPeer('10.2.0.0/24', '10.0.0.2')]);
    learned.stop();
    await vi.advanceTimersByTimeAsync(100);
    expect(handedOver).toHaveLength(0);
  });
});

describe('RestartGrace', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('keeps entries for the grace, minus those dropped, and says when they expired', async () => {
    const expired = vi.fn();
    const grace = new RestartGrace<string>(1_000, expired);
    grace.keep(new Map([['a', 'A'], ['b', 'B']]));
    grace.drop('a');
    expect([...grace.entries()]).toEqual([['b', 'B']]);
    await vi.advanceTimersByTimeAsync(999);
    expect(expired).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(expired).toHaveBeenCalledOnce();
    expect([...grace.entries()]).toEqual([]);
  });

  it('nothing to keep leaves an earlier grace running; a new restart restarts the grace', async () => {
    const expired = vi.fn();
    const grace = new RestartGrace<string>(1_000, expired);
    grace.keep(new Map([['a', 'A']]));
    await vi.advanceTimersByTimeAsync(600);
    grace.keep(new Map());
    expect([...grace.entries()]).toEqual([['a', 'A']]);
    grace.keep(new Map([['b', 'B']]));
    await vi.advanceTimersByTimeAsync(600);
    expect(expired).not.toHaveBeenCalled();
    expect([...grace.entries()]).toEqual([['b', 'B']]);
    grace.stop();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(expired).not.toHaveBeenCalled();
  });
});
