import { randomInt } from 'node:crypto';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { connect, createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer } from '../index.js';
import type { ApiServer, KubeObject } from '../index.js';
import { startLabCluster, type LabCluster } from './cluster.js';
import { listNetns } from './netns.js';
import { createLabUnderlay } from './underlay.js';
import { rootNetnsInterfaces, labSkipReason, runInNetns } from './testing/preconditions.js';

const run = promisify(execFile);
const skipReason = labSkipReason();
const suffix = skipReason ? ` (skipped: ${skipReason})` : '';
const webPorts = [{ port: 80, protocol: 'TCP' as const }];

/** A TCP connect from the test's own (host) network namespace. */
function connects(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: 1_000 });
    socket.on('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('timeout', () => {
      socket.destroy();
      resolve(false);
    });
    socket.on('error', () => resolve(false));
  });
}

describe.skipIf(skipReason !== undefined)(`lab cluster: nodes joined by an underlay${suffix}`, () => {
  // A subnet of its own, so that an `npm start` lab on 10.250.0.0/24 can run beside this test.
  const subnet = randomInt(100, 250);
  const runId = `tlab${randomInt(36 * 36).toString(36).padStart(2, '0')}`;
  let api: ApiServer;
  let cluster: LabCluster;

  beforeAll(async () => {
    api = await startApiServer({ port: 0 });
    cluster = await startLabCluster({
      apiServer: api,
      runId,
      nodes: 2,
      underlayCidrs: [`10.250.${subnet}.0/24`, `fd00:10:250:${subnet.toString(16)}::/64`],
    });
    await Promise.all([
      cluster.node('lab-node-1').addPod({ namespace: 'x', name: 'a', ports: webPorts }),
      cluster.node('lab-node-2').addPod({ namespace: 'x', name: 'b', ports: webPorts }),
    ]);
  });

  afterAll(async () => {
    await cluster?.stop();
    await api?.close();
  });

  it('registers every node with its own pod CIDRs and its underlay addresses as InternalIPs', () => {
    for (const [index, name] of ['lab-node-1', 'lab-node-2'].entries()) {
      const node = api.get('v1', 'Node', undefined, name) as KubeObject & {
        spec: { podCIDRs: string[] };
        status: { addresses: { type: string; address: string }[] };
      };
      expect(node.spec.podCIDRs).toEqual([`10.244.${index}.0/24`, index === 0 ? 'fd00:10:244::/64' : `fd00:10:244:${index}::/64`]);
      expect(node.status.addresses.filter((a) => a.type === 'InternalIP').map((a) => a.address)).toEqual([
        `10.250.${subnet}.${11 + index}`,
        `fd00:10:250:${subnet.toString(16)}::${(11 + index).toString(16)}`,
      ]);
    }
    expect(cluster.node('lab-node-2').pod('x/b').ipv4).toMatch(/^10\.244\.1\.\d+$/);
  });

  it('lets the host reach each node, and each node reach the host, over the underlay', async () => {
    const [node1, node2] = cluster.nodes;
    expect(runInNetns(node1!.nodeNetns, 'ip', '-o', 'addr', 'show', 'dev', 'eth0')).toContain(`10.250.${subnet}.11/24`);
    // The host side: a listener on the host's underlay address, reached from inside node 2.
    const server: Server = createServer((socket) => socket.end('host\n'));
    await new Promise<void>((resolve) => server.listen(0, cluster.underlay.hostIps[0], resolve));
    const { port } = server.address() as { port: number };
    try {
      const script = `require('net').connect(${port}, '${cluster.underlay.hostIps[0]}').on('data', (d) => { process.stdout.write(d); process.exit(0); }).on('error', () => process.exit(1));`;
      const { stdout } = await run('ip', ['netns', 'exec', node2!.nodeNetns, process.execPath, '-e', script], { timeout: 10_000 });
      expect(stdout).toBe('host\n');
    } finally {
      server.close();
    }
    // The other way: a listener in node 1 (its agent would serve health there), reached from the host.
    const listener = `require('net').createServer((s) => s.end()).listen(9999, '10.250.${subnet}.11'); setTimeout(() => process.exit(0), 3000);`;
    const child = spawn('ip', ['netns', 'exec', node1!.nodeNetns, process.execPath, '-e', listener]);
    try {
      let reached = false;
      for (let attempt = 0; attempt < 20 && !reached; attempt++) {
        reached = await connects(`10.250.${subnet}.11`, 9999);
        if (!reached) await new Promise((r) => setTimeout(r, 100));
      }
      expect(reached).toBe(true);
    } finally {
      child.kill();
    }
  });

  it('gives every node a default route in both families via the host, as a node has its gateway', () => {
    const [v4, v6] = cluster.underlay.hostIps;
    for (const node of cluster.nodes) {
      // A Service address is routed nowhere else: without these, connect() to it fails with ENETUNREACH.
      expect(runInNetns(node.nodeNetns, 'ip', '-4', 'route', 'show', 'default')).toContain(`default via ${v4} dev eth0`);
      expect(runInNetns(node.nodeNetns, 'ip', '-6', 'route', 'show', 'default')).toContain(`default via ${v6} dev eth0`);
      expect(runInNetns(node.nodeNetns, 'ip', 'route', 'get', '10.96.0.1')).toContain(`via ${v4} dev eth0`);
    }
  });

  it('carries pod traffic between nodes only once the nodes have routes to each other’s pod CIDRs', async () => {
    const [node1, node2] = cluster.nodes;
    const a = node1!.pod('x/a');
    const b = node2!.pod('x/b');
    expect(await node1!.probe('x/a', b.ipv4!, 80)).toBe(false);
    runInNetns(node1!.nodeNetns, 'ip', 'route', 'add', '10.244.1.0/24', 'via', `10.250.${subnet}.12`);
    runInNetns(node2!.nodeNetns, 'ip', 'route', 'add', '10.244.0.0/24', 'via', `10.250.${subnet}.11`);
    expect(await node1!.probe('x/a', b.ipv4!, 80)).toBe(true);
    expect(await node2!.probe('x/b', a.ipv4!, 80)).toBe(true);
  });

  it('refuses a second underlay on subnets already in use on the host, before making anything', async () => {
    const other = `${runId.slice(0, 4)}zz`;
    await expect(createLabUnderlay({ runId: other, cidrs: [`10.250.${subnet}.0/24`] })).rejects.toThrow(
      `the underlay subnet 10.250.${subnet}.0/24 is already in use on this host (${cluster.underlay.hostInterface}; another lab?)`,
    );
    expect((await listNetns()).filter((name) => name.startsWith(`krt-${other}-`))).toEqual([]);
  });

  it('removes every namespace and host interface it made when stopped', async () => {
    await cluster.stop();
    expect((await listNetns()).filter((name) => name.startsWith(cluster.prefix))).toEqual([]);
    expect(rootNetnsInterfaces().filter((name) => name.startsWith(cluster.prefix))).toEqual([]);
  });
});
