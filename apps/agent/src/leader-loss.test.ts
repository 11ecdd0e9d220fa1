// Issue 35, leader loss, black-box: two agent processes (the reference CLI, the load balancer allocator alone) against
// the embedded API server. The leader is SIGKILLed with an allocation write in flight; the other takes the Lease and
// serves; the dead leader's write then reaches the API server late and is refused (the new leader's fence). A sampler
// reads the server's store every 20 ms for the whole run: no address on two Services, no address moved. The killed
// agent comes back as a follower; then the leader stops cleanly and the Lease it releases is taken within a retry.
//
// The agent's Lease timings are not flags (kube-router hard-codes them too): 15 s lease, 10 s renew deadline, 2 s
// retry, each candidate's retry jittered up to 1.2 times more (so 2 to 4.4 s).
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_LEASE_DURATION_MS, DEFAULT_RETRY_PERIOD_MS } from '@kube-router/kube';
import { LBALLOC_LEASE, REQUESTED_IPS_ANNOTATION } from '@kube-router/lballoc';
import { kubeconfigYaml, startApiServer, type ApiServer } from '@kube-router/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { startHoldingRelay, type HeldRequest, type HoldingRelay, type RelayedRequest } from './testing/holding-relay.js';
import { killSpawnedClis, parseLogs, spawnCli, type SpawnedCli } from './testing/spawn-cli.js';
import { alive, freePort, get, sleep, waitFor } from './testing/support.js';

const ONLY_LOADBALANCER = ['--run-firewall=false', '--run-service-proxy=false', '--run-router=false', '--run-loadbalancer'];
const NAMESPACE = 'kube-system';
const RANGE = '10.77.0.0/23';
const inRange = (ip: string) => /^10\.77\.[01]\.\d{1,3}$/.test(ip);
/** The longest wait of a candidate between two looks at the Lease: the retry period plus client-go's 1.2 jitter. */
const MAX_RETRY_WAIT_MS = DEFAULT_RETRY_PERIOD_MS * 2.2;
/** What a loaded 2-core machine may add to a bound: timers firing late, a slow API round trip. */
const SLACK_MS = 5_000;
const FENCE_CONDITION = 'kube-router.io/LoadBalancerIPAllocator';
const CREATE_EVERY_MS = 200;
const SAMPLE_EVERY_MS = 20;

let server: ApiServer | undefined;
let relays: HoldingRelay[] = [];
let directory = '';
afterEach(async () => {
  killSpawnedClis();
  await Promise.all(relays.map((relay) => relay.close()));
  relays = [];
  await server?.close();
  server = undefined;
  if (directory) await rm(directory, { recursive: true, force: true });
  directory = '';
});

type Identity = 'agent-a' | 'agent-b';
interface AgentProcess {
  identity: Identity;
  cli: SpawnedCli;
  pid: number;
  healthPort: number;
  metricsPort: number;
  startedAt: number;
}

interface ServiceStatus {
  metadata?: { name?: string; resourceVersion?: string };
  status?: { loadBalancer?: { ingress?: { ip?: string }[] }; conditions?: { type: string; message?: string }[] };
}
const ingressOf = (service: ServiceStatus | undefined) => (service?.status?.loadBalancer?.ingress ?? []).map((i) => i.ip ?? '');

/** The process and every process below it, from /proc. */
async function processTree(root: number): Promise<number[]> {
  const children = new Map<number, number[]>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (stat) children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
  }
  const tree = [root];
  for (let index = 0; index < tree.length; index++) tree.push(...(children.get(tree[index]!) ?? []));
  return tree;
}

async function isLeaderGauge(agent: AgentProcess): Promise<number> {
  const { body } = await get(`http://127.0.0.1:${agent.metricsPort}/metrics`);
  const line = /^kube_router_leader_election_is_leader\{[^}]*\} (\d+)$/m.exec(body);
  if (!line) throw new Error(`no kube_router_leader_election_is_leader in the metrics of ${agent.identity}`);
  return Number(line[1]);
}

async function ready(agent: AgentProcess): Promise<boolean> {
  return (await get(`http://127.0.0.1:${agent.healthPort}/readyz`).catch(() => ({ status: 0 }))).status === 200;
}

/** Resolves with the promise's value, or fails naming what it waited for. */
function within<T>(what: string, promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

describe('leader loss between two agent processes', () => {
  it(
    'a SIGKILLed leader is replaced within the lease and a retry, its late write is refused, no address is ever held twice or moved; a clean stop hands over within a retry',
    { timeout: 180_000 },
    async () => {
      const tokens: Record<Identity, string> = { 'agent-a': 'token-agent-a', 'agent-b': 'token-agent-b' };
      // Each agent has its own token, so that the server's request log tells whose request each one was.
      server = await startApiServer({
        tokens: ['token-admin', ...Object.entries(tokens).map(([name, token]) => ({ token, user: { name, groups: [] } }))],
        seed: [
          // Older than every Service below and not served yet: after the kill it asks for the address the dead
          // leader's held write claims, so that the write, if it landed, would put that address on two Services.
          { apiVersion: 'v1', kind: 'Service', metadata: { name: 'elder', namespace: 'default' }, spec: { type: 'ClusterIP', ports: [{ port: 80 }] } },
        ],
      });
      const live = server;
      directory = await mkdtemp(join(tmpdir(), 'krt-leader-loss-'));
      // Each agent reaches the server through a relay of its own, which can hold one of its requests in flight.
      const relayOf = new Map<Identity, HoldingRelay>();
      for (const identity of ['agent-a', 'agent-b'] as const) {
        const relay = await startHoldingRelay({ host: '127.0.0.1', port: live.port });
        relays.push(relay);
        relayOf.set(identity, relay);
      }
      const startAgent = async (identity: Identity): Promise<AgentProcess> => {
        const kubeconfig = join(directory, `${identity}.kubeconfig`);
        await writeFile(kubeconfig, kubeconfigYaml(relayOf.get(identity)!.url, 'default', { token: tokens[identity] }));
        const [healthPort, metricsPort] = [await freePort(), await freePort()];
        const cli = spawnCli(
          'src/cli.ts',
          [
            ...ONLY_LOADBALANCER,
            `--kubeconfig=${kubeconfig}`,
            `--loadbalancer-ip-range=${RANGE}`,
            '--health-addr=127.0.0.1',
            `--health-port=${healthPort}`,
            '--metrics-addr=127.0.0.1',
            `--metrics-port=${metricsPort}`,
          ],
          // As a DaemonSet's pod: a restarted container keeps its pod's name, and so its identity in the Lease.
          { POD_NAME: identity, POD_NAMESPACE: NAMESPACE },
        );
        return { identity, cli, pid: cli.child.pid!, healthPort, metricsPort, startedAt: Date.now() };
      };
      const lease = () =>
        live.get('coordination.k8s.io/v1', 'Lease', NAMESPACE, LBALLOC_LEASE)?.spec as { holderIdentity?: string; renewTime?: string } | undefined;
      const writesBy = (user: string, since: number) =>
        live.requests.records
          .slice(since)
          .filter((r) => r.user === user && r.verb !== 'get' && r.verb !== 'list' && r.verb !== 'watch' && r.verb !== 'discovery')
          .map((r) => `${r.verb} ${r.resource}${r.subresource ? `/${r.subresource}` : ''} ${r.name ?? ''}`);

      const a = await startAgent('agent-a');
      const b = await startAgent('agent-b');
      await waitFor('both agents ready', async () => (await ready(a)) && (await ready(b)), 90_000);
      await waitFor('a Lease holder', () => ['agent-a', 'agent-b'].includes(lease()?.holderIdentity ?? ''), 30_000);
      const [leader, follower] = lease()!.holderIdentity === 'agent-a' ? [a, b] : [b, a];
      expect([await isLeaderGauge(leader), await isLeaderGauge(follower)]).toEqual([1, 0]);

      // From here to the end: the sampler, and a new LoadBalancer Service every 200 ms.
      const created = new Map<string, number>();
      /** When each Service was first seen with an address, and what it holds now. */
      const firstAddress = new Map<string, { ip: string; at: number }>();
      const lastAddress = new Map<string, string>();
      /** Each address seen on two Services, with how many samples saw it; each change of a Service's address. */
      const doubles = new Map<string, number>();
      const moves: string[] = [];
      const holders: { holder: string; at: number }[] = [];
      let samples = 0;
      let samplingMs = 0;
      let lastSampleAt = 0;
      let longestGapMs = 0;
      const sample = () => {
        samples++;
        const began = performance.now();
        if (lastSampleAt) longestGapMs = Math.max(longestGapMs, began - lastSampleAt);
        lastSampleAt = began;
        const now = Date.now();
        const holderOf = new Map<string, string>();
        for (const service of live.list('v1', 'Service', 'default') as ServiceStatus[]) {
          const name = service.metadata?.name ?? '';
          const ips = ingressOf(service);
          for (const ip of ips) {
            const other = holderOf.get(ip);
            if (other !== undefined) doubles.set(`${ip} on ${other} and ${name}`, (doubles.get(`${ip} on ${other} and ${name}`) ?? 0) + 1);
            holderOf.set(ip, name);
          }
          if (ips.length === 0) continue;
          if (!firstAddress.has(name)) firstAddress.set(name, { ip: ips.join(), at: now });
          const last = lastAddress.get(name);
          if (last !== undefined && last !== ips.join()) moves.push(`${name}: ${last} -> ${ips.join()}`);
          lastAddress.set(name, ips.join());
        }
        const holder = lease()?.holderIdentity ?? '';
        if (holder !== holders.at(-1)?.holder) holders.push({ holder, at: now });
        samplingMs += performance.now() - began;
      };
      const sampler = setInterval(sample, SAMPLE_EVERY_MS);
      let next = 0;
      const creator = setInterval(() => {
        const name = `lb-${String(++next).padStart(4, '0')}`;
        live.create({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default' }, spec: { type: 'LoadBalancer', ports: [{ port: 80 }] } });
        created.set(name, Date.now());
      }, CREATE_EVERY_MS);
      const firstCreatedAfter = (at: number) => [...created].find(([, when]) => when > at)?.[0];
      try {
        await waitFor('the leader to serve the first Services', () => firstAddress.size >= 5, 30_000);

        // The leader's next allocation write is held in the network, and the leader is killed while it waits for the
        // answer, before any renewal could tell the other replica it is gone.
        const caughtInFlight = await within(
          "the leader's next allocation write",
          relayOf.get(leader.identity)!.holdNext((r) => r.method === 'PUT' && /\/services\/lb-\d+\/status(\?|$)/.test(r.path) && ingressOf(JSON.parse(r.body.toString()) as ServiceStatus).length > 0),
          30_000,
        );
        const tree = await processTree(leader.pid);
        const lastRenewal = Date.parse(lease()?.renewTime ?? '');
        const killedAt = Date.now();
        leader.cli.child.kill('SIGKILL');
        await leader.cli.exit;
        await waitFor('no process of the killed agent left', async () => !(await Promise.all(tree.map(alive))).some(Boolean), 10_000);

        const late = JSON.parse(caughtInFlight.request.body.toString()) as ServiceStatus;
        const lateService = late.metadata?.name ?? '';
        const [contested = ''] = ingressOf(late);
        expect(inRange(contested), contested).toBe(true);
        // Not landed: nothing holds the address it claims.
        expect((live.list('v1', 'Service', 'default') as ServiceStatus[]).filter((s) => ingressOf(s).includes(contested))).toEqual([]);
        live.patch('v1', 'Service', 'default', 'elder', {
          spec: { type: 'LoadBalancer' },
          metadata: { annotations: { [REQUESTED_IPS_ANNOTATION]: contested } },
        });

        // The worst moment for the late write: the new leader has fenced, listed and planned, and its first
        // allocation (the elder, oldest first, gets the contested address) is on its way.
        const elderWrite = within(
          "the new leader's write of the elder",
          relayOf.get(follower.identity)!.holdNext(
            (r: RelayedRequest) => r.method === 'PUT' && /\/services\/elder\/status(\?|$)/.test(r.path) && ingressOf(JSON.parse(r.body.toString()) as ServiceStatus).includes(contested),
          ),
          DEFAULT_LEASE_DURATION_MS + 2 * MAX_RETRY_WAIT_MS + 30_000,
        );
        const holderSince = (holder: string, since: number) => holders.find((h) => h.holder === holder && h.at >= since)?.at;
        await waitFor('the other agent to hold the Lease', () => holderSince(follower.identity, killedAt) !== undefined, DEFAULT_LEASE_DURATION_MS + 2 * MAX_RETRY_WAIT_MS + 20_000);
        const takeover = holderSince(follower.identity, killedAt)!;
        const held: HeldRequest = await elderWrite;
        const beforeLate = live.get('v1', 'Service', 'default', lateService) as ServiceStatus;
        // Only the fence has moved the Service on since the dead leader planned: no address yet, the new leader's mark.
        expect(ingressOf(beforeLate)).toEqual([]);
        expect(beforeLate.status?.conditions?.find((c) => c.type === FENCE_CONDITION)?.message).toBe(`addresses allocated by ${follower.identity}`);
        expect(beforeLate.metadata?.resourceVersion).not.toBe(late.metadata?.resourceVersion);
        const lateAnswer = await caughtInFlight.deliverLate();
        const lateDeliveredAt = Date.now();
        held.release();
        expect(lateAnswer, 'the dead leader’s late write').toBe(409);

        await waitFor('a Service created after the kill', () => firstCreatedAfter(killedAt) !== undefined);
        const firstAfterKill = firstCreatedAfter(killedAt)!;
        await waitFor('the elder served with the contested address', () => ingressOf(live.get('v1', 'Service', 'default', 'elder') as ServiceStatus).join() === contested, 30_000);
        await waitFor('the first Service created after the kill served', () => firstAddress.has(firstAfterKill), 30_000);
        const servedAfterKill = firstAddress.get(firstAfterKill)!.at;
        expect(ingressOf(live.get('v1', 'Service', 'default', lateService) as ServiceStatus)).not.toContain(contested);

        // The killed agent comes back, as the kubelet restarts it, and follows.
        const newLeader = follower;
        const requestsBeforeRestart = live.requests.records.length;
        const restarted = await startAgent(leader.identity);
        await waitFor('the restarted agent ready', () => ready(restarted), 90_000);
        const restartedReadyAt = Date.now();
        await waitFor('the restarted agent to see the leader', () =>
          parseLogs(restarted.cli.stdout()).some((l) => l.msg === 'new leader observed' && l.leader === newLeader.identity),
        );
        // Long enough for at least one more look at the Lease by the restarted agent.
        await sleep(MAX_RETRY_WAIT_MS + 500);
        expect(holders.filter((h) => h.at > takeover).map((h) => h.holder)).toEqual([]);
        expect(await isLeaderGauge(restarted)).toBe(0);
        expect(await isLeaderGauge(newLeader)).toBe(1);
        expect(writesBy(restarted.identity, requestsBeforeRestart), 'writes of the restarted follower').toEqual([]);
        expect(parseLogs(restarted.cli.stdout()).filter((l) => l.msg === 'started leading')).toEqual([]);

        // A clean stop of the leader releases the Lease; the restarted agent takes it at its next look.
        const termAt = Date.now();
        newLeader.cli.child.kill('SIGTERM');
        await waitFor('the restarted agent to hold the Lease', () => holderSince(restarted.identity, termAt) !== undefined, 30_000);
        const released = holderSince('', termAt);
        const handedOver = holderSince(restarted.identity, termAt)!;
        expect(await within('the stopped leader to exit', newLeader.cli.exit, 30_000), newLeader.cli.stderr()).toBe(0);
        const exitedAt = Date.now();
        expect(parseLogs(newLeader.cli.stdout()).some((l) => l.msg === 'released the lease')).toBe(true);
        expect(await isLeaderGauge(restarted)).toBe(1);
        await waitFor('a Service created after the handover', () => firstCreatedAfter(handedOver) !== undefined);
        const firstAfterTerm = firstCreatedAfter(handedOver)!;
        await waitFor('the first Service created after the handover served', () => firstAddress.has(firstAfterTerm), 30_000);

        clearInterval(creator);
        const names = [...created.keys(), 'elder'];
        await waitFor('every Service served', () => names.every((name) => firstAddress.has(name)), 30_000);
        sample();
        clearInterval(sampler);
        const addresses = names.map((name) => ingressOf(live.get('v1', 'Service', 'default', name) as ServiceStatus));
        expect(addresses.filter((ips) => ips.length !== 1)).toEqual([]);
        expect(new Set(addresses.flat()).size).toBe(names.length);
        expect(addresses.flat().filter((ip) => !inRange(ip))).toEqual([]);
        expect(Object.fromEntries(doubles), 'addresses seen on two Services (samples)').toEqual({});
        expect(moves, 'Services whose address changed').toEqual([]);

        const figures = {
          takeover: takeover - killedAt,
          takeoverSinceRenewal: takeover - lastRenewal,
          firstServed: servedAfterKill - killedAt,
          firstServedAfterTakeover: servedAfterKill - takeover,
          lateWriteAfterKill: lateDeliveredAt - killedAt,
          restartedReady: restartedReadyAt - restarted.startedAt,
          released: released === undefined ? undefined : released - termAt,
          handover: handedOver - termAt,
          exited: exitedAt - termAt,
        };
        console.info(
          `leader-loss: SIGKILL (${tree.length} process${tree.length === 1 ? '' : 'es'}, none left) -> Lease taken ${seconds(figures.takeover)} (${seconds(figures.takeoverSinceRenewal)} after the last renewal), ` +
            `first Service created after the kill served ${seconds(figures.firstServed)} (${seconds(figures.firstServedAfterTakeover)} after the takeover); ` +
            `late write of ${lateService} (${contested}) delivered ${seconds(figures.lateWriteAfterKill)} after the kill: ${lateAnswer}; ` +
            `restarted agent ready in ${seconds(figures.restartedReady)}, follower, 0 writes; ` +
            `SIGTERM -> Lease released ${figures.released === undefined ? 'unseen' : seconds(figures.released)}, taken ${seconds(figures.handover)}, exit 0 after ${seconds(figures.exited)}; ` +
            `${names.length} Services, ${new Set(addresses.flat()).size} distinct addresses, ${samples} samples (${(samplingMs / samples).toFixed(1)} ms each, longest gap ${longestGapMs.toFixed(0)} ms), 0 doubles, 0 moves`,
        );

        // The bounds: the lease duration after the candidate last saw a renewal, which it may see up to one jittered
        // retry late and may find expired up to one jittered retry late; and on a clean stop, one jittered retry.
        expect(figures.takeover).toBeLessThan(DEFAULT_LEASE_DURATION_MS + 2 * MAX_RETRY_WAIT_MS + SLACK_MS);
        // The new leader first fences every Service it serves (about a hundred by then), then walks.
        expect(figures.firstServedAfterTakeover).toBeLessThan(20_000);
        expect(figures.handover).toBeLessThan(MAX_RETRY_WAIT_MS + SLACK_MS);

        restarted.cli.child.kill('SIGTERM');
        expect(await within('the last agent to exit', restarted.cli.exit, 30_000), restarted.cli.stderr()).toBe(0);
      } finally {
        clearInterval(creator);
        clearInterval(sampler);
      }
    },
  );
});
