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

function harness(options: { wantedPeers?: Set<string>; catchUp?: () => boolean } = {}) {
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
    ...(options.catchUp && { catchUp: options.catchUp }),
    logger: pino({ level: 'silent' }),
  });
  learned.setNode(['ipv4'], ['10.1.0.0/24']);
  const last = () => handedOver.at(-1)?.map((r) => `${r.destination} via ${r.gateway}`).sort();
  return { gobgpd, learned, handedOver, last, wantedPeers };
}

/** Advances the fake clock, then 1 ms more: what a timer due by then left for setImmediate runs on the next tick. */
async function advance(ms: number): Promise<void> {
  await vi.advanceTimersByTimeAsync(ms);
  await vi.advanceTimersByTimeAsync(1);
}

describe('LearnedRoutes', () => {
  // setImmediate too: a hand-over waits for the events read after its timer (vitest leaves it real by default).
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'Date'] }));
  afterEach(() => vi.useRealTimers());

  it('hands a burst of best-path events to route-sync once: on-link next hops only, never its own pod CIDR', async () => {
    const { learned, handedOver, last } = harness();
    await learned.refreshOnLinkPrefixes();
    learned.applyBestPathEvents([fromPeer('10.2.0.0/24', '10.0.0.2')]);
    learned.applyBestPathEvents([fromPeer('10.9.0.0/24', '192.0.2.1'), fromPeer('10.1.0.0/24', '10.0.0.3')]);
    learned.applyBestPathEvents([fromPeer('10.3.0.0/24', '10.0.0.3')]);
    expect(handedOver).toHaveLength(0);
    await advance(50);
    expect(handedOver).toHaveLength(1);
    expect(last()).toEqual(['10.2.0.0/24 via 10.0.0.2', '10.3.0.0/24 via 10.0.0.3']);
  });

  it('a withdrawal, or its own path becoming best, ends the route; an unchanged set is not handed over again', async () => {
    const { learned, handedOver, last } = harness();
    await learned.refreshOnLinkPrefixes();
    learned.applyBestPathEvents([fromPeer('10.2.0.0/24', '10.0.0.2'), fromPeer('10.3.0.0/24', '10.0.0.3')]);
    await advance(50);
    learned.applyBestPathEvents([fromPeer('10.2.0.0/24', '10.0.0.2', { isWithdraw: true }), { ...podCidrPath('10.3.0.0/24', '10.0.0.1') }]);
    await advance(50);
    expect(last()).toEqual([]);
    learned.applyBestPathEvents([fromPeer('10.2.0.0/24', '10.0.0.2', { isWithdraw: true })]);
    await advance(50);
    expect(handedOver).toHaveLength(2);
  });

  it('a relisting replaces what events said; a failed one keeps the routes handed over and says so', async () => {
    const { gobgpd, learned, last, handedOver } = harness();
    await learned.refreshOnLinkPrefixes();
    learned.applyBestPathEvents([fromPeer('10.2.0.0/24', '10.0.0.2')]);
    await advance(50);
    gobgpd.paths.push(fromPeer('10.3.0.0/24', '10.0.0.3'), fromPeer('10.4.0.0/24', '10.0.0.3', { best: false }));
    await learned.relist();
    expect(last()).toEqual(['10.3.0.0/24 via 10.0.0.3']);
    gobgpd.failing.set('listRoutingPaths', new Error('unavailable'));
    await expect(learned.relist()).rejects.toThrow(/learned routes.*learned-routes\/ipv4: unavailable/);
    expect(handedOver).toHaveLength(2);
  });

  /**
   * relist() with `during(n)` run inside the n-th listing, once gobgpd's answer is taken: what the stream says (events,
   * a reopened stream's table) while the agent lists. gobgpd holds 10.2.0.0/24 from 10.0.0.2 when it starts.
   */
  async function relistWith(during: (listing: number, h: ReturnType<typeof harness>) => void): Promise<{ listings: number; routes: string[] }> {
    const h = harness();
    await h.learned.refreshOnLinkPrefixes();
    h.gobgpd.paths.push(fromPeer('10.2.0.0/24', '10.0.0.2'));
    const client = h.gobgpd.client();
    const list = client.listRoutingPaths;
    let listings = 0;
    client.listRoutingPaths = async (afi) => {
      const listed = await list(afi);
      during(++listings, h);
      return listed;
    };
    h.gobgpd.client = () => client;
    await h.learned.relist();
    return { listings, routes: h.last() ?? [] };
  }

  /** A mesh coming up during the sync: after each listing is taken, gobgpd learns one more path and the stream says so. */
  const learnsOneMore = (listing: number, { gobgpd, learned }: ReturnType<typeof harness>) => {
    const path = fromPeer(`10.${2 + listing}.0.0/24`, '10.0.0.3');
    gobgpd.paths.push(path);
    learned.applyBestPathEvents([path]);
  };
  const withdrawal = fromPeer('10.2.0.0/24', '10.0.0.2', { isWithdraw: true });

  it.each([
    {
      // Events may be older or newer than the listing: it lists again, three times at most.
      case: 'lists again when events arrive while it lists, three times at most',
      during: (_listing: number, { learned }: ReturnType<typeof harness>) => learned.applyBestPathEvents([]),
      routes: ['10.2.0.0/24 via 10.0.0.2'],
    },
    {
      case: 'keeps what events said during the last listing: a path learned after that listing was taken is not lost',
      during: learnsOneMore,
      routes: ['10.2.0.0/24 via 10.0.0.2', '10.3.0.0/24 via 10.0.0.3', '10.4.0.0/24 via 10.0.0.3', '10.5.0.0/24 via 10.0.0.3'],
    },
    {
      case: 'keeps a withdrawal that came during the last listing: a path the listing still has stays withdrawn',
      during: (listing: number, h: ReturnType<typeof harness>) => {
        learnsOneMore(listing, h);
        if (listing === 3) h.learned.applyBestPathEvents([withdrawal]);
      },
      routes: ['10.3.0.0/24 via 10.0.0.3', '10.4.0.0/24 via 10.0.0.3', '10.5.0.0/24 via 10.0.0.3'],
    },
    {
      // The stream was reopened: gobgpd's table as it is now, then the withdrawal of a path the listing still has.
      case: 'keeps a table that came during the last listing over that listing, with the events after it',
      during: (listing: number, { gobgpd, learned }: ReturnType<typeof harness>) => {
        gobgpd.paths.push(fromPeer(`10.${2 + listing}.0.0/24`, '10.0.0.3'));
        if (listing === 3) {
          learned.applySnapshot([...gobgpd.paths]);
          learned.applyBestPathEvents([withdrawal]);
        } else learned.applyBestPathEvents([]);
      },
      routes: ['10.3.0.0/24 via 10.0.0.3', '10.4.0.0/24 via 10.0.0.3', '10.5.0.0/24 via 10.0.0.3'],
    },
  ])('$case', async ({ during, routes }) => {
    const outcome = await relistWith(during);
    expect(outcome).toEqual({ listings: 3, routes });
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
    await advance(50);
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
    await advance(1_000);
    expect(last()).toEqual([]);
  });

  it('stop() ends the pending hand-over', async () => {
    const { learned, handedOver } = harness();
    await learned.refreshOnLinkPrefixes();
    learned.applyBestPathEvents([fromPeer('10.2.0.0/24', '10.0.0.2')]);
    learned.stop();
    await advance(100);
    expect(handedOver).toHaveLength(0);
  });

  it('waits for a pause in the events, but hands over within a second of a stream that never pauses', async () => {
    const { learned, handedOver } = harness();
    await learned.refreshOnLinkPrefixes();
    for (let i = 0; i < 30; i++) {
      learned.applyBestPathEvents([fromPeer(`10.2.${i}.0/24`, '10.0.0.2')]);
      await advance(40);
    }
    // 1,200 ms of events 40 ms apart: one hand-over at the 1 s cap, none at each event.
    expect(handedOver.map((routes) => routes.length)).toEqual([25]);
    await advance(50);
    expect(handedOver.map((routes) => routes.length)).toEqual([25, 30]);
  });

  it('a pause is real only if no event was waiting behind the timer: a busy loop does not split a burst', async () => {
    const { learned, handedOver } = harness();
    await learned.refreshOnLinkPrefixes();
    learned.applyBestPathEvents([fromPeer('10.2.0.0/24', '10.0.0.2')]);
    // The timer is due; before its setImmediate runs, the loop reads an event that had arrived meanwhile.
    await vi.advanceTimersByTimeAsync(50);
    learned.applyBestPathEvents([fromPeer('10.3.0.0/24', '10.0.0.2')]);
    await advance(0);
    expect(handedOver).toHaveLength(0);
    await advance(50);
    expect(handedOver.map((routes) => routes.length)).toEqual([2]);
  });

  /** `count` paths from 10.0.0.2, each its own event as gobgpd streams them. */
  const burst = (learned: LearnedRoutes, count: number, from = 0) => {
    for (let i = from; i < from + count; i++) learned.applyBestPathEvents([fromPeer(`10.${100 + (i >> 8)}.${i & 255}.0/24`, '10.0.0.2')]);
  };

  it('a burst of 1,000 paths asks once for gobgpd’s table and hands over only the table, which replaces the events', async () => {
    const catchUp = vi.fn(() => true);
    const { learned, handedOver, last } = harness({ catchUp });
    await learned.refreshOnLinkPrefixes();
    learned.applyBestPathEvents([fromPeer('10.3.0.0/24', '10.0.0.3')]);
    burst(learned, 998);
    expect(catchUp).not.toHaveBeenCalled();
    burst(learned, 500, 998);
    expect(catchUp).toHaveBeenCalledTimes(1);
    // The table is on its way: what the events said so far is held, not handed over after the pause.
    await advance(300);
    expect(handedOver).toHaveLength(0);
    // The table: 2,000 paths, and 10.3.0.0/24 withdrawn (absent) in what the old stream still had queued.
    learned.applySnapshot(Array.from({ length: 2_000 }, (_, i) => fromPeer(`10.${100 + (i >> 8)}.${i & 255}.0/24`, '10.0.0.2')));
    // The table is complete: a 10 ms pause, not the 50 ms between events.
    await advance(10);
    expect(handedOver.map((routes) => routes.length)).toEqual([2_000]);
    expect(last()).not.toContain('10.3.0.0/24 via 10.0.0.3');
    // The next burst asks again.
    burst(learned, 1_000, 2_000);
    expect(catchUp).toHaveBeenCalledTimes(2);
  });

  it('a table that does not come holds the hand-over no longer than the cap; paths spread over seconds never ask for one', async () => {
    const catchUp = vi.fn(() => true);
    const { learned, handedOver } = harness({ catchUp });
    await learned.refreshOnLinkPrefixes();
    burst(learned, 1_000);
    expect(catchUp).toHaveBeenCalledTimes(1);
    await advance(999);
    expect(handedOver).toHaveLength(0);
    await advance(1);
    expect(handedOver.map((routes) => routes.length)).toEqual([1_000]);

    const otherCatchUp = vi.fn(() => true);
    const other = harness({ catchUp: otherCatchUp });
    await other.learned.refreshOnLinkPrefixes();
    for (let second = 0; second < 4; second++) {
      burst(other.learned, 600, second * 600);
      await advance(1_001);
    }
    expect(other.handedOver.at(-1)).toHaveLength(2_400);
    expect(otherCatchUp).not.toHaveBeenCalled();
  });

  it('a table that could not be asked for (no stream open) is not waited for: the pause, not the cap; the next burst asks again', async () => {
    const catchUp = vi.fn(() => false);
    const { learned, handedOver } = harness({ catchUp });
    await learned.refreshOnLinkPrefixes();
    burst(learned, 1_000);
    expect(catchUp).toHaveBeenCalledTimes(1);
    await advance(50);
    expect(handedOver.map((routes) => routes.length)).toEqual([1_000]);
    // Still in the same second: each event of the burst asks, as none is on its way.
    burst(learned, 1, 1_000);
    expect(catchUp).toHaveBeenCalledTimes(2);
    await advance(50);
    expect(handedOver.map((routes) => routes.length)).toEqual([1_000, 1_001]);
  });

  it('a stream that ends before the table it was to bring ends the wait: the pause, not the cap, now and for later events', async () => {
    const catchUp = vi.fn(() => true);
    const { learned, handedOver } = harness({ catchUp });
    await learned.refreshOnLinkPrefixes();
    burst(learned, 1_000);
    expect(catchUp).toHaveBeenCalledTimes(1);
    await advance(300);
    expect(handedOver).toHaveLength(0);
    learned.watchEnded();
    await advance(50);
    expect(handedOver.map((routes) => routes.length)).toEqual([1_000]);
    // A few paths later on (a new stream, no table awaited) go after the pause.
    await advance(2_000);
    learned.applyBestPathEvents([fromPeer('10.3.0.0/24', '10.0.0.3')]);
    await advance(50);
    expect(handedOver.map((routes) => routes.length)).toEqual([1_000, 1_001]);
    // And the next burst asks for a table again.
    burst(learned, 1_000, 2_000);
    expect(catchUp).toHaveBeenCalledTimes(2);
    // With nothing pending, the end of a stream schedules nothing.
    learned.watchEnded();
    learned.watchEnded();
  });

  it('stop between a hand-over timer and its setImmediate hands nothing over', async () => {
    const { learned, handedOver } = harness();
    await learned.refreshOnLinkPrefixes();
    learned.applyBestPathEvents([fromPeer('10.2.0.0/24', '10.0.0.2')]);
    // The 50 ms timer fires and queues its check; stop comes before the check runs.
    await vi.advanceTimersByTimeAsync(50);
    learned.stop();
    await advance(1_000);
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
