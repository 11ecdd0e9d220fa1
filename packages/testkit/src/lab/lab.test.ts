import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer } from '../index.js';
import type { ApiServer, KubeObject } from '../index.js';
import { startLab } from './lab.js';
import type { Lab } from './lab.js';
import { listNetns } from './netns.js';
import { NETNS_ANNOTATION } from './pod-objects.js';
import { runCommand } from './run-command.js';
import type { ProbeRequest, ProbeResult } from './probe-types.js';
import { hasTool, interfacesInNetns, labSkipReason, processesMentioning, runInNetns } from './testing/preconditions.js';
import { waitFor } from '../wait.js';

const skipReason = labSkipReason('iptables', 'ip6tables');
const describeLab = describe.skipIf(skipReason !== undefined);
const suffix = skipReason ? ` (skipped: ${skipReason})` : '';

const webPorts = [
  { port: 80, protocol: 'TCP' as const, name: 'http' },
  { port: 53, protocol: 'UDP' as const, name: 'dns' },
];

describeLab(`lab: pods from the API server as network namespaces${suffix}`, () => {
  let api: ApiServer;
  let lab: Lab;

  beforeAll(async () => {
    api = await startApiServer({ port: 0 });
    lab = await startLab({ apiServer: api, podCidrs: ['10.244.0.0/24', 'fd00:10:244::/64'] });
    await Promise.all(['a', 'b'].map((name) => lab.addPod({ namespace: 'x', name, labels: { pod: name }, ports: webPorts })));
  });

  afterAll(async () => {
    await lab?.stop();
    await api?.close();
  });

  const podObject = (namespace: string, name: string): KubeObject | undefined => api.get('v1', 'Pod', namespace, name);

  it('registers the Node with its pod CIDRs, addresses and netns', () => {
    const node = api.get('v1', 'Node', undefined, 'lab-node') as KubeObject & {
      spec: { podCIDR: string; podCIDRs: string[] };
      status: { addresses: { type: string; address: string }[]; conditions: { type: string; status: string }[] };
    };
    expect(node.spec).toMatchObject({ podCIDR: '10.244.0.0/24', podCIDRs: ['10.244.0.0/24', 'fd00:10:244::/64'] });
    expect(node.status.addresses).toEqual([
      { type: 'InternalIP', address: '10.244.0.1' },
      { type: 'InternalIP', address: 'fd00:10:244::1' },
      { type: 'Hostname', address: 'lab-node' },
    ]);
    expect(node.status.conditions).toContainEqual(expect.objectContaining({ type: 'Ready', status: 'True' }));
    expect(node.metadata.annotations?.[NETNS_ANNOTATION]).toBe(lab.nodeNetns);
  });

  it('gives a pod created through the API a netns, its addresses, the netns annotation and phase Running', async () => {
    const pod = lab.pod('x/a');
    const stored = podObject('x', 'a') as KubeObject & { status: { phase: string; podIP: string; podIPs: { ip: string }[]; hostIP: string } };
    expect(stored.metadata.annotations?.[NETNS_ANNOTATION]).toBe(pod.netns);
    expect(stored.status).toMatchObject({ phase: 'Running', podIP: pod.ips[0], podIPs: pod.ips.map((ip) => ({ ip })), hostIP: '10.244.0.1' });
    expect(pod.ipv4).toMatch(/^10\.244\.0\.\d+$/);
    expect(pod.ipv6).toMatch(/^fd00:10:244::[0-9a-f]+$/);
    expect(pod.netns.startsWith(lab.prefix)).toBe(true);
    expect(await listNetns()).toContain(pod.netns);
    const addresses = runInNetns(pod.netns, 'ip', '-o', 'addr', 'show', 'dev', 'eth0');
    expect(addresses).toContain(`${pod.ipv4}/32`);
    expect(addresses).toContain(`${pod.ipv6}/128`);
    expect(processesMentioning(pod.netns)).toEqual([pod.pid]);
  });

  it('carries TCP and UDP between pods over IPv4 and IPv6', async () => {
    for (const family of [4, 6] as const) {
      expect(await lab.probe('x/a', 'x/b', 80, 'TCP', { family })).toBe(true);
      expect(await lab.probe('x/a', 'x/b', 53, 'UDP', { family })).toBe(true);
      expect(await lab.probe('x/b', lab.pod('x/a').ips[family === 4 ? 0 : 1] as string, 80, 'TCP')).toBe(true);
    }
    // A port the pod does not declare is not served.
    expect(await lab.probe('x/a', 'x/b', 81, 'TCP')).toBe(false);
    expect(await lab.probe('x/a', 'x/b', 80, 'UDP')).toBe(false);
  });

  it('refuses SCTP probes with the reason', async () => {
    await expect(lab.probe('x/a', 'x/b', 80, 'SCTP')).rejects.toThrow(/SCTP/);
  });

  it('blocks pod-to-pod traffic with a DROP in the node netns FORWARD chain, and carries it again once removed', async () => {
    const probes: ProbeRequest[] = [4, 6].flatMap((family) => [
      { from: 'x/a', to: 'x/b', port: 80, protocol: 'TCP' as const, family: family as 4 | 6 },
      { from: 'x/a', to: 'x/b', port: 53, protocol: 'UDP' as const, family: family as 4 | 6 },
    ]);
    expect((await lab.probeMany(probes)).map((result) => result.ok)).toEqual([true, true, true, true]);
    for (const tool of ['iptables', 'ip6tables']) runInNetns(lab.nodeNetns, tool, '-I', 'FORWARD', '-j', 'DROP');
    try {
      const blocked = await lab.probeMany(probes);
      expect(blocked.map((result) => result.error)).toEqual(['timeout', 'timeout', 'timeout', 'timeout']);
    } finally {
      for (const tool of ['iptables', 'ip6tables']) runInNetns(lab.nodeNetns, tool, '-D', 'FORWARD', '-j', 'DROP');
    }
    expect((await lab.probeMany(probes)).map((result) => result.reply)).toEqual(['x/b', 'x/b', 'x/b', 'x/b']);
  });

  it('runs a pod that someone else creates through the API (kubelet mode) and removes it when deleted', async () => {
    const external = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'external', namespace: 'default', labels: { app: 'external' } },
      spec: {
        nodeName: 'lab-node',
        containers: [{ name: 'c', image: 'any', ports: [{ containerPort: 8080 }, { containerPort: 8053, protocol: 'UDP' }] }],
      },
    };
    api.create(external);
    const pod = await lab.waitForPod('external');
    expect(pod.ports).toEqual([
      { port: 8080, protocol: 'TCP' },
      { port: 8053, protocol: 'UDP' },
    ]);
    expect(podObject('default', 'external')?.metadata.annotations?.[NETNS_ANNOTATION]).toBe(pod.netns);
    expect(await lab.probe('x/a', 'external', 8080, 'TCP', { family: 6 })).toBe(true);
    expect(await lab.probe('x/a', 'external', 8053, 'UDP')).toBe(true);

    const hostInterfaces = interfacesInNetns(lab.nodeNetns);
    api.delete('v1', 'Pod', 'default', 'external');
    await waitFor('the deleted pod to stop', () => !lab.pods().some((running) => running.name === 'external'));
    expect(await listNetns()).not.toContain(pod.netns);
    expect(processesMentioning(pod.netns)).toEqual([]);
    expect(interfacesInNetns(lab.nodeNetns).length).toBe(hostInterfaces.length - 1);
    await expect(lab.probe('x/a', pod.ipv4 as string, 8080, 'TCP')).resolves.toBe(false);
  });

  it.skipIf(!hasTool('kubectl'))('runs and removes a pod that kubectl creates and deletes', async () => {
    const kubeconfig = await api.writeKubeconfig();
    // Asynchronously: the API server answers kubectl from this very process.
    const kubectl = (input: string | undefined, ...args: string[]): Promise<string> =>
      runCommand('kubectl', ['--kubeconfig', kubeconfig, ...args], { ...(input ? { input } : {}), timeoutMs: 20_000 });
    const manifest = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'from-kubectl', namespace: 'x' },
      spec: { nodeName: 'lab-node', containers: [{ name: 'web', image: 'any', ports: [{ containerPort: 8080 }] }] },
    };
    await kubectl(JSON.stringify(manifest), 'apply', '-f', '-');
    const pod = await lab.waitForPod('x/from-kubectl');
    const shown = await kubectl(undefined, 'get', 'pod', '-n', 'x', 'from-kubectl', '-o',
      'jsonpath={.status.phase} {.status.podIPs[*].ip} {.metadata.annotations.lab\\.kube-router\\.io/netns}');
    expect(shown).toBe(`Running ${pod.ips.join(' ')} ${pod.netns}`);
    expect(await lab.probe('x/a', 'x/from-kubectl', 8080, 'TCP')).toBe(true);
    await kubectl(undefined, 'delete', 'pod', '-n', 'x', 'from-kubectl');
    await waitFor('the pod netns to go', async () => !(await listNetns()).includes(pod.netns));
    expect(processesMentioning(pod.netns)).toEqual([]);
  });

  it('runs a host-network pod in the node netns, on the node addresses', async () => {
    const hostPod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'host-agent', namespace: 'kube-system' },
      spec: { nodeName: 'lab-node', hostNetwork: true, containers: [{ name: 'c', image: 'any', ports: [{ containerPort: 9100 }] }] },
    };
    api.create(hostPod);
    const pod = await lab.waitForPod('kube-system/host-agent');
    expect(pod).toMatchObject({ netns: lab.nodeNetns, ips: [...lab.nodeIps] });
    expect((podObject('kube-system', 'host-agent')?.status as { podIP?: string }).podIP).toBe('10.244.0.1');
    // Pod to node: it does not cross FORWARD, it ends in the node netns itself.
    expect(await lab.probe('x/a', 'kube-system/host-agent', 9100, 'TCP', { family: 6 })).toBe(true);
    expect(await lab.probe('kube-system/host-agent', 'x/b', 80, 'TCP')).toBe(true);
    await lab.deletePod('kube-system/host-agent');
    expect(processesMentioning('kube-system/host-agent')).toEqual([]);
    expect(await listNetns()).toContain(lab.nodeNetns);
  });

  it('ignores pods bound to other nodes', async () => {
    const elsewhere = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'elsewhere', namespace: 'default' },
      spec: { nodeName: 'other-node', containers: [{ name: 'c', image: 'any' }] },
    };
    api.create(elsewhere);
    await expect(lab.waitForPod('elsewhere', 500)).rejects.toThrow(/did not come to run/);
    expect((podObject('default', 'elsewhere')?.status as { phase?: string }).phase).toBe('Pending');
  });

  it('deletePod() removes the pod object, its netns and its agent', async () => {
    const pod = await lab.addPod({ namespace: 'x', name: 'short-lived', ports: [{ port: 80 }] });
    await lab.deletePod('x/short-lived');
    expect(podObject('x', 'short-lived')).toBeUndefined();
    expect(await listNetns()).not.toContain(pod.netns);
    expect(processesMentioning(pod.netns)).toEqual([]);
  });

  it('probes a matrix of 9 pods x 2 ports x TCP and UDP in a few seconds, and a blocked one within about one timeout', async () => {
    const names = Array.from({ length: 9 }, (_, index) => `m${index}`);
    const started = performance.now();
    await Promise.all(
      names.map((name) =>
        lab.addPod({
          namespace: 'matrix',
          name,
          ports: [80, 81].flatMap((port) => [
            { port, protocol: 'TCP' as const },
            { port, protocol: 'UDP' as const },
          ]),
        }),
      ),
    );
    const podsStartedMs = performance.now() - started;
    const matrix: ProbeRequest[] = names.flatMap((from) =>
      names.flatMap((to) =>
        [80, 81].flatMap((port) => (['TCP', 'UDP'] as const).map((protocol) => ({ from: `matrix/${from}`, to: `matrix/${to}`, port, protocol }))),
      ),
    );
    let probeStarted = performance.now();
    const open = await lab.probeMany(matrix);
    const openMs = performance.now() - probeStarted;
    expect(open.filter((result) => !result.ok).map(describeProbe)).toEqual([]);
    expect(open.every((result) => result.reply === podKeyOf(result.request.to))).toBe(true);

    // Block new connections to m0's ports; its own probes and their answers still pass.
    const m0 = lab.pod('matrix/m0').ipv4 as string;
    const rules = ['tcp', 'udp'].map((protocol) => ['FORWARD', '-d', m0, '-p', protocol, '--dport', '80:81', '-j', 'DROP']);
    for (const rule of rules) runInNetns(lab.nodeNetns, 'iptables', '-I', ...rule);
    probeStarted = performance.now();
    let blocked;
    try {
      blocked = await lab.probeMany(matrix);
    } finally {
      for (const rule of rules) runInNetns(lab.nodeNetns, 'iptables', '-D', ...rule);
    }
    const blockedMs = performance.now() - probeStarted;
    const failed = blocked.filter((result) => !result.ok).map((result) => `${String(result.request.from)}->${String(result.request.to)}`);
    expect(new Set(failed)).toEqual(new Set(names.slice(1).map((from) => `matrix/${from}->matrix/m0`)));
    expect(failed.length).toBe(8 * 4);
    console.log(
      `lab timings: 9 pods started in ${Math.round(podsStartedMs)} ms; ${matrix.length} probes in ${Math.round(openMs)} ms all open, ` +
        `${Math.round(blockedMs)} ms with ${failed.length} dropped (timeout 500 ms)`,
    );
    expect(openMs).toBeLessThan(3_000);
    expect(blockedMs).toBeLessThan(3_000);
  });
});

function describeProbe(result: ProbeResult): string {
  const { from, to, port, protocol } = result.request;
  return `${String(from)} -> ${String(to)} ${protocol}/${port} (${result.target}): ${result.error ?? 'ok'} after ${result.ms} ms`;
}

function podKeyOf(ref: unknown): string {
  return typeof ref === 'string' ? ref : '';
}

describeLab(`lab: start and stop${suffix}`, () => {
  let api: ApiServer;

  beforeAll(async () => {
    api = await startApiServer({ port: 0 });
  });

  afterAll(async () => {
    await api?.close();
  });

  it('stop() leaves no namespace, interface or process of the run behind', async () => {
    const lab = await startLab({ apiServer: api.url, nodeName: 'stop-node', podCidrs: ['10.245.0.0/24', 'fd00:10:245::/64'] });
    try {
      await lab.addPod({ name: 'one', ports: [{ port: 80 }] });
      await lab.addPod({ name: 'two', ports: [{ port: 80, protocol: 'UDP' }] });
      expect((await listNetns()).filter((netns) => netns.startsWith(lab.prefix))).toHaveLength(3);
      expect(processesMentioning(lab.prefix)).toHaveLength(2);
    } finally {
      await lab.stop();
    }
    expect((await listNetns()).filter((netns) => netns.startsWith(lab.prefix))).toEqual([]);
    expect(processesMentioning(lab.prefix)).toEqual([]);
    // The pod objects stay in the API: stop() tears down the node, not the cluster's state.
    expect(api.get('v1', 'Pod', 'default', 'one')).toBeDefined();
    await expect(lab.stop()).resolves.toBeUndefined();
  });

  it('cleans up a pod whose sandbox cannot be made, and reports why', async () => {
    // A /30 holds two host addresses: the node takes the first, the first pod the second.
    const lab = await startLab({ apiServer: api, nodeName: 'tiny-node', podCidrs: ['10.246.0.0/30'] });
    try {
      await lab.addPod({ name: 'fits', ports: [] });
      await expect(lab.addPod({ name: 'does-not-fit', ports: [] })).rejects.toThrow(/no free address/);
      expect((await listNetns()).filter((netns) => netns.startsWith(lab.prefix))).toHaveLength(2);
      expect(lab.pods().map((pod) => pod.name)).toEqual(['fits']);
    } finally {
      await lab.stop();
    }
  });

  it('refuses a run id that would not fit interface names', async () => {
    await expect(startLab({ apiServer: api, runId: 'much-too-long' })).rejects.toThrow(/runId/);
  });
});
