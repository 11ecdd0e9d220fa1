import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { CommandError } from './command.js';
import { Iptables } from './iptables.js';
import { renderIptablesRestore } from './iptables-restore.js';
import { missingForRealTests, useTestNetns } from './testing/netns.js';
import { processAlive } from './testing/processes.js';

/**
 * Issue 35's lock contention: another agent holds the xtables lock (`flock` on it, as iptables-legacy itself does)
 * for 20 s. A restore waits for it within its --wait, or fails naming the lock, and never leaves half its input
 * behind; once the lock is free, the next restore applies.
 *
 * The legacy backend is the one that takes the lock (iptables-nft commits through netlink transactions instead).
 * XTABLES_LOCKFILE points this worker's iptables at a lock file of its own, so holding it for 20 s stalls no other
 * test's iptables on the machine.
 */
const missing = missingForRealTests('iptables-legacy-restore', 'iptables-legacy-save', 'flock');
const lockDir = mkdtempSync(join(tmpdir(), 'krt-xtables-'));
const lockFile = join(lockDir, 'xtables.lock');
process.env.XTABLES_LOCKFILE = lockFile;

const HOLD_SECONDS = 20;

/** Takes the lock in another process and resolves once it holds it. --no-fork: the process that holds the lock is
 * the one killed, not a parent whose orphaned child would hold it on. */
async function holdLock(seconds: number): Promise<ChildProcess> {
  const holder = spawn('flock', ['--exclusive', '--no-fork', lockFile, 'sh', '-c', `echo held; exec sleep ${seconds}`], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    holder.once('error', reject);
    holder.stdout?.once('data', () => resolve());
  });
  return holder;
}

const restoreInput = (chain: string) =>
  renderIptablesRestore([
    {
      table: 'filter',
      chains: [
        { name: `${chain}-FWD`, rules: [`-d 192.0.2.10/32 -j ${chain}-POL`] },
        { name: `${chain}-POL`, rules: ['-p tcp -m tcp --dport 80 -j ACCEPT', '-j DROP'] },
      ],
      lines: [`-I FORWARD 1 -m comment --comment "kube-router lock test" -j ${chain}-FWD`],
    },
  ]);

describe.skipIf(missing !== undefined)(`iptables under a held xtables lock ${missing ? `(skipped: ${missing})` : ''}`, () => {
  const netns = useTestNetns();
  const holders: ChildProcess[] = [];
  const iptablesWaiting = (waitSeconds: number) =>
    new Iptables({ runner: netns.runner, netns: netns.name, backend: 'legacy', waitSeconds });
  const ours = async (iptables: Iptables) =>
    (await iptables.saveParsed()).chains.filter((chain) => chain.name.startsWith('KRT-LOCK')).map((chain) => chain.name);

  afterEach(() => {
    for (const holder of holders.splice(0)) holder.kill('SIGKILL');
  });
  afterAll(() => rmSync(lockDir, { recursive: true, force: true }));

  it('fails within its wait, naming the lock, and applies nothing of its input; the next restore after the release applies', async () => {
    const holder = await holdLock(HOLD_SECONDS);
    holders.push(holder);
    const iptables = iptablesWaiting(2);

    const started = performance.now();
    const failure = await iptables.restore(restoreInput('KRT-LOCK')).then(() => undefined, (error: unknown) => error);
    const waitedMs = performance.now() - started;
    expect(failure).toBeInstanceOf(CommandError);
    expect(String((failure as CommandError).message)).toMatch(/xtables lock/);
    // It gave up after its own wait, long before the holder let go (a loaded machine may add seconds, not twenty).
    expect(waitedMs).toBeGreaterThanOrEqual(1_500);
    expect(waitedMs).toBeLessThan(HOLD_SECONDS * 1000 - 5_000);
    expect(await processAlive(holder.pid!)).toBe(true);
    // Nothing half-applied: iptables-save waits for no lock, so it reads the table while the lock is still held.
    expect(await ours(iptables)).toEqual([]);

    holder.kill('SIGKILL');
    await new Promise((resolve) => holder.once('exit', resolve));
    await iptables.restore(restoreInput('KRT-LOCK'));
    expect((await ours(iptables)).sort()).toEqual(['KRT-LOCK-FWD', 'KRT-LOCK-POL']);
  });

  it('waits out a hold shorter than its --wait and then applies', async () => {
    holders.push(await holdLock(3));
    const iptables = iptablesWaiting(HOLD_SECONDS + 10);
    const started = performance.now();
    await iptables.restore(restoreInput('KRT-LOCKW'));
    expect(performance.now() - started).toBeGreaterThanOrEqual(2_000);
    expect((await ours(iptables)).filter((name) => name.startsWith('KRT-LOCKW')).sort()).toEqual(['KRT-LOCKW-FWD', 'KRT-LOCKW-POL']);
  }, 60_000);
}, 90_000);
