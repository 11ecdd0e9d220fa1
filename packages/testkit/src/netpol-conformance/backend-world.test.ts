import { describe, expect, it } from 'vitest';
import type { Lab, ProbeRequest, ProbeResult } from '../lab/index.js';
import { periodicSyncMismatches, probeThroughout } from './backend-world.js';

// A stand-in lab whose answers the test sets, beside the real restart and switch tests that probe a lab node.
function scriptedLab(answer: (round: number) => boolean[]): Lab & { requests: ProbeRequest[][] } {
  const requests: ProbeRequest[][] = [];
  return {
    requests,
    async probeMany(batch: readonly ProbeRequest[]) {
      requests.push([...batch]);
      await new Promise((resolve) => setTimeout(resolve, 1));
      return answer(requests.length - 1).map((ok) => ({ ok }) as ProbeResult);
    },
  } as unknown as Lab & { requests: ProbeRequest[][] };
}

describe('probeThroughout', () => {
  it('counts every forbidden probe that got through and every allowed one that did not, until stopped', async () => {
    // Round 1 opens the forbidden path, round 2 closes the allowed one; the others are as expected.
    const lab = scriptedLab((round) => [round === 1, round !== 2]);
    const probes = probeThroughout(lab, [
      { from: 'a/x', to: 'b/y', port: 80, open: false },
      { from: 'a/x', to: 'b/y', port: 80, family: 6, open: true },
    ]);
    while (lab.requests.length < 5) await new Promise((resolve) => setTimeout(resolve, 2));
    const seen = await probes.stop();
    expect(seen.rounds).toBeGreaterThanOrEqual(5);
    expect(seen.forbiddenOpened).toBe(1);
    expect(seen.allowedBlocked).toBe(1);
    // A blocked probe waits out its timeout: the forbidden path's is short, the allowed path's long enough for a slow answer.
    expect(lab.requests[0]).toEqual([
      { from: 'a/x', to: 'b/y', port: 80, protocol: 'TCP', family: 4, timeoutMs: 150 },
      { from: 'a/x', to: 'b/y', port: 80, protocol: 'TCP', family: 6, timeoutMs: 1000 },
    ]);
    const rounds = lab.requests.length;
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(lab.requests.length).toBe(rounds);
  });
});

describe('periodicSyncMismatches', () => {
  it('runs a periodic sync, then probes: a failed sync and each mismatch are in the list', async () => {
    const reasons: string[] = [];
    const controller = (ok: boolean) => ({
      async runObservedSync(reason: string) {
        reasons.push(reason);
        return ok ? { ok: true as const, durationMs: 1 } : { ok: false as const, error: new Error('nft refused'), durationMs: 1 };
      },
    });
    const expectations = [{ from: 'a/x', to: 'b/y', port: 80, open: false }];
    expect(await periodicSyncMismatches(controller(true), scriptedLab(() => [false]), expectations)).toEqual([]);
    expect(await periodicSyncMismatches(controller(false), scriptedLab(() => [true]), expectations)).toEqual([
      'the periodic sync failed: nft refused',
      'a/x -> b/y:80/TCP v4: expected blocked, was open',
    ]);
    expect(reasons).toEqual(['periodic', 'periodic']);
  });
});
