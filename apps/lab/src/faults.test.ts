// Issue 35: faults a node meets in production, on one two-node lab as `npm start` runs it (firewall on iptables,
// routing-bgp with route-sync, lballoc), with pod traffic probed every 200 ms throughout: client->web allowed,
// intruder->web refused (WEB_FROM_CLIENT_POLICY), client->remote across the nodes allowed. Every probe whose verdict is
// not what the policies say at that moment counts; outside the window where a change is expected to land there must
// be none. Each case prints its figures on one line (`faults <case>: ...`) for docs/reliability.md.
import { execFile } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasTool, waitFor } from '@kube-router/testkit';
import { processesInNetns } from './node-agent.js';
import { startDelayingProxy } from './testing/delaying-proxy.js';
import { LabProcess, podsByName } from './testing/lab-process.js';
import { HealthWatch, LIVENESS_FAILURE_THRESHOLD, type HealthSample } from './testing/node-health.js';
import { duplicates, nodeDataplane, type NodeDataplane } from './testing/node-state.js';
import { PodProber, WEB_FROM_CLIENT_POLICY } from './testing/pod-traffic.js';
import { TrafficProber } from './testing/traffic-prober.js';

const run = promisify(execFile);
const isRoot = process.getuid?.() === 0;
const NODES = ['lab-node-1', 'lab-node-2'] as const;
/** The entry point the lab runs on every node (LAB_AGENT_CLI's default): the agent's process, not gobgpd. */
const AGENT_CLI = 'apps/agent/src/cli.ts';

const seconds = (ms: number) => (ms / 1000).toFixed(1);

/**
 * iptables rules of the test's own in the host namespace, each with a comment naming the run, so that whatever is
 * left (a failed case, an interrupted run) is found and removed by its comment.
 */
class HostRules {
  constructor(readonly comment: string) {}

  async insert(table: 'filter' | 'nat', chain: string, spec: readonly string[]): Promise<() => Promise<void>> {
    const rule = [chain, '-m', 'comment', '--comment', this.comment, ...spec];
    await run('iptables', ['-w', '-t', table, '-I', ...rule]);
    return async () => {
      await run('iptables', ['-w', '-t', table, '-D', ...rule]).catch(() => undefined);
    };
  }

  /** Removes every rule carrying the comment; resolves with how many it found. */
  async removeAll(): Promise<number> {
    let removed = 0;
    for (const table of ['filter', 'nat']) {
      const saved = (await run('iptables-save', ['-t', table])).stdout;
      for (const line of saved.split('\n').filter((candidate) => candidate.startsWith('-A ') && candidate.includes(`--comment ${this.comment}`))) {
        await run('iptables', ['-w', '-t', table, '-D', ...line.slice(3).split(' ')]).catch(() => undefined);
        removed++;
      }
    }
    return removed;
  }
}

/**
 * The informer series of a node's /metrics: whether each watch is up, the watchdog's restarts in all, and per informer
 * how many of its watches the API server ended with 410 Gone.
 */
async function informerWatches(metricsUrl: string): Promise<{ healthy: boolean; restarts: number; expired: Map<string, number> }> {
  const text = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(2_000) })).text();
  const series = (name: string) => [...text.matchAll(new RegExp(`^${name}\\{resource="([^"]*)"[^}]*\\} (\\S+)$`, 'gm'))].map((match) => [match[1]!, Number(match[2])] as const);
  const healthy = series('kube_router_informer_watch_healthy').map(([, value]) => value);
  return {
    healthy: healthy.length > 0 && healthy.every((value) => value === 1),
    restarts: series('kube_router_informer_restarts_total').reduce((sum, [, value]) => sum + value, 0),
    expired: new Map(series('kube_router_informer_watch_expired_total')),
  };
}

/** The informers whose watches the API server has not ended with 410 Gone since `before`. */
function notExpiredSince(before: Map<string, number>, now: Map<string, number>): string[] {
  return [...now].filter(([resource, count]) => count <= (before.get(resource) ?? 0)).map(([resource]) => resource);
}

describe.skipIf(!isRoot || !hasTool('kubectl'))('faults a node meets in production, with pod traffic probed throughout (needs root and kubectl)', () => {
  const runId = `tflt${randomInt(36 * 36).toString(36).padStart(2, '0')}`;
  // Subnets of its own: `npm start` takes 10.250.0.0/24, the DaemonSets test 1-19, the image test 20-99, lab.test 100-249.
  const subnet = randomInt(250, 255);
  const hostAddress = `10.250.${subnet}.1`;
  const nodeAddresses = [`10.250.${subnet}.11`, `10.250.${subnet}.12`];
  /** The host's end of the underlay (testkit's createLabUnderlay): the agents reach the API server through it. */
  const hostInterface = `krt-${runId}-ul`;
  const nodeNetns = (node: string) => `krt-${runId}-${node}`;
  const hostRules = new HostRules(`kube-router-faults-${runId}`);
  let lab: LabProcess;
  let apiPort = 0;
  let clientProber: PodProber | undefined;
  let intruderProber: PodProber | undefined;
  let traffic: TrafficProber | undefined;
  let health: HealthWatch | undefined;

  const readinessTimelines = (from: number) => NODES.map((node) => `${node} ${health!.readinessTimeline(node, from)}`).join('; ');
  const expectLiveness = (from: number, nodes: readonly string[] = NODES) => {
    for (const node of nodes) {
      const liveness = health!.liveness(node, from);
      expect(liveness.notOk, `${node}: /healthz answered other than 200`).toEqual([]);
      expect(liveness.longestUnansweredRun, `${node}: /healthz unanswered ${LIVENESS_FAILURE_THRESHOLD} times in a row`).toBeLessThan(LIVENESS_FAILURE_THRESHOLD);
    }
  };
  const livenessFigures = (from: number) =>
    NODES.map((node) => {
      const { samples, notOk, unanswered } = health!.liveness(node, from);
      return `${samples - notOk.length - unanswered}/${samples}`;
    }).join(' + ');
  /** Each node's rules, sets and routes without the policy and with it, as the agents first programmed them. */
  const withoutPolicy = new Map<string, NodeDataplane>();
  const withPolicy = new Map<string, NodeDataplane>();
  const snapshot = async (into: Map<string, NodeDataplane>) => {
    for (const node of NODES) into.set(node, await nodeDataplane(nodeNetns(node)));
  };
  /** Nothing applied twice, nothing left over, nothing missing: what the agents programmed before, exactly. */
  const expectDataplane = async (expected: Map<string, NodeDataplane>) => {
    for (const node of NODES) {
      const state = await nodeDataplane(nodeNetns(node));
      expect(duplicates(state), `${node}: applied twice`).toEqual([]);
      expect(state, `${node}: rules, sets and routes`).toEqual(expected.get(node));
    }
  };
  const notReadyNaming = (check: string) => (sample: HealthSample) =>
    sample.readyz !== undefined && sample.readyz !== 200 && sample.failing.some((line) => line.startsWith(check));
  const ready = (sample: HealthSample) => sample.readyz === 200;

  // Its timeout is the sum of its waits and a margin: on a loaded machine the wait that runs out must be the one
  // reported, not the hook's own timeout.
  beforeAll(async () => {
    lab = new LabProcess({
      runId,
      underlayCidrs: [`10.250.${subnet}.0/24`, `fd00:10:250:${subnet.toString(16)}::/64`],
      // Routes kept across an agent's restart: what an operator who restarts agents without cutting pods off enables.
      // A short deferral: nodes that start together each wait for the other's End-of-RIB until it ends (6 min by
      // default), so the lab would have no routes between its nodes for that long.
      flags: ['--bgp-graceful-restart=true', '--bgp-graceful-restart-deferral-time=10s'],
    });
    await waitFor('both nodes ready', () => lab.stdout.filter((line) => / ready after /.test(line)).length === 2 || !lab.running, 240_000);
    expect(lab.running, lab.stderr.slice(-30).join('\n')).toBe(true);
    apiPort = Number(new URL(await lab.kubectl('config', 'view', '-o', 'jsonpath={.clusters[0].cluster.server}')).port);
    expect(apiPort).toBeGreaterThan(0);
    await waitFor('the seeded pods to run', async () => (await lab.pods()).every((pod) => pod.status.phase === 'Running' && pod.status.podIP), 60_000);
    const pod = podsByName(await lab.pods());
    clientProber = new PodProber(pod('client').netns);
    intruderProber = new PodProber(pod('intruder').netns);
    const web = pod('web');
    const remote = pod('remote');
    await waitFor('client to reach web', () => clientProber!.connect(web.ip, 80), 30_000);
    await waitFor('client to reach remote across the nodes', () => clientProber!.connect(remote.ip, 8080), 60_000);
    // Every node's routes to the other's pod CIDRs, both families, before the first snapshot.
    await waitFor(
      'the routes between the nodes, both families',
      async () => (await Promise.all(NODES.map(async (node) => (await nodeDataplane(nodeNetns(node))).routes.length))).every((count) => count === 2),
      60_000,
    );
    await snapshot(withoutPolicy);
    await lab.kubectlApply(WEB_FROM_CLIENT_POLICY);
    await waitFor('the intruder to be cut off', async () => !(await intruderProber!.connect(web.ip, 80)), 30_000);
    // Both families' rules come in one sync; a moment for the other node's.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    await snapshot(withPolicy);

    traffic = new TrafficProber(
      [
        { name: 'client->web', from: clientProber, ip: web.ip, port: 80 },
        { name: 'intruder->web', from: intruderProber, ip: web.ip, port: 80 },
        { name: 'client->remote', from: clientProber, ip: remote.ip, port: 8080 },
      ],
      { 'client->web': 'open', 'intruder->web': 'closed', 'client->remote': 'open' },
    );
    traffic.start();
    health = new HealthWatch(NODES.map((name, index) => ({ name, healthUrl: lab.healthUrls[index]! })));
    health.start();
    expect(lab.healthUrls).toEqual(nodeAddresses.map((address) => `http://${address}:20244/healthz`));
  }, 540_000);

  afterAll(async () => {
    await traffic?.stop();
    await health?.stop();
    await clientProber?.close();
    await intruderProber?.close();
    await hostRules.removeAll();
    await lab?.stop();
  }, 90_000);

  it('keeps enforcing what it had while the API server is unreachable, says so in readiness, and catches up once it is back with a compacted history (410 Gone)', async () => {
    const caseStart = Date.now();
    // A partition: the agents' packets to the API server and the server's to them are dropped on the host's end of the
    // underlay. Both directions: with only the agents' side dropped, the server's events still reach them. kubectl in
    // the host's namespace reaches the server locally.
    const partition = [
      ['filter', 'INPUT', ['-i', hostInterface, '-p', 'tcp', '--dport', String(apiPort), '-j', 'DROP']],
      ['filter', 'OUTPUT', ['-o', hostInterface, '-p', 'tcp', '--sport', String(apiPort), '-j', 'DROP']],
    ] as const;
    const heal: (() => Promise<void>)[] = [];
    const cut = Date.now();
    let notReadyAt: number[];
    let expiredBefore: Map<string, number>[] = [];
    try {
      for (const [table, chain, spec] of partition) heal.push(await hostRules.insert(table, chain, spec));
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      // Made while the agents cannot hear of it: their kernels keep the policy until they can.
      await lab.kubectl('delete', 'networkpolicy', '-n', 'demo', 'web-from-client');
      // And the server comes back with a new history (etcd compacted past every agent's resourceVersion, or restored
      // from a backup): every watch that resumes gets 410 Gone, and the deletion reaches the agents only by a relist.
      expiredBefore = await Promise.all(lab.metricsUrls.map(async (url) => (await informerWatches(url)).expired));
      process.kill(lab.child.pid!, 'SIGUSR2');
      await waitFor('the lab to compact the history', () => [...lab.stderr, ...lab.stdout].some((line) => line.includes('the API server compacted its history')), 10_000);
      // At least 60 s, and until each node's readiness reports its informers' watches down (after their grace).
      notReadyAt = await Promise.all(
        NODES.map((node) => health!.waitFor('/readyz naming the informers', node, notReadyNaming('informers'), cut, 180_000)),
      );
      const elapsed = Date.now() - cut;
      if (elapsed < 60_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - elapsed));
    } finally {
      for (const remove of heal) await remove();
    }
    const restored = Date.now();
    const outageProbes = traffic!.between(cut, restored);
    expect(traffic!.wrongSince(caseStart), 'a verdict changed while the API server was unreachable').toEqual([]);
    expect(outageProbes.length).toBeGreaterThan(0);
    const failing = health!.samples.find(notReadyNaming('informers'))!.failing.find((line) => line.startsWith('informers'))!;
    expect(failing).toMatch(/watch down for/);

    // Back: the deletion made during the outage reaches the kernel, and readiness comes back.
    traffic!.expect('intruder->web', 'either');
    const openedAt = await traffic!.waitForVerdict('intruder->web', 'open', restored, 180_000);
    traffic!.expect('intruder->web', 'open');
    const readyAt = await Promise.all(NODES.map((node) => health!.waitFor('/readyz 200', node, ready, restored, 180_000)));
    // Every informer of every node resumed into 410 Gone and relisted; none is left watching an expired history.
    const relisted = await Promise.all(lab.metricsUrls.map(async (url, index) => {
      const { expired } = await informerWatches(url);
      return { informers: expired.size, missing: notExpiredSince(expiredBefore[index]!, expired) };
    }));
    for (const [index, { informers, missing }] of relisted.entries()) {
      expect(informers, `${NODES[index]}: no informer series`).toBeGreaterThan(0);
      expect(missing, `${NODES[index]}: informers that never met 410 Gone after the compaction`).toEqual([]);
    }
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(traffic!.wrongSince(caseStart)).toEqual([]);
    expectLiveness(caseStart);
    await expectDataplane(withoutPolicy);

    console.log(
      `faults api-unreachable: outage ${seconds(restored - cut)} s; /readyz failing after ${notReadyAt.map((at) => seconds(at - cut)).join(' / ')} s` +
        ` (${failing.slice(0, 120)}...); /healthz 200 in ${livenessFigures(caseStart)} polls; probes ${outageProbes.length} during it (${traffic!.cadence(cut, restored)}),` +
        ` wrong ${traffic!.between(caseStart).filter((result) => result.wrong).length}; once back (history compacted: every watch of` +
        ` ${relisted.map(({ informers }) => informers).join(' + ')} informers answered 410 Gone and relisted): the deletion in the kernel after` +
        ` ${seconds(openedAt - restored)} s, ready after ${readyAt.map((at) => seconds(at - restored)).join(' / ')} s; readiness ${readinessTimelines(cut)}`,
    );
  }, 420_000);

  it('applies a change through an API server that answers every request 2 s late, and stays live', async () => {
    const caseStart = Date.now();
    const proxy = await startDelayingProxy({ host: hostAddress, target: { host: hostAddress, port: apiPort }, delayMs: 2_000 });
    let removeRedirect: (() => Promise<void>) | undefined;
    let reconnected: number;
    let applied: number;
    let cutAt: number;
    try {
      // New connections from the nodes go through the proxy (TLS passes through it untouched) ...
      removeRedirect = await hostRules.insert('nat', 'PREROUTING', [
        '-i', hostInterface, '-p', 'tcp', '--dport', String(apiPort), '-j', 'REDIRECT', '--to-ports', String(proxy.port),
      ]);
      // ... and the established ones are reset, as when the load balancer in front of the API server fails over.
      const before = await Promise.all(lab.metricsUrls.map((url) => informerWatches(url)));
      for (const node of NODES) await run('ip', ['netns', 'exec', nodeNetns(node), 'ss', '-K', '-tn', 'dst', hostAddress, 'dport', '=', `:${apiPort}`]);
      reconnected = await waitFor(
        'every node’s informers to watch again, through the slow server',
        async () => {
          const now = await Promise.all(lab.metricsUrls.map((url) => informerWatches(url)));
          return now.every((watches, index) => watches.healthy && watches.restarts > before[index]!.restarts) && nodeAddresses.every((address) => proxy.connectionsFrom.has(address));
        },
        { timeoutMs: 120_000, intervalMs: 500 },
      );

      applied = Date.now();
      traffic!.expect('intruder->web', 'either');
      await lab.kubectlApply(WEB_FROM_CLIENT_POLICY);
      cutAt = await traffic!.waitForVerdict('intruder->web', 'closed', applied, 120_000);
      traffic!.expect('intruder->web', 'closed');
      // A while longer on the slow server: nothing flaps.
      await new Promise((resolve) => setTimeout(resolve, 5_000));
    } finally {
      await removeRedirect?.();
      await proxy.close();
    }
    expect(traffic!.wrongSince(caseStart), 'a wrong verdict outside the window where the policy lands').toEqual([]);
    expectLiveness(caseStart);
    await expectDataplane(withPolicy);
    const window = traffic!.between(applied, cutAt).filter((result) => result.flow === 'intruder->web');
    console.log(
      `faults api-slow: 2 s each way; informers watching through it after ${seconds(reconnected)} s; the policy in the kernel` +
        ` ${seconds(cutAt - applied)} s after kubectl apply (${window.length} intruder probes open in that window, expected);` +
        ` /healthz 200 in ${livenessFigures(caseStart)} polls; probes ${traffic!.between(caseStart).length} (${traffic!.cadence(caseStart)}), wrong` +
        ` ${traffic!.between(caseStart).filter((result) => result.wrong).length}; readiness ${readinessTimelines(caseStart)}`,
    );

    // The proxy's connections are gone: the agents watch the server directly again before the next case.
    await waitFor(
      'every node’s informers to watch the server directly again, and readiness',
      async () =>
        (await Promise.all(lab.metricsUrls.map((url) => informerWatches(url)))).every((watches) => watches.healthy) &&
        NODES.every((node) => health!.samples.findLast((sample) => sample.node === node)?.readyz === 200),
      { timeoutMs: 120_000, intervalMs: 500 },
    );
  }, 300_000);

  it('restarts an agent SIGKILLed mid-sync as a kubelet would; the restarted agent adopts what is there: nothing opens, nothing is applied twice', async () => {
    const caseStart = Date.now();
    const netns = nodeNetns('lab-node-1');
    const before = await processesInNetns(netns);
    const agents = before.filter((process) => process.command.includes(AGENT_CLI));
    expect(agents, JSON.stringify(before)).toHaveLength(1);
    const gobgpdBefore = before.filter((process) => /(^|\/)gobgpd\s/.test(process.command));
    expect(gobgpdBefore).toHaveLength(1);

    // A change, so that the agent is syncing when it dies.
    await lab.kubectl('label', 'namespace', 'other', `faults-tick=${Date.now()}`, '--overwrite');
    process.kill(agents[0]!.pid, 'SIGKILL');
    const killed = Date.now();
    await waitFor(
      'the lab to say it starts the agent again',
      () => lab.stderr.some((line) => line.includes('lab-node-1 was killed by SIGKILL: starting it again in 10 s')),
      10_000,
    );
    let restarted = 0;
    await waitFor(
      'a new agent process on lab-node-1',
      async () => {
        const found = (await processesInNetns(netns)).some((process) => process.command.includes(AGENT_CLI) && process.pid !== agents[0]!.pid);
        if (found) restarted ||= Date.now();
        return found;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    const readyAt = await health!.waitFor('/readyz 200 from the restarted agent', 'lab-node-1', ready, restarted, 180_000);
    // Routes and rules after the restarted agent's first syncs, with traffic still probed.
    await new Promise((resolve) => setTimeout(resolve, 5_000));

    expect(traffic!.wrongSince(caseStart), 'a wrong verdict while the agent died and came back').toEqual([]);
    expectLiveness(caseStart, ['lab-node-2']);
    const after = await processesInNetns(netns);
    expect(after.filter((process) => before.some((old) => old.pid === process.pid)), 'a process of the killed agent’s run is left').toEqual([]);
    expect(after.filter((process) => process.command.includes(AGENT_CLI)), JSON.stringify(after)).toHaveLength(1);
    expect(after.filter((process) => /(^|\/)gobgpd\s/.test(process.command)), JSON.stringify(after)).toHaveLength(1);
    await expectDataplane(withPolicy);

    const probes = traffic!.between(caseStart);
    console.log(
      `faults agent-killed: restarted ${seconds(restarted - killed)} s after SIGKILL (the lab's kubelet back-off: 10 s), ready` +
        ` ${seconds(readyAt - restarted)} s after its start (${seconds(readyAt - killed)} s after the kill); probes ${probes.length} (${traffic!.cadence(caseStart)})` +
        ` (${probes.filter((result) => result.flow === 'client->remote').length} across the nodes), wrong` +
        ` ${probes.filter((result) => result.wrong).length}; gobgpd ${gobgpdBefore[0]!.pid} replaced; readiness ${readinessTimelines(killed)}`,
    );
  }, 300_000);

  it('stops cleanly and leaves no namespace, process or rule behind', async () => {
    await traffic!.stop();
    await health!.stop();
    await clientProber!.close();
    await intruderProber!.close();
    expect(traffic!.errors, 'probes without a verdict').toEqual([]);
    expect(await hostRules.removeAll(), 'a rule of the test left').toBe(0);
    expect(await lab.stop(), lab.stderr.slice(-20).join('\n')).toBe(0);
    expect((await run('ip', ['netns', 'list'])).stdout).not.toContain(`krt-${runId}-`);
  }, 90_000);
});
