// Issue 30: kube-router's own DaemonSets, each run as an operator would run it with this agent's binary in place of
// kube-router's: the container args verbatim (KUBE_ROUTER_DAEMONSETS), the kubeadm node's files at the manifest's
// mount paths and env (the lab with LAB_AGENT_DEFAULTS=false adds nothing to the args). Each either gives the lab's
// two nodes working pod networking (addresses, same node, across nodes, policy where the firewall runs) or is refused
// at start in one line naming what this build lacks.
import { execFile } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { parseFlags } from '@kube-router/agent';
import { hasTool, KUBE_ROUTER_DAEMONSETS, waitFor } from '@kube-router/testkit';
import { addressInSubnet, ROUTER_ADDRESS_OFFSET } from './external-router.js';
import { LabProcess, podsByName } from './testing/lab-process.js';
import { canConnect, WEB_FROM_CLIENT_POLICY } from './testing/pod-traffic.js';

const run = promisify(execFile);
const isRoot = process.getuid?.() === 0;
/** This kernel's IPVS, in a fresh network namespace as the lab node's: the proxy's kernel readiness follows it. */
const hostHasIpvs = existsSync('/proc/net/ip_vs');

/**
 * The manifests this build refuses, and the flag it names: DSR needs the container runtime's endpoint to reach into
 * pods, and DSR is not built (issue 31). Worked out independently of the agent's code by apps/agent's
 * daemonsets.test.ts; here it is run on a node.
 */
const REFUSED: Readonly<Record<string, string>> = { 'kubeadm-kuberouter-all-features-dsr.yaml': '--runtime-endpoint' };

/** Manifests whose args are the same are one run; the test's name lists them all. */
function distinctArgs(): { name: string; sources: string[]; args: readonly string[] }[] {
  const groups = new Map<string, { sources: string[]; args: readonly string[] }>();
  for (const [source, args] of Object.entries(KUBE_ROUTER_DAEMONSETS)) {
    const key = JSON.stringify(args);
    const group = groups.get(key) ?? { sources: [], args };
    group.sources.push(source.replace(/^daemonset\//, ''));
    groups.set(key, group);
  }
  return [...groups.values()].map((group) => ({ name: group.sources.join(', '), ...group }));
}

describe.skipIf(!isRoot || !hasTool('kubectl'))("kube-router's DaemonSets on the lab's kubeadm nodes (needs root and kubectl)", () => {
  // Each case's lab: stopped as a person stops it (SIGINT, which removes everything it made), killed if it hangs,
  // and whatever it left in its namespaces (its agents run in process groups of their own) removed after it.
  let running: LabProcess | undefined;
  afterEach(async () => {
    await running?.stop();
    running = undefined;
  }, 60_000);

  it.each(distinctArgs())('$name', async ({ sources, args }) => {
    const runId = `tds${randomInt(36 * 36).toString(36).padStart(2, '0')}`;
    // Subnets of its own: `npm start` takes 10.250.0.0/24, the image test 20-99, the other lab tests 100-249.
    const subnet = randomInt(1, 20);
    const underlay = `10.250.${subnet}.0/24`;
    // A peer router named in a manifest is an address of the manifest author's network: the lab's external router
    // stands in for it, with the manifest's --peer-router-asns (the agent would otherwise dial an address that is not
    // this lab's; and with --bgp-graceful-restart, gobgpd defers its routes until every peer has sent End-of-RIB).
    const routerAddress = addressInSubnet(underlay, ROUTER_ADDRESS_OFFSET);
    const given = args.map((arg) => (arg.startsWith('--peer-router-ips=') ? `--peer-router-ips=${routerAddress}` : arg));
    const parsed = parseFlags(given, { NODE_NAME: 'lab-node-1' });
    if (!parsed.ok) throw new Error(parsed.stderr);
    const { features, routing } = parsed.config;

    const lab = (running = new LabProcess({
      runId,
      underlayCidrs: [underlay, `fd00:10:250:${subnet.toString(16)}::/64`],
      flags: given,
      env: { LAB_NODES: '2', LAB_AGENT_DEFAULTS: 'false' },
    }));
    const { stderr, exited } = lab;
    const refusedFlag = sources.map((source) => REFUSED[source]).find((flag) => flag !== undefined);
    if (refusedFlag !== undefined) {
      // Every agent exits 2 at start, and the lab with it, having named the flag on one line.
      expect(await exited).toBe(2);
      expect(stderr.filter((line) => line.includes(refusedFlag)), stderr.join('\n')).not.toEqual([]);
      expect((await run('ip', ['netns', 'list'])).stdout).not.toContain(`krt-${runId}-`);
      return;
    }
    try {
      await waitFor('both nodes’ health URLs', () => lab.healthUrls.length === 2 || !lab.running, 90_000);
      expect(lab.running, stderr.join('\n')).toBe(true);
      const { kubeconfig } = lab;
      const pods = () => lab.pods();

      // Addresses: every pod running with an address from its node's pod CIDR.
      await waitFor('the seeded pods to run', async () => (await pods()).every((pod) => pod.status.phase === 'Running' && pod.status.podIP), 60_000);
      const items = await pods();
      for (const pod of items) {
        expect(pod.status.podIP, pod.metadata.name).toMatch(pod.spec.nodeName === 'lab-node-1' ? /^10\.244\.0\.\d+$/ : /^10\.244\.1\.\d+$/);
      }
      const pod = podsByName(items);
      const netnsOf = (name: string) => pod(name).netns;
      const ipOf = (name: string) => pod(name).ip;

      // With the router and its CNI file, the real CNI plugins attached the pods: host-local leases, kube-bridge ports.
      if (features.router && routing.enableCni) {
        const nodeOne = items.filter((p) => p.spec.nodeName === 'lab-node-1');
        for (const p of nodeOne) expect(existsSync(join(dirname(kubeconfig), 'lab-node-1', 'cni-leases', 'mynet', p.status.podIP!)), p.metadata.name).toBe(true);
        const ports = JSON.parse((await run('ip', ['-n', `krt-${runId}-lab-node-1`, '-j', 'link', 'show', 'master', 'kube-bridge'])).stdout) as unknown[];
        expect(ports).toHaveLength(nodeOne.length);
      }

      // Same node, and across nodes (over the agents' routes, or the lab's where the agents do not route).
      await waitFor('client to reach web on its node', () => canConnect(netnsOf('client'), ipOf('web'), 80), 30_000);
      await waitFor('client on lab-node-1 to reach remote on lab-node-2', () => canConnect(netnsOf('client'), ipOf('remote'), 8080), 60_000);
      await waitFor('remote on lab-node-2 to reach web on lab-node-1', () => canConnect(netnsOf('remote'), ipOf('web'), 80), 30_000);

      // Policy: enforced where the firewall runs, and only there.
      expect(await canConnect(netnsOf('intruder'), ipOf('web'), 80)).toBe(true);
      await lab.kubectlApply(WEB_FROM_CLIENT_POLICY);
      if (features.firewall) {
        await waitFor('the intruder to be cut off', async () => !(await canConnect(netnsOf('intruder'), ipOf('web'), 80)), 30_000);
      } else {
        await new Promise((resolve) => setTimeout(resolve, 3_000));
        expect(await canConnect(netnsOf('intruder'), ipOf('web'), 80), 'no firewall runs: nothing enforces the policy').toBe(true);
      }
      expect(await canConnect(netnsOf('client'), ipOf('web'), 80)).toBe(true);
      expect(await canConnect(netnsOf('remote'), ipOf('web'), 80)).toBe(features.firewall ? false : true);

      // Readiness: every check passes, but for what this machine's kernel lacks (no IPVS for the proxy), named.
      const healthUrl = lab.healthUrls[0]!;
      const expectedFailing = features['service-proxy'] && !hostHasIpvs ? ['proxy/kernel failed: the kernel has no IPVS (ip_vs)'] : [];
      let failing: string[] = [];
      await waitFor(
        `readiness with only ${JSON.stringify(expectedFailing)} failing`,
        async () => {
          const body = await fetch(healthUrl.replace('/healthz', '/readyz?verbose')).then((response) => response.text(), () => '');
          failing = body.split('\n').filter((line) => line.startsWith('[-]')).map((line) => line.slice(3));
          return body.includes('[+]informers ok') && JSON.stringify(failing) === JSON.stringify(expectedFailing);
        },
        60_000,
      ).catch((error: unknown) => {
        throw new Error(`${String(error)}; failing: ${JSON.stringify(failing)}`);
      });
      expect((await fetch(healthUrl)).status).toBe(200);
    } finally {
      if (lab.running) lab.child.kill('SIGINT');
    }
    expect(await exited, stderr.slice(-20).join('\n')).toBe(0);
    expect((await run('ip', ['netns', 'list'])).stdout).not.toContain(`krt-${runId}-`);
  }, 420_000);
});
