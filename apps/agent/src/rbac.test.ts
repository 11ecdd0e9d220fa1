// Issue 30: deploy/rbac.yaml's ClusterRole is enough for the agent, and each grant in it that the agent uses is needed.
// The agent runs against an API server that enforces RBAC as kube-apiserver does, with a token of the ServiceAccount
// that deploy/'s DaemonSets run as. Under exactly deploy/'s objects it becomes ready and makes its writes (the load
// balancer allocator's ingress addresses, its Lease, an Event); with one grant taken away, it fails in a way an
// operator would see. Every grant of the role is split into (API group, resource, verb); the server's request log
// says which of them the agent used, and the grants it never used are listed and shown not to be needed.
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { createKubeContext, KubeServices, loadKubeConfig, serviceProxySources } from '@kube-router/kube';
import { lballocPlugin } from '@kube-router/lballoc';
import { AgentMetrics } from '@kube-router/metrics';
import { informerSources as netpolInformerSources } from '@kube-router/netpol-iptables';
import { serviceAccountUser, startApiServer, type ApiServer, type KubeObject } from '@kube-router/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { createAgent } from './agent.js';
import { freePort, get, captureLogs, waitFor } from './testing/support.js';
import { killSpawnedClis, spawnCli } from './testing/spawn-cli.js';
import { testPlugin } from './testing/test-plugins.js';

const repo = fileURLToPath(new URL('../../../', import.meta.url));
const deployed = parseAllDocuments(readFileSync(`${repo}deploy/rbac.yaml`, 'utf8')).map((doc) => doc.toJS() as KubeObject);
const account = deployed.find((doc) => doc.kind === 'ServiceAccount')!;
const clusterRole = deployed.find((doc) => doc.kind === 'ClusterRole')!;
const clusterRoleBinding = deployed.find((doc) => doc.kind === 'ClusterRoleBinding')!;
const ACCOUNT_USER = serviceAccountUser(account.metadata.namespace!, account.metadata.name!);
const NODE = 'krt-node';
const RANGE = '198.51.100.0/24';
const ADMIN_TOKEN = 'admin-token';
const AGENT_TOKEN = 'kube-router-token';

interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

/** One thing a role grants: a verb on a resource (or `resource/subresource`) of an API group. */
interface Grant {
  group: string;
  resource: string;
  verb: string;
}
const grantId = ({ group, resource, verb }: Grant) => `${verb} ${group === '' ? 'core' : group}/${resource}`;

function grantsOf(role: KubeObject): Grant[] {
  return (role.rules as PolicyRule[]).flatMap((rule) =>
    rule.apiGroups.flatMap((group) => rule.resources.flatMap((resource) => rule.verbs.map((verb) => ({ group, resource, verb })))),
  );
}

/** The role with one rule per grant, minus the named grants: what deploy/'s role grants, less exactly those. */
function without(role: KubeObject, removed: readonly string[]): KubeObject {
  const rules = grantsOf(role)
    .filter((grant) => !removed.includes(grantId(grant)))
    .map(({ group, resource, verb }) => ({ apiGroups: [group], resources: [resource], verbs: [verb] }));
  return { ...role, rules };
}

/** What an operator would see of the agent after a while: does it run, is it ready, did it write what it should. */
interface Observation {
  startError?: string;
  readyz: { status: number; body: string };
  /** The ingress address of the Service that exists from the start, and of one created after a few seconds. */
  webAddress: boolean;
  lateAddress: boolean;
  lease?: { holder: string; renewed: boolean };
  /** The Warning event about the Service whose requested address is outside the range: how often it was counted. */
  allocationFailedEventCount?: number;
  /** A Warning event that a status write failed (after the injected 409, the allocator re-reads the Service). */
  statusUpdateFailedEvent?: string;
  /** Every request of the agent's ServiceAccount, as the grant it needed; and the ones answered 403. */
  used: string[];
  forbidden: string[];
}

const allGood = (o: Observation) =>
  o.startError === undefined &&
  o.readyz.status === 200 &&
  o.webAddress &&
  o.lateAddress &&
  o.lease?.renewed === true &&
  (o.allocationFailedEventCount ?? 0) >= 2 &&
  o.statusUpdateFailedEvent === undefined &&
  o.forbidden.length === 0;

const loadBalancer = (name: string, spec: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace: 'default' },
  spec: { type: 'LoadBalancer', ports: [{ port: 80 }], ...spec },
});
/** What the informers of every feature read, so that their lists and watches are not of empty collections only. */
const world: KubeObject[] = [
  { apiVersion: 'v1', kind: 'Node', metadata: { name: NODE }, spec: { podCIDR: '10.244.0.0/24', podCIDRs: ['10.244.0.0/24'] } },
  { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'client', namespace: 'default', labels: { app: 'client' } }, spec: { nodeName: NODE, containers: [{ name: 'c', image: 'busybox' }] } },
  { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'deny', namespace: 'default' }, spec: { podSelector: {} } },
  loadBalancer('web'),
  // The allocator cannot serve it and says so in an Event, again at every retry of its failed sync.
  loadBalancer('outside', { loadBalancerIP: '203.0.113.9' }),
];

const ingressOf = (server: ApiServer, name: string) =>
  ((server.get('v1', 'Service', 'default', name)?.status as { loadBalancer?: { ingress?: unknown[] } } | undefined)?.loadBalancer?.ingress ?? []).length > 0;

function eventsAbout(server: ApiServer, name: string, reason: string) {
  return server.list('v1', 'Event', 'default').filter((event) => (event.involvedObject as { name?: string }).name === name && event.reason === reason);
}

function requestsOf(server: ApiServer, forbidden: boolean): string[] {
  const grants = server.requests
    .filter({ user: ACCOUNT_USER.name })
    .filter((record) => record.verb !== 'discovery' && (record.forbidden === true) === forbidden)
    .map((record) => grantId({ group: record.group ?? '', resource: `${record.resource}${record.subresource ? `/${record.subresource}` : ''}`, verb: record.verb }));
  return [...new Set(grants)].sort();
}

async function startServer(role: KubeObject): Promise<ApiServer> {
  const server = await startApiServer({
    tls: true,
    rbac: true,
    tokens: [ADMIN_TOKEN, { token: AGENT_TOKEN, user: ACCOUNT_USER }],
    seed: [account, role, clusterRoleBinding, ...world],
  });
  // A status write conflicts, as when someone else changed the Service in between: the allocator re-reads it. The
  // first two status writes are the new leader's fences of the two Services it serves (a 409 there already proves the
  // Service moved on, so it is not re-read); the third is web's allocation, which is.
  server.faults.failNextRequest('update', 'services', 409, 3);
  return server;
}

function observe(server: ApiServer, readyz: Observation['readyz'], startError: string | undefined): Observation {
  const lease = server.get('coordination.k8s.io/v1', 'Lease', 'kube-system', 'kube-router-lballoc')?.spec as
    | { holderIdentity?: string; acquireTime?: string; renewTime?: string }
    | undefined;
  const statusUpdateFailed = eventsAbout(server, 'web', 'LoadBalancerStatusUpdateFailed')[0];
  return {
    ...(startError !== undefined && { startError }),
    readyz,
    webAddress: ingressOf(server, 'web'),
    lateAddress: ingressOf(server, 'late'),
    ...(lease && { lease: { holder: lease.holderIdentity ?? '', renewed: Date.parse(lease.renewTime ?? '') > Date.parse(lease.acquireTime ?? '') } }),
    ...(eventsAbout(server, 'outside', 'LoadBalancerIPAllocationFailed')[0] && {
      allocationFailedEventCount: eventsAbout(server, 'outside', 'LoadBalancerIPAllocationFailed')[0]!.count as number,
    }),
    // The message quotes the API server's answer as JSON: its own quotes come escaped.
    ...(statusUpdateFailed && { statusUpdateFailedEvent: (statusUpdateFailed.message as string).replace(/\\/g, '') }),
    used: requestsOf(server, false),
    forbidden: requestsOf(server, true),
  };
}

/**
 * The agent assembled as the reference CLI assembles it, in this process so that many run at once: the real load
 * balancer allocator, and the informers of the firewall and the service proxy (and so of the router, which reads a
 * subset of the proxy's) through those plugins' own informerSources; their dataplanes need root and are not run.
 * Short lease, watch-down and retry timings make each failure show within seconds.
 */
async function runAgent(role: KubeObject, label: string): Promise<Observation> {
  const server = await startServer(role);
  const { logger } = captureLogs('warn');
  const metrics = new AgentMetrics({ collectDefaultMetrics: false });
  const kube = createKubeContext({
    kubeConfig: loadKubeConfig({ kubeconfig: await server.writeKubeconfig(undefined, { token: AGENT_TOKEN }) }),
    nodeName: NODE,
    logger,
    metrics,
    informers: { watchDownGraceMs: 2_000, restartBackoff: { initialMs: 500, maxMs: 2_000 } },
    leaderElection: { namespace: 'kube-system', identity: `kube-router-${label}`, leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 500 },
  });
  const agent = await createAgent({
    services: [[KubeServices, kube]],
    readinessChecks: { informers: kube.informers.readinessCheck },
    beforeFirstSync: () => kube.informers.start({ cacheSyncTimeoutMs: 8_000 }),
    logger,
    metrics,
    plugins: [
      { plugin: lballocPlugin, options: { ranges: [RANGE], minSyncIntervalMs: 0 } },
      { plugin: testPlugin({ name: 'firewall-informers', onCreate: (services) => void netpolInformerSources(services.get(KubeServices), logger, NODE) }) },
      { plugin: testPlugin({ name: 'proxy-informers', onCreate: (services) => void serviceProxySources(services.get(KubeServices), NODE, logger) }) },
    ],
    options: { nodeName: NODE, health: { addr: '127.0.0.1', port: 0 }, scheduler: { initialBackoffMs: 300, maxBackoffMs: 1_000 }, collectDefaultMetrics: false },
  });
  const readyz = async () => (agent.healthUrl ? await get(`${agent.healthUrl}/readyz?verbose`).catch(() => ({ status: 0, body: 'no answer' })) : { status: 0, body: 'not running' });
  try {
    const startError = await agent.start().then(
      () => undefined,
      (error: unknown) => (error instanceof Error ? error.message : String(error)),
    );
    // An agent that did not start runs nothing more to look at.
    if (startError !== undefined) return observe(server, await readyz(), startError);
    const started = performance.now();
    // Past the renew deadline: an agent that cannot renew its Lease has stepped down by then.
    await sleep(5_000);
    server.create(loadBalancer('late'));
    let observation = observe(server, await readyz(), startError);
    while (!allGood(observation) && performance.now() - started < 12_000) {
      await sleep(250);
      observation = observe(server, await readyz(), startError);
    }
    return observation;
  } finally {
    await agent.stop();
    await kube.informers.stop();
    await server.close();
  }
}

const grants = grantsOf(clusterRole);
/** A concrete failure the agent shows without the grant, besides the server refusing the request that needed it. */
const NEEDED: Record<string, { failure: string; shows: (o: Observation) => boolean }> = {
  ...Object.fromEntries(
    ['pods', 'namespaces', 'nodes', 'services'].map((resource) => [
      `list core/${resource}`,
      { failure: `the ${resource} informer never syncs: the agent does not start`, shows: (o: Observation) => o.startError?.includes(`cannot list resource "${resource}"`) === true },
    ]),
  ),
  ...Object.fromEntries(
    [['discovery.k8s.io', 'endpointslices'], ['networking.k8s.io', 'networkpolicies']].map(([group, resource]) => [
      `list ${group}/${resource}`,
      { failure: `the ${resource} informer never syncs: the agent does not start`, shows: (o: Observation) => o.startError?.includes(`cannot list resource "${resource}"`) === true },
    ]),
  ),
  ...Object.fromEntries(
    ['core/pods', 'core/namespaces', 'core/nodes', 'core/services', 'discovery.k8s.io/endpointslices', 'networking.k8s.io/networkpolicies'].map((path) => {
      const resource = path.split('/')[1]!;
      return [
        `watch ${path}`,
        {
          failure: `the ${resource} informer's watch stays down: the agent turns not ready`,
          shows: (o: Observation) => o.startError === undefined && o.readyz.status !== 200 && new RegExp(`\\b${resource}: watch down`).test(o.readyz.body),
        },
      ];
    }),
  ),
  'get core/services': {
    failure: 'a status write that conflicts cannot be retried: a LoadBalancerStatusUpdateFailed event',
    shows: (o) => o.statusUpdateFailedEvent?.includes('cannot get resource "services"') === true,
  },
  'update core/services/status': {
    failure: 'no ingress address is ever written',
    shows: (o) => !o.webAddress && !o.lateAddress && o.statusUpdateFailedEvent?.includes('cannot update resource "services/status"') === true,
  },
  'get coordination.k8s.io/leases': { failure: 'no leadership: no Lease, no address', shows: (o) => o.lease === undefined && !o.webAddress },
  'create coordination.k8s.io/leases': { failure: 'no leadership: no Lease, no address', shows: (o) => o.lease === undefined && !o.webAddress },
  'update coordination.k8s.io/leases': {
    failure: 'the Lease is never renewed: the allocator steps down and a later Service gets no address',
    shows: (o) => o.lease?.renewed === false && !o.lateAddress,
  },
  'create core/events': { failure: 'no Event is recorded', shows: (o) => o.allocationFailedEventCount === undefined },
  'patch core/events': { failure: "a repeated Event's count stays 1", shows: (o) => o.allocationFailedEventCount === 1 },
};
const UNUSED = grants.map(grantId).filter((id) => !(id in NEEDED));

let server: ApiServer | undefined;
afterEach(async () => {
  killSpawnedClis();
  await server?.close();
  server = undefined;
});

describe("deploy/rbac.yaml's ClusterRole", () => {
  it('is plain resource rules, bound to the ServiceAccount of the DaemonSets', () => {
    for (const rule of clusterRole.rules as PolicyRule[]) {
      expect(rule.resourceNames ?? [], JSON.stringify(rule)).toEqual([]);
      expect(rule.nonResourceURLs ?? [], JSON.stringify(rule)).toEqual([]);
    }
    expect(clusterRoleBinding.roleRef).toMatchObject({ kind: 'ClusterRole', name: clusterRole.metadata.name });
    expect(clusterRoleBinding.subjects).toEqual([{ kind: 'ServiceAccount', name: account.metadata.name, namespace: account.metadata.namespace }]);
    // Every grant the test says is needed is in the role: a rule dropped from deploy/ fails here first.
    expect(Object.keys(NEEDED).filter((id) => !grants.map(grantId).includes(id))).toEqual([]);
  });

  it(
    'is enough for the reference CLI as deployed (--run-loadbalancer): ready, an address written, its Lease held, an Event recorded',
    { timeout: 120_000 },
    async () => {
      server = await startServer(clusterRole);
      const port = await freePort();
      const cli = spawnCli(
        'src/cli.ts',
        [
          '--run-firewall=false',
          '--run-service-proxy=false',
          '--run-router=false',
          '--run-loadbalancer',
          `--kubeconfig=${await server.writeKubeconfig(undefined, { token: AGENT_TOKEN })}`,
          `--loadbalancer-ip-range=${RANGE}`,
          '--health-addr=127.0.0.1',
          `--health-port=${port}`,
        ],
        { POD_NAME: 'kube-router-rbac', POD_NAMESPACE: 'kube-system' },
      );
      const live = server;
      await waitFor('the agent to be ready', async () => (await get(`http://127.0.0.1:${port}/readyz`).catch(() => ({ status: 0 }))).status === 200, 90_000);
      await waitFor('an address for the Service', () => ingressOf(live, 'web'), 30_000);
      await waitFor('an Event about the Service it cannot serve', () => eventsAbout(live, 'outside', 'LoadBalancerIPAllocationFailed').length > 0, 30_000);
      expect(live.get('coordination.k8s.io/v1', 'Lease', 'kube-system', 'kube-router-lballoc')?.spec).toMatchObject({ holderIdentity: 'kube-router-rbac' });
      expect(requestsOf(live, true), 'requests of the agent that RBAC refused').toEqual([]);
      cli.child.kill('SIGTERM');
      expect(await cli.exit, cli.stderr()).toBe(0);
    },
  );

  it('is enough for every feature\'s informers, and each grant the agent uses is needed: without it, the agent fails', { timeout: 120_000 }, async () => {
    const began = performance.now();
    const cases: [string, KubeObject][] = [
      ['deploy/rbac.yaml', clusterRole],
      ['without the grants the agent never uses', without(clusterRole, UNUSED)],
      ...Object.keys(NEEDED).map((id): [string, KubeObject] => [`without ${id}`, without(clusterRole, [id])]),
    ];
    // A few at a time: each agent's Lease renews every few seconds, and 20 at once on a loaded 2-core machine could
    // miss a renewal for want of CPU rather than of a grant.
    const observations = await inBatches(cases.map(([, role], index) => () => runAgent(role, String(index))), 7);
    const byCase = new Map(cases.map(([name], index) => [name, observations[index]!]));
    console.info(`${cases.length} agents, each under its own role, in ${((performance.now() - began) / 1000).toFixed(1)} s`);

    const full = byCase.get('deploy/rbac.yaml')!;
    expect(allGood(full), JSON.stringify(full, null, 2)).toBe(true);
    // What the agent asked for under the full role is exactly what this test says it needs.
    expect(full.used).toEqual(Object.keys(NEEDED).sort());
    const minimal = byCase.get('without the grants the agent never uses')!;
    expect(allGood(minimal), JSON.stringify(minimal, null, 2)).toBe(true);
    // Least privilege: deploy/rbac.yaml grants nothing the agent does not use.
    expect(UNUSED, 'grants of deploy/rbac.yaml the agent never used').toEqual([]);

    const unshown: string[] = [];
    for (const [id, { failure, shows }] of Object.entries(NEEDED)) {
      const observation = byCase.get(`without ${id}`)!;
      // The server refused the request that needed the grant, and the agent shows it.
      if (!observation.forbidden.includes(id) || !shows(observation)) unshown.push(`${id} (${failure}): ${JSON.stringify(observation, null, 2)}`);
    }
    expect(unshown, unshown.join('\n\n')).toEqual([]);
  });
});

/** Runs the tasks `size` at a time, in order; the results in the tasks' order. */
async function inBatches<T>(tasks: readonly (() => Promise<T>)[], size: number): Promise<T[]> {
  const results: T[] = [];
  for (let start = 0; start < tasks.length; start += size) results.push(...(await Promise.all(tasks.slice(start, start + size).map((task) => task()))));
  return results;
}
