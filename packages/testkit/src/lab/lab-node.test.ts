import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LabNode } from './lab-node.js';
import type { PodSandbox } from './lab-node.js';
import { listNetns } from './netns.js';
import { newRunId, runPrefix } from './names.js';
import { podKey, runProbeRequests } from './probing.js';
import type { PodRef, ProbeRequest } from './probe-types.js';
import { interfacesInNetns, labSkipReason, processesMentioning, rootNetnsInterfaces, runInNetns } from './testing/preconditions.js';

const skipReason = labSkipReason('iptables', 'ip6tables');

describe.skipIf(skipReason !== undefined)(`LabNode: pods as network namespaces${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  const runId = newRunId();
  let node: LabNode;
  const pods = new Map<string, PodSandbox>();
  const lookup = (ref: PodRef): PodSandbox => {
    const sandbox = pods.get(podKey(ref));
    if (!sandbox) throw new Error(`no pod ${podKey(ref)}`);
    return sandbox;
  };
  const probe = async (request: ProbeRequest) => (await runProbeRequests([request], lookup))[0];

  beforeAll(async () => {
    node = await LabNode.create({ runId, nodeName: 'n1', podCidrs: ['10.244.7.0/24', 'fd00:10:244:7::/64'] });
    for (const name of ['a', 'b']) {
      const sandbox = await node.addSandbox({
        namespace: 'ns1',
        name,
        ports: [{ port: 80 }, { port: 53, protocol: 'UDP' }, { port: 9, protocol: 'SCTP' }],
      });
      pods.set(`ns1/${name}`, sandbox);
    }
  });

  afterAll(async () => {
    await node?.destroy();
  });

  it('gives each pod one address per pod CIDR, the node its first host addresses, and names everything per run', () => {
    const [a, b] = [lookup('ns1/a'), lookup('ns1/b')];
    expect(node.nodeIps).toEqual(['10.244.7.1', 'fd00:10:244:7::1']);
    expect(a.ips).toEqual(['10.244.7.2', 'fd00:10:244:7::2']);
    expect(b.ips).toEqual(['10.244.7.3', 'fd00:10:244:7::3']);
    for (const name of [node.netns, a.netns, b.netns, a.hostInterface]) expect(name?.startsWith(runPrefix(runId))).toBe(true);
    expect(a.hostInterface?.length).toBeLessThanOrEqual(15);
    expect(interfacesInNetns(node.netns)).toEqual(expect.arrayContaining([a.hostInterface, b.hostInterface]));
    expect(runInNetns(a.netns, 'ip', '-o', 'addr', 'show', 'dev', 'eth0')).toContain('10.244.7.2/32');
    expect(a.skippedPorts).toEqual([{ port: 9, protocol: 'SCTP', reason: expect.stringContaining('SCTP') }]);
  });

  it('carries TCP and UDP between pods over IPv4 and IPv6, answered by the target pod', async () => {
    for (const family of [4, 6] as const) {
      for (const [port, protocol] of [[80, 'TCP'], [53, 'UDP']] as const) {
        const result = await probe({ from: 'ns1/a', to: 'ns1/b', port, protocol, family });
        expect(result, `IPv${family} ${protocol}/${port}`).toMatchObject({ ok: true, reply: 'ns1/b' });
      }
    }
  });

  it('fails fast on a port nobody listens on and skips SCTP with a reason', async () => {
    const tcp = await probe({ from: 'ns1/a', to: 'ns1/b', port: 81, protocol: 'TCP', timeoutMs: 2_000 });
    expect(tcp).toMatchObject({ ok: false, error: 'ECONNREFUSED' });
    expect(tcp?.ms).toBeLessThan(1_000);
    const udp = await probe({ from: 'ns1/a', to: 'ns1/b', port: 54, protocol: 'UDP', timeoutMs: 2_000 });
    expect(udp).toMatchObject({ ok: false, error: 'ECONNREFUSED' });
    const sctp = await probe({ from: 'ns1/a', to: 'ns1/b', port: 9, protocol: 'SCTP' });
    expect(sctp).toMatchObject({ ok: false, skipped: expect.stringContaining('SCTP') });
  });

  it('sends pod-to-pod traffic through the node netns FORWARD chain, where a DROP rule blocks it', async () => {
    const all: ProbeRequest[] = [4, 6].flatMap((family) =>
      (['TCP', 'UDP'] as const).map((protocol) => ({
        from: 'ns1/a',
        to: 'ns1/b',
        port: protocol === 'TCP' ? 80 : 53,
        protocol,
        family: family as 4 | 6,
        timeoutMs: 300,
      })),
    );
    // Only new connections to b's ports match, so the other direction shows the same chain still forwarding.
    const rules = [
      ['iptables', '-d', '10.244.7.3'],
      ['ip6tables', '-d', 'fd00:10:244:7::3'],
    ].flatMap(([tool, ...match]) => [
      [tool, ...match, '-p', 'tcp', '--dport', '80'],
      [tool, ...match, '-p', 'udp', '--dport', '53'],
    ]) as [string, ...string[]][];
    for (const [tool, ...match] of rules) runInNetns(node.netns, tool, '-I', 'FORWARD', ...match, '-j', 'DROP');
    try {
      const blocked = await runProbeRequests(all, lookup);
      expect(blocked.map((result) => result.error)).toEqual(['timeout', 'timeout', 'timeout', 'timeout']);
      const reverse = await runProbeRequests(
        all.map((request) => ({ ...request, from: 'ns1/b', to: 'ns1/a' })),
        lookup,
      );
      expect(reverse.map((result) => result.reply)).toEqual(['ns1/a', 'ns1/a', 'ns1/a', 'ns1/a']);
    } finally {
      for (const [tool, ...match] of rules) runInNetns(node.netns, tool, '-D', 'FORWARD', ...match, '-j', 'DROP');
    }
    const restored = await runProbeRequests(all, lookup);
    expect(restored.map((result) => result.ok)).toEqual([true, true, true, true]);
  });

  it('reaches pods from the node netns and the node from pods', async () => {
    const fromNode = await runProbeRequests(
      [4, 6].map((family) => ({ from: { netns: node.netns }, to: 'ns1/a', port: 80, family: family as 4 | 6 })),
      lookup,
    );
    expect(fromNode.map((result) => result.reply)).toEqual(['ns1/a', 'ns1/a']);
  });

  it('removing a pod removes its netns, veth and agent, and frees its addresses', async () => {
    const c = await node.addSandbox({ namespace: 'ns1', name: 'c', ports: [{ port: 80 }] });
    const pid = c.agent.pid;
    expect(processesMentioning(c.netns)).toContain(pid);
    await node.removeSandbox(c);
    expect(await listNetns()).not.toContain(c.netns);
    expect(interfacesInNetns(node.netns)).not.toContain(c.hostInterface);
    expect(c.hostInterface).toBeDefined();
    expect(processesMentioning(c.netns)).toEqual([]);
    const d = await node.addSandbox({ namespace: 'ns1', name: 'd', ports: [] });
    expect(d.ips).toEqual(c.ips);
    await node.removeSandbox(d);
  });

  it('destroy() leaves no namespace, interface or process of the run behind', async () => {
    const extra = await LabNode.create({ runId, nodeName: 'n2', podCidrs: ['10.244.8.0/24'] });
    const sandbox = await extra.addSandbox({ namespace: 'ns1', name: 'e', ports: [{ port: 80 }] });
    expect(await listNetns()).toEqual(expect.arrayContaining([extra.netns, sandbox.netns]));
    await extra.destroy();
    const left = (await listNetns()).filter((name) => name === extra.netns || name === sandbox.netns);
    expect(left).toEqual([]);
    expect(processesMentioning(sandbox.netns)).toEqual([]);
    expect(rootNetnsInterfaces().filter((name) => name.startsWith(runPrefix(runId)))).toEqual([]);
  });
});
