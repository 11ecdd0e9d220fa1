import { AgentMetrics } from '@kube-router/metrics';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LeaderElector } from './leader-elector.js';
import type { LeaderElectorOptions } from './leader-elector.js';
import { LeaseConflictError, LeaseLock } from './lease-lock.js';
import { captureLogs, leaseSpec, sleep, startTestCluster, uniqueSuffix, waitFor } from './testing/fixtures.js';
import type { CapturedLogs, TestCluster } from './testing/fixtures.js';

// Shortened timings, in kube-router's proportions: the safety margin (lease duration minus renew deadline) is 800 ms.
const LEASE_DURATION_MS = 2000;
const RENEW_DEADLINE_MS = 1200;
const RETRY_PERIOD_MS = 200;

let cluster: TestCluster;
let electors: LeaderElector[];
let leaseName: string;

interface Candidate {
  elector: LeaderElector;
  /** onStartedLeading and onStoppedLeading calls, with times. */
  transitions: { leading: boolean; at: number }[];
  logs: CapturedLogs['lines'];
}

function candidate(identity: string, options: Partial<LeaderElectorOptions> = {}): Candidate {
  const transitions: Candidate['transitions'] = [];
  const { logger, lines } = captureLogs();
  const elector = new LeaderElector({
    kubeConfig: cluster.kubeConfig,
    namespace: 'kube-system',
    name: leaseName,
    identity,
    leaseDurationMs: LEASE_DURATION_MS,
    renewDeadlineMs: RENEW_DEADLINE_MS,
    retryPeriodMs: RETRY_PERIOD_MS,
    logger,
    onStartedLeading: () => transitions.push({ leading: true, at: Date.now() }),
    onStoppedLeading: () => transitions.push({ leading: false, at: Date.now() }),
    ...options,
  });
  electors.push(elector);
  return { elector, transitions, logs: lines };
}

/** Samples isLeader of every candidate every few milliseconds and counts the samples where two led at once. */
function watchForOverlap(candidates: Candidate[]) {
  const stats = { samples: 0, withLeader: 0, overlaps: 0 };
  const timer = setInterval(() => {
    const leaders = candidates.filter((c) => c.elector.isLeader()).length;
    stats.samples++;
    if (leaders > 0) stats.withLeader++;
    if (leaders > 1) stats.overlaps++;
  }, 3);
  return { stats, stop: () => clearInterval(timer) };
}

function holderOf(server: TestCluster['server']): string | undefined {
  return leaseSpec(server, 'kube-system', leaseName)?.holderIdentity;
}

beforeEach(async () => {
  cluster = await startTestCluster();
  electors = [];
  leaseName = `krt-lease-${uniqueSuffix()}`;
});

afterEach(async () => {
  await Promise.all(electors.map((elector) => elector.stop({ release: false })));
  await cluster.close();
});

describe('leader election', () => {
  it('never lets two candidates lead at once, and fails over within the lease duration', async () => {
    const metrics = new AgentMetrics({ collectDefaultMetrics: false });
    const a = candidate('agent-a', { metrics });
    const b = candidate('agent-b', { metrics });
    const overlap = watchForOverlap([a, b]);
    a.elector.start();
    await waitFor('agent-a to lead', () => a.elector.isLeader());
    b.elector.start();
    // Long enough for several renewals and for the other candidate to try and fail many times.
    await sleep(1500);
    // On a starved machine a renewal can miss its deadline and leadership move: find who leads now.
    await waitFor('a leader', () => a.elector.isLeader() || b.elector.isLeader());
    const [leader, follower] = a.elector.isLeader() ? [a, b] : [b, a];
    expect(follower.elector.isLeader()).toBe(false);
    expect(follower.elector.leader).toBe(leader.elector.identity);
    expect(holderOf(cluster.server)).toBe(leader.elector.identity);
    const gauge = await metrics.registry.getSingleMetric('kube_router_leader_election_is_leader')?.get();
    expect(gauge?.values).toEqual([{ labels: { lease: `kube-system/${leaseName}` }, value: 1 }]);

    // A graceful stop releases the lease: the follower takes over well within the lease duration.
    const stoppedAt = Date.now();
    await leader.elector.stop();
    expect(leader.transitions.at(-1)?.leading).toBe(false);
    await waitFor('the follower to lead', () => follower.elector.isLeader(), LEASE_DURATION_MS);
    expect(Date.now() - stoppedAt).toBeLessThan(LEASE_DURATION_MS);
    expect(holderOf(cluster.server)).toBe(follower.elector.identity);
    overlap.stop();
    // Not vacuous: most samples saw a leader (a starved machine may lose some renewals).
    expect(overlap.stats.samples).toBeGreaterThan(200);
    expect(overlap.stats.withLeader).toBeGreaterThan(overlap.stats.samples / 3);
    expect(overlap.stats.overlaps).toBe(0);

    // A crash (no release): agent-c waits for the lease to expire, and no longer than that plus its retry.
    const c = candidate('agent-c');
    const overlapWithC = watchForOverlap([follower, c]);
    c.elector.start();
    await sleep(500);
    expect(c.elector.isLeader()).toBe(false);
    const crashedAt = Date.now();
    await follower.elector.stop({ release: false });
    await waitFor('agent-c to lead', () => c.elector.isLeader(), 2 * LEASE_DURATION_MS);
    const failover = Date.now() - crashedAt;
    expect(failover).toBeGreaterThanOrEqual(LEASE_DURATION_MS - RETRY_PERIOD_MS * 2.2 - 50);
    expect(failover).toBeLessThan(LEASE_DURATION_MS + RETRY_PERIOD_MS * 2.2 + 500);

    overlapWithC.stop();
    expect(overlapWithC.stats.withLeader).toBeGreaterThan(0);
    expect(overlapWithC.stats.overlaps).toBe(0);
  });

  it('keeps a single leader through an API server too slow to renew within the deadline', async () => {
    const a = candidate('agent-a');
    const b = candidate('agent-b');
    const overlap = watchForOverlap([a, b]);
    a.elector.start();
    b.elector.start();
    await waitFor('a leader', () => a.elector.isLeader() || b.elector.isLeader());
    const leader = a.elector.isLeader() ? a : b;

    // Every request now takes longer than the renew deadline: the leader must step down on its own.
    cluster.server.faults.setLatency(RENEW_DEADLINE_MS + 200);
    await waitFor('the leader to step down', () => !leader.elector.isLeader(), RENEW_DEADLINE_MS + 200);
    // isLeader() turns false at the deadline itself; the onStoppedLeading callback follows when the loop gets to it.
    await waitFor('onStoppedLeading', () => leader.transitions.at(-1)?.leading === false, 1_000);
    await sleep(LEASE_DURATION_MS);
    cluster.server.faults.setLatency(0);
    await waitFor('a leader again', () => a.elector.isLeader() || b.elector.isLeader(), 3 * LEASE_DURATION_MS);
    overlap.stop();
    expect(overlap.stats.overlaps).toBe(0);
  });

  it('stops leading (onStoppedLeading) before the lease could expire when renewals fail', async () => {
    const a = candidate('agent-a');
    a.elector.start();
    await waitFor('agent-a to lead', () => a.elector.isLeader());
    await sleep(RETRY_PERIOD_MS * 2);
    await waitFor('agent-a to lead', () => a.elector.isLeader());
    const seen = a.transitions.length;
    cluster.server.faults.failNextRequest('get', 'leases', 500, 1000);
    await waitFor('onStoppedLeading', () => a.transitions.slice(seen).some((t) => !t.leading), LEASE_DURATION_MS);
    const stoppedAt = a.transitions.slice(seen).find((t) => !t.leading)!.at;
    // The last renewal that got through; its renew time is when that attempt started.
    const lastRenewal = Date.parse(leaseSpec(cluster.server, 'kube-system', leaseName)?.renewTime ?? '');
    // The leader steps down at the renew deadline after it, before any other candidate could take the lease.
    expect(stoppedAt - lastRenewal).toBeGreaterThanOrEqual(RENEW_DEADLINE_MS - 5);
    expect(stoppedAt - lastRenewal).toBeLessThan(RENEW_DEADLINE_MS + 200);
    expect(stoppedAt - lastRenewal).toBeLessThan(LEASE_DURATION_MS);
    expect(a.elector.isLeader()).toBe(false);

    cluster.server.faults.reset();
    await waitFor('agent-a to lead again', () => a.elector.isLeader(), 2 * LEASE_DURATION_MS);
    expect(a.transitions.slice(seen).map((t) => t.leading)).toEqual([false, true]);
  });

  it('gets 409 Conflict when writing a lease that changed since it was read', async () => {
    const lock = new LeaseLock(cluster.kubeConfig, 'kube-system', leaseName, 2000);
    const now = new Date();
    const record = { holderIdentity: 'agent-a', leaseDurationSeconds: 15, acquireTime: now, renewTime: now, leaseTransitions: 0 };
    const created = await lock.create(record);
    await expect(lock.create({ ...record, holderIdentity: 'agent-b' })).rejects.toBeInstanceOf(LeaseConflictError);

    const read = await lock.get();
    expect(read?.record.holderIdentity).toBe('agent-a');
    expect(read?.resourceVersion).toBe(created.resourceVersion);
    // Someone else renews in between.
    const updated = await lock.update(read!, { ...record, renewTime: new Date() });
    await expect(lock.update(read!, { ...record, holderIdentity: 'agent-b' })).rejects.toThrow(
      /was changed by someone else \(409 Conflict\)/,
    );
    expect((await lock.get())?.record.holderIdentity).toBe('agent-a');
    expect((await lock.get())?.resourceVersion).toBe(updated.resourceVersion);
    // The lease times are written as MicroTime.
    expect(leaseSpec(cluster.server, 'kube-system', leaseName)?.renewTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  });

  it('steps down at once when someone else holds the lease', async () => {
    const a = candidate('agent-a');
    a.elector.start();
    await waitFor('agent-a to lead', () => a.elector.isLeader());
    const lease = structuredClone(cluster.server.get('coordination.k8s.io/v1', 'Lease', 'kube-system', leaseName)!);
    lease.spec = { ...leaseSpec(cluster.server, 'kube-system', leaseName), holderIdentity: 'intruder', renewTime: new Date().toISOString().replace('Z', '000Z') };
    cluster.server.update(lease);
    await waitFor('agent-a to step down', () => !a.elector.isLeader(), RETRY_PERIOD_MS * 5);
    expect(a.elector.leader).toBe('intruder');
    expect(a.transitions.at(-1)?.leading).toBe(false);
    // Because it saw the other holder, not because its renew deadline ran out.
    expect(a.logs.filter((line) => line.msg === 'stopped leading').map((line) => line.reason)).toEqual([
      'the lease is now held by intruder',
    ]);
    // It does not take the lease back while the intruder's lease is valid.
    await sleep(LEASE_DURATION_MS / 2);
    expect(holderOf(cluster.server)).toBe('intruder');
  });

  it('renews a lease of its own whose fields are garbage, instead of failing every renewal', async () => {
    cluster.server.create(
      {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: leaseName, namespace: 'kube-system' },
        spec: { holderIdentity: 'agent-a', leaseDurationSeconds: 'long', acquireTime: 'yesterday', renewTime: 'soon', leaseTransitions: 'many' },
      },
      { validate: false },
    );
    const a = candidate('agent-a');
    a.elector.start();
    await waitFor('agent-a to lead', () => a.elector.isLeader());
    const spec = leaseSpec(cluster.server, 'kube-system', leaseName);
    expect(spec).toMatchObject({ holderIdentity: 'agent-a', leaseDurationSeconds: LEASE_DURATION_MS / 1000, leaseTransitions: 0 });
    expect(spec?.renewTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(a.logs.filter((line) => line.level === 40)).toEqual([]);
  });

  it('refuses timings that cannot be safe', () => {
    const base = { kubeConfig: cluster.kubeConfig, namespace: 'kube-system', name: 'x', identity: 'a', logger: captureLogs().logger };
    expect(() => new LeaderElector({ ...base, leaseDurationMs: 1000, renewDeadlineMs: 1000 })).toThrow(/must exceed the renew deadline/);
    expect(() => new LeaderElector({ ...base, renewDeadlineMs: 2000, retryPeriodMs: 2000 })).toThrow(/must exceed 1.2/);
    expect(() => new LeaderElector({ ...base, identity: '' })).toThrow(/identity/);
  });
});
