import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ProbeRequest, ProbeResult } from '../lab/index.js';
import { CaseContext } from './case-context.js';
import type { EnforcerFlow } from './enforcer.js';
import { Reachability } from './reachability.js';
import type { ConformanceWorld } from './world.js';

/**
 * The retry rules of check() with a scripted prober (the real lab path is in world.test.ts): `answer` decides each
 * probe from the request and how many probeMany() calls came before.
 */
function scripted(answer: (request: ProbeRequest, call: number) => boolean) {
  const calls: ProbeRequest[][] = [];
  let syncs = 0;
  const lab = {
    async probeMany(requests: readonly ProbeRequest[]): Promise<ProbeResult[]> {
      const call = calls.length;
      calls.push([...requests]);
      return requests.map((request) => ({ request, target: String(request.to), ok: answer(request, call), ms: 1 }));
    },
  };
  const enforcer = {
    async syncNow() {
      syncs++;
      return { ok: true };
    },
    async stop() {},
  };
  const world = { lab } as unknown as ConformanceWorld;
  return { context: new CaseContext('scripted', world, enforcer), calls, syncs: () => syncs };
}

const isYbToXa80Udp = (r: ProbeRequest) => r.from === 'y/b' && r.to === 'x/a' && r.port === 80 && r.protocol === 'UDP';

describe('CaseContext.check retries', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('re-probes only a differing cell and passes, with a warning, when it does not repeat', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    const { context, calls, syncs } = scripted((request, call) => !(call === 0 && isYbToXa80Udp(request)));
    await context.check(new Reachability(), { ports: [80] });
    expect(syncs()).toBe(1);
    expect(calls.map((requests) => requests.length)).toEqual([144, 1]);
    expect(warn).toHaveBeenCalledWith(expect.stringMatching(/"scripted" matched only after retrying:\n {2}attempt 1: 1 differ: IPv4 y\/b -> x\/a 80\/UDP blocked/));
  });

  it('fails a difference that repeats after every re-probe and re-sync, listing every round', async () => {
    const { context, calls, syncs } = scripted(() => true);
    const failure = await context.check(new Reachability().expectPeer('y/b', 'x/a', false, { port: 80, protocol: 'UDP' }), { ports: [80] }).then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(failure?.message).toContain('scripted: reachability differs after 3 syncs');
    expect(failure?.message).toContain('IPv4 y/b -> x/a 80/UDP: expected blocked, observed allowed');
    expect(failure?.message.match(/^ {2}attempt \d.*$/gm)).toHaveLength(9);
    expect(syncs()).toBe(3);
    // Each round: the whole matrix, then the differing cell twice.
    expect(calls.map((requests) => requests.length)).toEqual([144, 1, 1, 144, 1, 1, 144, 1, 1]);
  });
});

describe('CaseContext.check with an enforcer that explains', () => {
  /** Pods get addresses from their keys, so that explain's flow names the pair back. */
  const podIp = (key: string) => `10.0.0.${['x', 'y', 'z'].indexOf(key[0] ?? '') * 3 + ['a', 'b', 'c'].indexOf(key[2] ?? '') + 1}`;

  function explaining(lie: (flow: EnforcerFlow) => boolean) {
    const lab = {
      async probeMany(requests: readonly ProbeRequest[]): Promise<ProbeResult[]> {
        return requests.map((request) => ({ request, target: String(request.to), ok: true, ms: 1 }));
      },
    };
    const enforcer = {
      syncNow: async () => ({ ok: true }),
      stop: async () => undefined,
      explain: async (flow: EnforcerFlow) => ({ allowed: !lie(flow), detail: 'scripted' }),
    };
    const world = { lab, podIp } as unknown as ConformanceWorld;
    const explainTally = { checks: 0, pairs: 0 };
    return { context: new CaseContext('explained', world, enforcer, { explainTally }), explainTally };
  }

  it('compares explain with the probe of every pair, and counts them', async () => {
    const { context, explainTally } = explaining(() => false);
    await context.check(new Reachability(), { ports: [80] });
    expect(explainTally).toEqual({ checks: 1, pairs: 144 });
  });

  it('fails the case naming each pair where explain differs from the probe', async () => {
    const { context } = explaining((flow) => flow.source === podIp('y/b') && flow.destination === podIp('x/a') && flow.protocol === 'UDP');
    const failure = await context.check(new Reachability(), { ports: [80] }).then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(failure?.message).toContain('explained: explain differs from the probe on 1 of 144 pairs:\n  IPv4 y/b -> x/a 80/UDP: probe allowed, explain denied (scripted)');
  });
});
