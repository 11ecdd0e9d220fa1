import { execFile } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Controller } from '@kube-router/controller';
import { hasTool } from '@kube-router/netfilter';
import { createLabUnderlay, startApiServer, startLabCluster, waitFor, type ApiServer, type LabCluster, type LabPod, type LabUnderlay } from '@kube-router/testkit';
import { createAgent } from './agent.js';
import { firewallPlugins } from './catalog.js';
import { connectToCluster, type ClusterConnection } from './cluster.js';
import { parseFlags } from './parse-flags.js';

const run = promisify(execFile);
const agentDir = fileURLToPath(new URL('..', import.meta.url));
const missing =
  process.getuid?.() !== 0 ? 'needs root' : ['ip', 'iptables-save', 'ip6tables-save', 'ipset', 'nft'].find((tool) => !hasTool(tool));

/**
 * The node's whole netfilter state as the kernel prints it. Only what changes by itself is masked: the "Generated
 * on <date>" comment lines and packet counters (the API server's traffic passes the node's chains meanwhile).
 */
async function nodeKernel(netns: string): Promise<string> {
  const saved: string[] = [];
  for (const [command, ...args] of [['iptables-save'], ['ip6tables-save'], ['ipset', 'save'], ['nft', 'list', 'ruleset']] as const) {
    const { stdout } = await run('ip', ['netns', 'exec', netns, command, ...args], { maxBuffer: 64 << 20 });
    saved.push(`### ${command}`, stdout.replace(/^#.*\n/gm, '').replace(/ \[\d+:\d+\]$/gm, '').replace(/counter packets \d+ bytes \d+/g, 'counter'));
  }
  return saved.join('\n');
}

/** `kube-router diff` as an operator runs it on the node: the CLI, in the node's network namespace. */
async function kubeRouterDiff(netns: string, flags: readonly string[]): Promise<{ code: number; stdout: string; stderr: string; ms: number }> {
  const started = performance.now();
  const argv = ['netns', 'exec', netns, process.execPath, '--conditions=@kube-router/source', '--import', 'tsx', 'src/cli.ts', 'diff', ...flags];
  try {
    const { stdout, stderr } = await run('ip', argv, { cwd: agentDir, timeout: 90_000, maxBuffer: 64 << 20 });
    return { code: 0, stdout, stderr, ms: performance.now() - started };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    if (typeof failed.code !== 'number') throw error;
    return { code: failed.code, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '', ms: performance.now() - started };
  }
}

describe.skipIf(missing !== undefined).each(['iptables', 'nftables'] as const)(`kube-router diff (%s)${missing ? ` (skipped: ${missing})` : ''}`, (backend) => {
  const runId = `df${randomBytes(2).toString('hex')}`;
  let underlay: LabUnderlay;
  let server: ApiServer;
  let lab: LabCluster;
  let cluster: ClusterConnection;
  let firewall: Controller;
  let flags: string[];
  let netns: string;
  let otherClient: LabPod;
  const aborter = new AbortController();

  const allowFrom = (peers: unknown[]) =>
    server.upsert({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { namespace: 'web', name: 'server-ingress' },
      spec: { podSelector: { matchLabels: { app: 'server' } }, ingress: [{ from: peers }] },
    } as never);

  beforeAll(async () => {
    const subnet = randomInt(100, 200);
    underlay = await createLabUnderlay({ runId, cidrs: [`10.250.${subnet}.0/24`, `fd00:10:250:${subnet.toString(16)}::/64`] });
    // On the underlay: the node's own network namespace reaches it there, as a node reaches kube-apiserver.
    server = await startApiServer({ host: underlay.hostIps[0]! });
    lab = await startLabCluster({ apiServer: server, underlay, runId, nodes: [{ name: 'diff-node', podCidrs: ['10.244.0.0/24'] }] });
    const node = lab.nodes[0]!;
    netns = node.nodeNetns;
    [, , otherClient] = await Promise.all([
      node.addPod({ namespace: 'web', name: 'server', labels: { app: 'server' }, ports: [{ port: 80 }] }),
      node.addPod({ namespace: 'web', name: 'client', labels: { app: 'client' }, ports: [{ port: 80 }] }),
      node.addPod({ namespace: 'other', name: 'client', labels: { app: 'client' }, ports: [{ port: 80 }] }),
    ]);
    allowFrom([{ podSelector: {} }]);

    const kubeconfig = await server.writeKubeconfig();
    flags = [
      '--kubeconfig', kubeconfig, '--hostname-override', node.nodeName, '--run-router=false', '--run-service-proxy=false',
      ...(backend === 'nftables' ? ['--use-nftables-for-netpol'] : []),
    ];
    // The agent, with the same flags, programs the node once: the node "has just synced".
    const parsed = parseFlags(flags, {});
    if (!parsed.ok) throw new Error(parsed.stderr);
    const logger = pino({ level: 'silent' });
    cluster = connectToCluster({ nodeName: node.nodeName, kubeconfig, logger });
    const agent = await createAgent({ ...cluster, plugins: firewallPlugins(parsed.config, netns), options: { nodeName: node.nodeName, health: false, metrics: false } });
    firewall = agent.controllers[0]!;
    await firewall.start({ requestSync: () => undefined, signal: aborter.signal });
    await cluster.beforeFirstSync();
    expect(await firewall.runObservedSync('initial')).toMatchObject({ ok: true });
  }, 180_000);

  afterAll(async () => {
    aborter.abort();
    await firewall?.stop();
    await cluster?.close();
    await lab?.stop();
    await underlay?.remove();
    await server?.close();
  }, 120_000);

  it('prints nothing and exits 0 on a node that has just synced, prints the change and exits 1 after a policy change, and leaves the kernel as it was', async () => {
    const synced = await nodeKernel(netns);
    const same = await kubeRouterDiff(netns, flags);
    expect(same.stderr.split('\n')[0]).toBe(`kube-router diff: firewall (netpol-${backend}) previewed; BGP paths are not previewed`);
    expect({ code: same.code, stdout: same.stdout }).toEqual({ code: 0, stdout: '' });
    expect(await nodeKernel(netns)).toBe(synced);

    // other/client may now reach web/server too: its address joins what the policy allows.
    allowFrom([{ podSelector: {} }, { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'other' } } }]);
    const changed = await kubeRouterDiff(netns, flags);
    expect(changed.code, changed.stderr).toBe(1);
    expect(changed.stdout).toMatch(/^[+~] (chain|set|map) \S+ \((iptables ipv4 filter|ipset|nft ip kube-router-filter-ipv4)\)$/m);
    expect(changed.stdout).toContain(otherClient.ips[0]);
    // Nothing of it reached the node.
    expect(await nodeKernel(netns)).toBe(synced);
    console.log(`diff (${backend}): no change ${Math.round(same.ms)} ms; a change ${Math.round(changed.ms)} ms (exit ${changed.code}):\n${changed.stderr}${changed.stdout}`);

    // The agent applies the change: the diff had it right, so there is nothing left to preview.
    await waitFor('the agent to see the change', () =>
      cluster.kube.informers.networkPolicies().list().some((policy) => JSON.stringify(policy.spec).includes('kubernetes.io/metadata.name')),
    );
    expect(await firewall.runObservedSync('initial')).toMatchObject({ ok: true });
    expect(await nodeKernel(netns)).not.toBe(synced);
    const applied = await kubeRouterDiff(netns, flags);
    expect({ code: applied.code, stdout: applied.stdout }).toEqual({ code: 0, stdout: '' });
  }, 240_000);
});
