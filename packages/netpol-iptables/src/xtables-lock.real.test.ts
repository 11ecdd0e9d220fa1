import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { addServerAndClients, missingForRealTests, startWorld } from '@kube-router/netpol-testing';
import type { HarnessEnforcer, World } from '@kube-router/netpol-testing';
import { mismatches } from '@kube-router/testkit/netpol-conformance';
import { iptablesBackend } from './testing/backend.js';

/**
 * Issue 35: another agent holds the xtables lock for 20 s (`flock` on it, as iptables-legacy does) while the
 * controller syncs a change. The sync fails naming the lock and is counted, the kernel keeps the old rules, and the
 * first sync after the release applies the change.
 *
 * iptables-legacy is the backend that takes the lock (iptables-nft commits netlink transactions); the plugin runs on
 * it with `iptablesBackend: 'legacy'`. XTABLES_LOCKFILE gives this worker's iptables a lock of its own, so holding it
 * for 20 s stalls no other test's iptables on the machine.
 */
const LEGACY_TOOLS = ['iptables-legacy-restore', 'iptables-legacy-save', 'ip6tables-legacy-restore', 'ip6tables-legacy-save', 'flock'];
const missing = missingForRealTests(iptablesBackend, ...LEGACY_TOOLS);
const lockDir = mkdtempSync(join(tmpdir(), 'krt-xtables-'));
const lockFile = join(lockDir, 'xtables.lock');
process.env.XTABLES_LOCKFILE = lockFile;

const HOLD_MS = 20_000;

/** web/server's ingress from web/client alone. */
const SERVER_FROM_CLIENT = {
  podSelector: { matchLabels: { app: 'server' } },
  ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }] }],
};
/** web/client's ingress from web/server alone: the change synced under the held lock. */
const CLIENT_FROM_SERVER = {
  podSelector: { matchLabels: { app: 'client' } },
  ingress: [{ from: [{ podSelector: { matchLabels: { app: 'server' } } }] }],
};

/** Takes the lock in another process and resolves once it holds it; --no-fork, so that killing it frees the lock. */
async function holdLock(ms: number): Promise<ChildProcess> {
  const holder = spawn('flock', ['--exclusive', '--no-fork', lockFile, 'sh', '-c', `echo held; exec sleep ${ms / 1000}`], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    holder.once('error', reject);
    holder.stdout?.once('data', () => resolve());
  });
  return holder;
}

describe.skipIf(missing !== undefined)(`netpol-iptables (legacy) under a held xtables lock${missing ? ` (skipped: ${missing})` : ''}`, () => {
  let world: World;
  let enforcer: HarnessEnforcer;
  const holders: ChildProcess[] = [];

  /** The legacy tables' rules of both families, without counters. */
  const rules = async () => {
    const saved: string[] = [];
    for (const tool of ['iptables-legacy-save', 'ip6tables-legacy-save']) {
      const lines = (await world.inNode(tool, ['-t', 'filter'])).split('\n').filter((line) => line !== '' && !line.startsWith('#'));
      saved.push(...lines.map((line) => line.replace(/\[\d+:\d+\]/, '')));
    }
    return saved.join('\n');
  };
  /** Each ipset's `ipset save` lines (without its random initval), by name. */
  const sets = async () => {
    const byName = new Map<string, string[]>();
    for (const line of (await world.inNode('ipset', ['save'])).split('\n')) {
      const name = line.split(' ')[1];
      if (name === undefined) continue;
      byName.set(name, [...(byName.get(name) ?? []), line.replace(/ initval 0x[0-9a-f]+/, '')].sort());
    }
    return byName;
  };
  const syncFailures = async () =>
    (await enforcer.metrics.registry.getSingleMetric('kube_router_controller_sync_failures_total')?.get())?.values.find(
      (value) => value.labels.controller === 'netpol',
    )?.value ?? 0;

  beforeAll(async () => {
    world = await startWorld(iptablesBackend);
    await addServerAndClients(world);
    world.policy('web', 'server-from-client', SERVER_FROM_CLIENT);
    enforcer = await world.start({ scheduler: false, options: { iptablesBackend: 'legacy' } });
  }, 90_000);

  afterEach(() => {
    for (const holder of holders.splice(0)) holder.kill('SIGKILL');
  });

  afterAll(async () => {
    await world?.close();
    rmSync(lockDir, { recursive: true, force: true });
  }, 60_000);

  it('fails a sync under the held lock naming it, counts it, keeps the old rules, and applies the change after the release', async () => {
    const first = await enforcer.syncNow();
    expect(first.ok, String(first.error)).toBe(true);
    // The rules are legacy's: iptables-nft shows none of ours.
    expect(await world.inNode('iptables-legacy-save', ['-t', 'filter'])).toContain('KUBE-ROUTER-FORWARD');
    expect(await world.inNode('iptables-nft-save', ['-t', 'filter'])).not.toContain('KUBE-ROUTER-FORWARD');
    const before = [
      { from: 'web/client', to: 'web/server', port: 80, open: true },
      { from: 'other/client', to: 'web/server', port: 80, open: false },
      { from: 'other/client', to: 'web/client', port: 80, open: true },
    ];
    expect(await mismatches(world.lab, before)).toEqual([]);
    const rulesBefore = await rules();
    const setsBefore = await sets();
    const failuresBefore = await syncFailures();

    const holder = await holdLock(HOLD_MS);
    holders.push(holder);
    const held = performance.now();
    const released = new Promise<number>((resolve) => holder.once('exit', () => resolve(performance.now() - held)));
    world.policy('web', 'client-from-server', CLIENT_FROM_SERVER);
    const underLock = await enforcer.syncNow();
    const syncMs = performance.now() - held;
    console.log(`xtables lock: the sync under the held lock failed after ${(syncMs / 1000).toFixed(1)} s: ${String(underLock.error)}`);

    expect(underLock.ok).toBe(false);
    expect(String(underLock.error)).toMatch(/xtables lock/);
    expect(await syncFailures()).toBe(failuresBefore + 1);
    expect(enforcer.health.livenessChecks().every((check) => check.ok)).toBe(true);
    // It failed within about one lock wait (5 s), not one per restore in turn (four, for a policy of both families),
    // and while the lock was still held: nothing of the sync's later steps waited for the release and went in then.
    expect(syncMs).toBeLessThan(HOLD_MS - 5_000);
    expect(holder.exitCode, 'the holder still holds the lock').toBeNull();
    const rulesUnderLock = await rules();
    expect(rulesUnderLock).toBe(rulesBefore);
    // The ipset restore (sets first, then the rules that match on them) needs no xtables lock: the new policy's sets
    // may be there, but no rule refers to them, and every set that was there is as it was.
    const setsUnderLock = await sets();
    for (const [name, lines] of setsBefore) expect(setsUnderLock.get(name)).toEqual(lines);
    const added = [...setsUnderLock.keys()].filter((name) => !setsBefore.has(name));
    for (const name of added) expect(rulesUnderLock).not.toContain(name);
    expect(await mismatches(world.lab, before)).toEqual([]);

    // The scheduler's retry after a failure: a full sync, which reads the kernel back first.
    const releasedAfterMs = await released;
    const retried = performance.now();
    const after = await enforcer.controller.runObservedSync('retry');
    expect(after.ok, after.ok ? '' : String(after.error)).toBe(true);
    console.log(
      `xtables lock: released after ${(releasedAfterMs / 1000).toFixed(1)} s; the retry after it succeeded in ${((performance.now() - retried) / 1000).toFixed(1)} s`,
    );
    expect(await mismatches(world.lab, [...before.slice(0, 2), { from: 'other/client', to: 'web/client', port: 80, open: false }])).toEqual([]);
  }, 80_000);
});
