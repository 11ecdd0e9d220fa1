import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mismatches, probeThroughout } from '@kube-router/testkit/netpol-conformance';
import { missingForRealTests, startWorld } from './testing/world.js';
import type { World } from './testing/world.js';

const missing = missingForRealTests();

/** Everything in iptables-save output except our own chains, the jumps into them and counters/comments. */
function foreignLines(save: string): string[] {
  return save
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#') && !/KUBE-(ROUTER|POD-FW|NWPLCY)/.test(line))
    .map((line) => line.replace(/\[\d+:\d+\]/, ''));
}

function ownChainNames(save: string): string[] {
  return save
    .split('\n')
    .filter((line) => /^:KUBE-/.test(line))
    .map((line) => line.split(' ')[0] as string)
    .sort();
}

describe.skipIf(missing !== undefined)('agent restart', () => {
  let world: World;

  beforeAll(async () => {
    world = await startWorld();
    await Promise.all([
      world.lab.addPod({ namespace: 'web', name: 'server', labels: { app: 'server' }, ports: [{ port: 80 }] }),
      world.lab.addPod({ namespace: 'web', name: 'client', labels: { app: 'client' }, ports: [{ port: 80 }] }),
      world.lab.addPod({ namespace: 'other', name: 'client', labels: { app: 'client' }, ports: [{ port: 80 }] }),
    ]);
    // Another tool's rules in the same filter table, both families.
    for (const tool of ['iptables', 'ip6tables']) {
      await world.inNode(tool, ['-N', 'FOREIGN-TOOL']);
      await world.inNode(tool, ['-A', 'FOREIGN-TOOL', '-p', 'tcp', '--dport', '9', '-m', 'comment', '--comment', 'foreign rule', '-j', 'DROP']);
      await world.inNode(tool, ['-A', 'FORWARD', '-j', 'FOREIGN-TOOL']);
      await world.inNode(tool, ['-A', 'INPUT', '-p', 'tcp', '--dport', '9999', '-j', 'ACCEPT']);
    }
  }, 90_000);

  afterAll(async () => {
    await world?.close();
  }, 60_000);

  it('never opens a forbidden path while the agent stops, restarts and catches up, and leaves other rules alone', async () => {
    const foreignBefore = {
      v4: foreignLines(await world.inNode('iptables-save', [])),
      v6: foreignLines(await world.inNode('ip6tables-save', [])),
    };
    expect(foreignBefore.v4.join('\n')).toContain('FOREIGN-TOOL');

    world.policy('web', 'server-from-web', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ podSelector: {} }] }],
    });
    const first = await world.start();
    expect((await first.syncNow()).ok).toBe(true);
    expect(
      await mismatches(world.lab, [
        { from: 'web/client', to: 'web/server', port: 80, open: true },
        { from: 'other/client', to: 'web/server', port: 80, open: false },
        { from: 'other/client', to: 'web/server', port: 80, family: 6, open: false },
      ]),
    ).toEqual([]);
    const chainsBefore = ownChainNames(await world.inNode('iptables-save', []));
    const setsBefore = await world.inNode('ipset', ['save']);

    const probes = probeThroughout(world.lab, [
      { from: 'other/client', to: 'web/server', port: 80, family: 4, open: false },
      { from: 'other/client', to: 'web/server', port: 80, family: 6, open: false },
    ]);

    await new Promise((resolve) => setTimeout(resolve, 300));
    await first.stop();
    // Stopping leaves the rules in the kernel.
    expect(ownChainNames(await world.inNode('iptables-save', []))).toEqual(chainsBefore);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const second = await world.start();
    expect((await second.syncNow()).ok).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const { rounds, forbiddenOpened } = await probes.stop();

    expect(rounds).toBeGreaterThan(3);
    expect(forbiddenOpened).toBe(0);
    expect(await mismatches(world.lab, [{ from: 'web/client', to: 'web/server', port: 80, open: true }])).toEqual([]);
    // Same names after the restart, and sets whose members matched were adopted, not rebuilt (a rebuilt set would
    // carry a new initval).
    expect(ownChainNames(await world.inNode('iptables-save', []))).toEqual(chainsBefore);
    expect(await world.inNode('ipset', ['save'])).toBe(setsBefore);
    expect(foreignLines(await world.inNode('iptables-save', []))).toEqual(foreignBefore.v4);
    expect(foreignLines(await world.inNode('ip6tables-save', []))).toEqual(foreignBefore.v6);

    // Later syncs leave them alone too, and removing every policy removes our objects but not theirs.
    world.deletePolicy('web', 'server-from-web');
    expect((await second.syncNow()).ok).toBe(true);
    const after = await world.inNode('iptables-save', []);
    expect(after).not.toContain('KUBE-POD-FW-');
    expect(foreignLines(after)).toEqual(foreignBefore.v4);
    expect(await world.inNode('ipset', ['list', '-n'])).not.toContain('KUBE-');
    expect(await mismatches(world.lab, [{ from: 'other/client', to: 'web/server', port: 80, open: true }])).toEqual([]);
  }, 60_000);
});
