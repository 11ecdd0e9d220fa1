import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mismatches, probeThroughout } from '@kube-router/testkit/netpol-conformance';
import { missingForRealTests, startWorld } from './testing/world.js';
import type { World } from './testing/world.js';

const missing = missingForRealTests('iptables', 'ip6tables', 'iptables-save');

const FOREIGN_TABLE = `table inet tnf-foreign-tool {
\tset blocked {
\t\ttype ipv4_addr
\t\telements = { 192.0.2.9 }
\t}

\tchain input {
\t\ttype filter hook input priority filter + 10; policy accept;
\t\tip saddr @blocked tcp dport 9 drop comment "foreign rule"
\t}
}
`;

/** iptables-save without counters and comment lines. */
function withoutCounters(save: string): string[] {
  return save
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => line.replace(/\[\d+:\d+\]/, ''));
}

describe.skipIf(missing !== undefined)(`agent restart (nftables)${missing ? ` (skipped: ${missing})` : ''}`, () => {
  let world: World;

  beforeAll(async () => {
    world = await startWorld();
    await Promise.all([
      world.lab.addPod({ namespace: 'web', name: 'server', labels: { app: 'server' }, ports: [{ port: 80 }] }),
      world.lab.addPod({ namespace: 'web', name: 'client', labels: { app: 'client' }, ports: [{ port: 80 }] }),
      world.lab.addPod({ namespace: 'other', name: 'client', labels: { app: 'client' }, ports: [{ port: 80 }] }),
    ]);
    // Another tool's nftables table, and iptables rules (in the kernel's own nft tables with iptables-nft) beside ours.
    await world.inNode('nft', ['-f', '-'], FOREIGN_TABLE);
    for (const tool of ['iptables', 'ip6tables']) {
      await world.inNode(tool, ['-N', 'FOREIGN-TOOL']);
      await world.inNode(tool, ['-A', 'FOREIGN-TOOL', '-p', 'tcp', '--dport', '9', '-m', 'comment', '--comment', 'foreign rule', '-j', 'DROP']);
      await world.inNode(tool, ['-A', 'FORWARD', '-j', 'FOREIGN-TOOL']);
    }
  }, 90_000);

  afterAll(async () => {
    await world?.close();
  }, 60_000);

  it('never opens a forbidden path while the agent stops, restarts and catches up, adopts its tables, and leaves other rules alone', async () => {
    const foreignTable = await world.inNode('nft', ['list', 'table', 'inet', 'tnf-foreign-tool']);
    expect(foreignTable).toBe(FOREIGN_TABLE);
    const iptablesBefore = { v4: withoutCounters(await world.inNode('iptables-save', [])), v6: withoutCounters(await world.inNode('ip6tables-save', [])) };

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
    // With handles: a chain flushed and refilled, or a set rebuilt, would show new ones.
    const ours = async () =>
      `${await world.inNode('nft', ['-a', 'list', 'table', 'ip', 'kube-router-filter-ipv4'])}${await world.inNode('nft', ['-a', 'list', 'table', 'ip6', 'kube-router-filter-ipv6'])}`;
    const before = await ours();

    const probes = probeThroughout(world.lab, [
      { from: 'other/client', to: 'web/server', port: 80, family: 4, open: false },
      { from: 'other/client', to: 'web/server', port: 80, family: 6, open: false },
    ]);

    await new Promise((resolve) => setTimeout(resolve, 300));
    await first.stop();
    expect(await ours()).toBe(before);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const second = await world.start();
    expect((await second.syncNow()).ok).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const { rounds, forbiddenOpened } = await probes.stop();

    expect(rounds).toBeGreaterThan(3);
    expect(forbiddenOpened).toBe(0);
    expect(await mismatches(world.lab, [{ from: 'web/client', to: 'web/server', port: 80, open: true }])).toEqual([]);
    // Adopted, not rewritten: every chain, rule and set has its old handle.
    expect(await ours()).toBe(before);
    expect(await world.inNode('nft', ['list', 'table', 'inet', 'tnf-foreign-tool'])).toBe(foreignTable);
    expect(withoutCounters(await world.inNode('iptables-save', []))).toEqual(iptablesBefore.v4);
    expect(withoutCounters(await world.inNode('ip6tables-save', []))).toEqual(iptablesBefore.v6);

    // Removing every policy removes our pod and policy chains and sets but nothing of theirs.
    world.deletePolicy('web', 'server-from-web');
    expect((await second.syncNow()).ok).toBe(true);
    const after = await world.inNode('nft', ['list', 'table', 'ip', 'kube-router-filter-ipv4']);
    expect(after).not.toMatch(/KUBE-POD-FW-|KUBE-NWPLCY-[0-9A-F]{16}|KUBE-SRC-/);
    expect(await world.inNode('nft', ['list', 'table', 'inet', 'tnf-foreign-tool'])).toBe(foreignTable);
    expect(withoutCounters(await world.inNode('iptables-save', []))).toEqual(iptablesBefore.v4);
    expect(await mismatches(world.lab, [{ from: 'other/client', to: 'web/server', port: 80, open: true }])).toEqual([]);
  }, 60_000);
});
