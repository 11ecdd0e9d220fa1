/**
 * `npm start`: a small cluster on one machine. It starts the embedded API server seeded with lab/cluster.yaml and, as
 * root, LAB_NODES lab nodes (default 2): network namespaces joined by an underlay, each with its own pod CIDR, pods
 * as network namespaces (the lab plays the kubelet) and its own kube-router agent process (`ip netns exec`), all
 * against the API server on the host's underlay address. Extra arguments are kube-router flags for every agent.
 *
 * It prints `KUBECONFIG=<path>`, then each node's health URL and metrics URL, one line each, and runs until
 * interrupted; Ctrl-C stops every agent and removes every namespace and process the lab made.
 *
 * Without root it runs one agent in-process with no dataplane (LoadBalancer allocation only), on 127.0.0.1.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import pretty from 'pino-pretty';
import { createKubeContext, loadKubeConfig } from '@kube-router/kube';
import { ExecRunner } from '@kube-router/netfilter';
import {
  createLabUnderlay,
  defaultClusterNodes,
  loadManifestFiles,
  startApiServer,
  startLabCluster,
  type ApiServer,
  type Lab,
  type LabCluster,
  type LabUnderlay,
} from '@kube-router/testkit';
import { hasTool, KUBEADM_MOUNT_PATHS, writeKubeadmNodeFiles, type KubeadmNodeFiles } from '@kube-router/testkit';
import { defaultCatalog, environmentFor, FLAGS, parseFlags, runCli } from '@kube-router/agent';
import { startExternalRouter, type ExternalRouter } from './external-router.js';
import { labCatalog } from './lab-catalog.js';
import { killAndWait, NodeAgent, processesInNetns } from './node-agent.js';
import { labSettings } from './settings.js';

const here = dirname(fileURLToPath(import.meta.url));
const settings = labSettings(process.env);
// Text for people on stderr (stdout keeps the lines a person needs), or JSON lines for tools.
const log =
  settings.logFormat === 'json'
    ? pino({ base: { component: 'lab' } })
    : pino({ base: { component: 'lab' } }, pretty({ destination: 2, colorize: false, sync: true, ignore: 'pid,hostname' }));
const userFlags = process.argv.slice(2);
/** How long a node may take to be ready before the lab says what it waits for. */
const READINESS_NOTICE_MS = 10_000;

/**
 * The lab's defaults for every agent, then `extra`, then the user's flags, which win. With LAB_AGENT_DEFAULTS=false
 * the user's flags alone, as a DaemonSet's args are all its container gets.
 */
function agentFlags(extra: readonly string[]): string[] {
  if (!settings.agentDefaults) return [...userFlags];
  return [
    '--run-firewall=true',
    `--run-service-proxy=${defaultCatalog['service-proxy'] !== undefined}`,
    // IPVS where the kernel has it, as kube-router; nftables where it has none (this host: IPVS is tested in a QEMU guest).
    `--use-nftables-for-service-proxy=${!existsSync('/proc/net/ip_vs')}`,
    `--run-router=${defaultCatalog.router !== undefined}`,
    '--run-loadbalancer=true',
    '--loadbalancer-ip-range=10.255.0.0/24',
    '--loadbalancer-ip-range=fd00:255::/120',
    '--enable-ipv6=true',
    '--health-port=20244',
    '--metrics-port=20245',
    // kube-router explain asks the agents on their metrics servers.
    '--enable-explain',
    `--log-format=${settings.logFormat}`,
    ...extra,
    ...userFlags,
  ];
}

// Bad flags or --help end here, before anything is made.
const checked = parseFlags(agentFlags([]), { ...process.env, NODE_NAME: 'lab-node-1' });
if (!checked.ok) {
  process.stdout.write(checked.stdout);
  process.stderr.write(checked.stderr);
  process.exit(checked.exitCode);
}
/** What every agent is told: the lab's defaults with the user's flags. */
const checkedConfig = checked.config;
const { health, metrics } = checked.config;
/** kube-router's default --cluster-asn when the flag keeps its "unset" 0. */
const nodeAsn = checked.config.routing.clusterAsn === 0 ? 64_512 : checked.config.routing.clusterAsn;
if (defaultCatalog.router === undefined) log.warn('this build has no router plugin: pods on different nodes cannot reach each other');
if (checkedConfig.features['service-proxy'] && checkedConfig.proxy.useNftables) {
  log.info('the service proxy runs on nftables (--use-nftables-for-service-proxy)');
}

const isRoot = process.getuid?.() === 0;
// From here on an interrupt ends the lab through its own stop, which removes whatever has been made so far.
const interrupted = isRoot
  ? new Promise<NodeJS.Signals>((resolve) => {
      process.once('SIGINT', () => resolve('SIGINT'));
      process.once('SIGTERM', () => resolve('SIGTERM'));
    })
  : undefined;
const workdir = await mkdtemp(join(tmpdir(), 'kube-router-lab-'));
const seed = await loadManifestFiles([join(here, '../lab/cluster.yaml')]);
/** The DaemonSets' ServiceAccount and ClusterRole, as deploy/ ships them: the agents run under exactly this role. */
const rbacSeed = await loadManifestFiles([join(here, '../../../deploy/rbac.yaml')]);

async function runCluster(interrupted: Promise<NodeJS.Signals>): Promise<number> {
  const lab = new ClusterLab();
  const startAborter = new AbortController();
  try {
    const started = lab.start(startAborter.signal);
    const first = await Promise.race([started.then(() => 'started' as const), interrupted]);
    if (first !== 'started') {
      // The start gives up waiting for the agents at once, but ends what it is making so that stop() sees all of it.
      startAborter.abort();
      await started.catch(() => undefined);
      return await lab.stop(first);
    }
  } catch (error) {
    log.error({ err: error }, 'the lab did not start');
    await lab.stop('start failed');
    // An agent that refused its flags (exit 2) ends the lab with its code, as `npm start -- --bad-flag` does.
    const codes = await Promise.all(lab.agents.map((agent) => agent.exited));
    return codes.find((code): code is number => typeof code === 'number' && code !== 0) ?? 1;
  }

  // Then, once every node says so, whether it is ready, and if it is slow to be, which controller and why.
  const readiness = new AbortController();
  const reported = health.port === 0 ? Promise.resolve() : lab.reportReadiness(readiness.signal);

  // An agent that exits on its own (a refused assembly, an error) ends the lab with its exit code; one killed by a
  // signal is started again by its NodeAgent, as a kubelet restarts a crashed container.
  const agentExit = Promise.race(lab.agents.map(async (agent) => ({ agent, code: await agent.exited })));
  const first = await Promise.race([interrupted, agentExit]);
  readiness.abort();
  await reported;
  if (typeof first === 'string') return lab.stop(first);
  await lab.stop(`the agent of ${first.agent.nodeName} exited (${first.code})`);
  return typeof first.code === 'number' && first.code !== 0 ? first.code : 1;
}

/**
 * The root lab: the underlay, the API server, the lab nodes, the external router and an agent per node, made one after
 * another by start(), so that stop() removes whatever has been made so far.
 */
class ClusterLab {
  readonly agents: NodeAgent[] = [];
  private underlay: LabUnderlay | undefined;
  private server: ApiServer | undefined;
  /**
   * SIGUSR2: the API server forgets its change history, as when etcd compacts past every client's resourceVersion or
   * a cluster is restored from a backup. Every watch that resumes from before now is answered 410 Gone and its
   * informer relists: what the agents meet after a long outage, on demand (apps/lab/src/faults.test.ts).
   */
  private readonly compactHistory = (): void => {
    // Kept until the process ends: a signal without a handler would end the lab in the middle of its removal.
    if (this.stopping) return;
    this.server?.faults.expireResourceVersions();
    log.warn('SIGUSR2: the API server compacted its history; every watch resuming from before now gets 410 Gone');
  };
  private cluster: LabCluster | undefined;
  private router: ExternalRouter | undefined;
  private agentsStarted = Date.now();
  private userKubeconfig = '';
  private stopping: Promise<number> | undefined;

  async start(signal: AbortSignal): Promise<void> {
    const underlay = (this.underlay = await createLabUnderlay({
      runId: settings.runId,
      ...(settings.underlayCidrs && { cidrs: settings.underlayCidrs }),
    }));
    const server = await this.serveApi(underlay);
    // What each node has before its agent starts, as on a kubeadm node running kube-router's kubeadm DaemonSet (a
    // token of its own for each agent), in the node's directory; it reaches the agent at the DaemonSet's mount paths.
    const specs = defaultClusterNodes(settings.nodes);
    const files = new Map<string, KubeadmNodeFiles>();
    for (const spec of specs) files.set(spec.name, await writeKubeadmNodeFiles(server, join(workdir, spec.name)));
    // Mount points for the agents' own mount namespaces: empty directories where the host has none.
    for (const target of Object.values(KUBEADM_MOUNT_PATHS)) await mkdir(target, { recursive: true });
    // The kubelet attaches pods with the real CNI plugins from that file, once the router has written its ranges; a
    // build or a command line without the router (or with --enable-cni=false) keeps the lab's routed veths.
    const cni = checkedConfig.features.router && defaultCatalog.router !== undefined && checkedConfig.routing.enableCni;
    const cluster = (this.cluster = await startLabCluster({
      apiServer: server,
      underlay,
      runId: settings.runId,
      nodes: specs.map((spec) => ({ ...spec, ...(cni && { cniConfFile: files.get(spec.name)!.cniConfFile }) })),
    }));
    // Agents that do not route between the nodes (no router, or --enable-ibgp=false) run beside another network in
    // kube-router's manifests (firewall-only, proxy-only, advertise-only): the lab plays it, with a route per pod CIDR.
    const agentsRoute = checkedConfig.features.router && defaultCatalog.router !== undefined && checkedConfig.routing.enableIbgp;
    if (!agentsRoute) await routeBetweenNodes(cluster);
    this.router = await startRouter(cluster);
    const routerFlags = this.router && settings.agentDefaults ? externalRouterFlags(this.router) : [];
    this.agentsStarted = Date.now();
    for (const node of cluster.nodes) this.agents.push(startAgent(node, files.get(node.nodeName)!, new URL(server.url), routerFlags));
    await this.announce(cluster, signal);
    await waitForSeededPods(server, cluster);
  }

  /**
   * The API server on the host's underlay address: where the nodes' agents reach it, and kubectl in this shell too.
   * HTTPS with its own CA and bearer tokens, as a kubeadm cluster's kube-apiserver: this shell's kubeconfig has an
   * admin token. RBAC on, as kube-apiserver: each agent's token is the kube-router ServiceAccount's, bound to deploy/'s
   * role.
   */
  private async serveApi(underlay: LabUnderlay): Promise<ApiServer> {
    const adminToken = randomBytes(24).toString('hex');
    const server = (this.server = await startApiServer({
      host: underlay.hostIps[0]!,
      port: settings.apiPort,
      seed: [...seed, ...rbacSeed],
      tls: true,
      tokens: [adminToken],
      rbac: true,
      // EndpointSlices of every Service with a selector, as kube-controller-manager keeps them: the proxy's backends.
      endpointSliceController: true,
      // A deleted pod terminates through its kubelet (its preStop sleep): a serving, terminating endpoint meanwhile.
      gracefulPodDeletion: true,
    }));
    this.userKubeconfig = await server.writeKubeconfig(join(workdir, 'kubeconfig'));
    process.on('SIGUSR2', this.compactHistory);
    return server;
  }

  /**
   * One line each: the kubeconfig, then every node's health and metrics URLs, the first node's first, each as soon as
   * its servers answer: a first sync that hangs (a kernel tool that never returns) no longer hides them.
   */
  private async announce(cluster: LabCluster, signal: AbortSignal): Promise<void> {
    process.stdout.write(`KUBECONFIG=${this.userKubeconfig}\n`);
    for (const [index, agent] of this.agents.entries()) {
      const address = cluster.nodes[index]!.nodeIps[0]!;
      if (health.port !== 0) {
        await agent.waitForAnswer(`${urlOf(address, health.port)}/livez`, 60_000, signal, () => true);
        process.stdout.write(`${urlOf(address, health.port)}/healthz\n`);
      }
      if (metrics.port !== 0) process.stdout.write(`${urlOf(address, metrics.port)}${metrics.path}\n`);
    }
  }

  /**
   * A line per node once it is ready (informers synced, every controller through its first sync): `<node> ready after
   * 4.2 s`. A node still not ready after READINESS_NOTICE_MS says which checks fail and why (from /readyz?verbose),
   * once, and its ready line follows when it gets there.
   */
  async reportReadiness(signal: AbortSignal): Promise<void> {
    const started = this.agentsStarted;
    const ready = await Promise.all(
      this.agents.map(async (agent, index) => {
        const url = `${urlOf(this.cluster!.nodes[index]!.nodeIps[0]!, health.port)}/readyz?verbose`;
        const notice = setTimeout(() => {
          void fetch(url, { signal: AbortSignal.timeout(2_000) })
            .then(async (response) => (response.status === 200 ? undefined : notReady(await response.text())))
            .then((why) => why && process.stdout.write(`${agent.nodeName} not ready after ${READINESS_NOTICE_MS / 1000} s: ${why}\n`))
            .catch(() => undefined);
        }, READINESS_NOTICE_MS);
        try {
          await agent.waitForAnswer(url, 30 * 60_000, signal);
          process.stdout.write(`${agent.nodeName} ready after ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
          return true;
        } catch (error) {
          if (!signal.aborted) log.warn({ node: agent.nodeName, err: error }, 'no readiness');
          return false;
        } finally {
          clearTimeout(notice);
        }
      }),
    );
    // The start-up ends with what a person does next, whatever the logs above said.
    if (ready.every(Boolean)) {
      process.stdout.write(
        `lab ready: ${this.agents.length} nodes; try: kubectl --kubeconfig ${this.userKubeconfig} get pods -A -o wide (Ctrl-C stops it)\n`,
      );
    }
  }

  /** Stops every agent and removes everything made so far, once however often it is asked; 0 if all went well. */
  stop(reason: string): Promise<number> {
    return (this.stopping ??= this.remove(reason));
  }

  private async remove(reason: string): Promise<number> {
    log.info({ reason }, 'stopping the lab');
    // Ctrl-C reaches every process of the group and wrappers relay it again: it must not cut the removal short.
    const holdOff = () => log.info('still removing the lab');
    process.on('SIGINT', holdOff);
    process.on('SIGTERM', holdOff);
    const leftovers: number[] = [];
    const codes = await Promise.all(
      this.agents.map(async (agent) => {
        const code = await agent.stop(15_000);
        for (const { pid, command } of await processesInNetns(agent.netns)) {
          log.info({ node: agent.nodeName, pid, command }, 'process left in the node namespace');
          leftovers.push(pid);
        }
        return code;
      }),
    );
    const failures: unknown[] = [];
    await this.router?.stop().catch((error: unknown) => failures.push(error));
    await this.cluster?.stop().catch((error: unknown) => failures.push(error));
    // The pods' own processes are gone with the pods; anything else the agents left (a daemon) goes now.
    await killAndWait(leftovers, 5_000);
    await this.underlay?.remove().catch((error: unknown) => failures.push(error));
    await this.server?.close().catch((error: unknown) => failures.push(error));
    await rm(workdir, { recursive: true, force: true });
    for (const error of failures) log.error({ err: error }, 'removing the lab failed');
    return codes.every((code) => code === 0) && failures.length === 0 ? 0 : 1;
  }
}

/** A node's agent process in the node's namespace, with what the DaemonSet and the kubelet give its container. */
function startAgent(node: Lab, files: KubeadmNodeFiles, apiAddress: URL, routerFlags: readonly string[]): NodeAgent {
  return new NodeAgent({
    nodeName: node.nodeName,
    netns: node.nodeNetns,
    ...(settings.agentCli !== undefined && { cli: settings.agentCli }),
    mounts: files.mounts,
    // What the DaemonSet's env and the kubelet give every container (the in-cluster API address).
    env: {
      NODE_NAME: node.nodeName,
      KUBE_ROUTER_CNI_CONF_FILE: files.containerCniConfFile,
      KUBERNETES_SERVICE_HOST: apiAddress.hostname.replace(/^\[|\]$/g, ''),
      KUBERNETES_SERVICE_PORT: apiAddress.port,
    },
    args: agentFlags([`--kubeconfig=${files.kubeconfig}`, ...routerFlags]),
    logger: log,
    onLine: (stream, line) =>
      settings.logFormat === 'json'
        ? (stream === 'stdout' ? process.stdout : process.stderr).write(`${line}\n`)
        : process.stderr.write(`${node.nodeName} ${line}\n`),
  });
}

/** The seeded pods run once their node's network is there: with CNI, after the agent has written its ranges. */
async function waitForSeededPods(server: ApiServer, cluster: LabCluster): Promise<void> {
  await Promise.all(
    cluster.nodes.flatMap((node) =>
      server
        .list('v1', 'Pod')
        .filter((pod) => (pod.spec as { nodeName?: string } | undefined)?.nodeName === node.nodeName)
        .map((pod) => node.waitForPod({ namespace: pod.metadata.namespace ?? 'default', name: pod.metadata.name ?? '' }, 60_000)),
    ),
  );
}

/** The failing checks of a Kubernetes-style verbose readiness answer (`[-]netpol failed: reason`), joined. */
function notReady(verboseBody: string): string {
  const failed = verboseBody.split('\n').filter((line) => line.startsWith('[-]')).map((line) => line.slice(3));
  return failed.length > 0 ? failed.join('; ') : verboseBody.trim();
}

/** The external BIRD router, when the build routes, the lab is not told otherwise and BIRD is installed. */
async function startRouter(cluster: LabCluster): Promise<ExternalRouter | undefined> {
  if (defaultCatalog.router === undefined || !settings.externalRouter) return undefined;
  if (!hasTool('bird') || !hasTool('birdc')) {
    log.warn('bird is not installed: the lab runs without its external router');
    return undefined;
  }
  const router = await startExternalRouter({
    runId: settings.runId,
    underlay: cluster.underlay,
    nodes: cluster.nodes,
    nodeAsn,
    // The manifest's peer router, when the agents' own flags name one (LAB_AGENT_DEFAULTS=false).
    ...(!settings.agentDefaults && checkedConfig.routing.peers.asns[0] !== undefined && { asn: checkedConfig.routing.peers.asns[0] }),
    dir: join(workdir, 'router'),
  });
  log.info(
    { netns: router.netns, addresses: router.addresses, asn: router.asn, birdc: `birdc -s ${join(workdir, 'router', 'bird.ctl')}` },
    'external router (BIRD) started',
  );
  return router;
}

/**
 * The flags that peer every agent with the external router and have it announce LoadBalancer addresses, those of
 * them that this build implements (an agent refuses a flag it does not implement).
 */
function externalRouterFlags(router: ExternalRouter): string[] {
  const peering = FLAGS['peer-router-ips'].implemented && FLAGS['peer-router-asns'].implemented;
  if (!peering) log.warn('this build does not implement --peer-router-ips: the external router has no sessions with the nodes');
  const advertise = FLAGS['advertise-loadbalancer-ip'].implemented;
  if (peering && !advertise) log.warn('this build does not implement --advertise-loadbalancer-ip: the router learns pod CIDRs only');
  return [...(peering ? router.agentFlags : []), ...(peering && advertise ? ['--advertise-loadbalancer-ip=true'] : [])];
}

/** A route on every node to every other node's pod CIDRs, through that node's underlay address of the same family. */
async function routeBetweenNodes(cluster: LabCluster): Promise<void> {
  const runner = new ExecRunner({ defaultTimeoutMs: 10_000 });
  for (const node of cluster.nodes) {
    for (const other of cluster.nodes.filter((candidate) => candidate !== node)) {
      for (const cidr of other.podCidrs) {
        const via = other.nodeIps.find((address) => address.includes(':') === cidr.includes(':'));
        if (via !== undefined) await runner.run({ command: 'ip', args: ['route', 'replace', cidr, 'via', via], netns: node.nodeNetns });
      }
    }
  }
  log.info('the agents do not route between the nodes: the lab added a route per pod CIDR, as the network beside them would');
}

function urlOf(address: string, port: number): string {
  return `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
}

/** Not root: one agent in this process, no namespaces, so no pods and no firewall; LoadBalancer allocation works. */
async function runWithoutDataplane(): Promise<number> {
  log.warn('not root: running one agent without the network-namespace lab (no pods, no firewall, no routing)');
  // HTTPS with a token, as the root lab's: the kubeconfig carries the CA and the token.
  const server = await startApiServer({
    port: settings.apiPort,
    seed,
    tls: true,
    tokens: [randomBytes(24).toString('hex')],
    endpointSliceController: true,
  });
  const kubeconfig = await server.writeKubeconfig(join(workdir, 'kubeconfig'));
  process.env.POD_NAME ??= 'kube-router-lab';
  process.env.POD_NAMESPACE ??= 'kube-system';
  try {
    return await runCli([...agentFlags([]), '--run-firewall=false', '--run-router=false', '--run-service-proxy=false'], {
      catalog: labCatalog({ netns: undefined }),
      env: { ...process.env, NODE_NAME: 'lab-node-1' },
      environment: (config, logger, metrics) =>
        Promise.resolve(
          environmentFor(
            createKubeContext({ kubeConfig: loadKubeConfig({ kubeconfig, env: {} }), nodeName: config.nodeName, logger, metrics }),
            config,
          ),
        ),
      onStarted(agent) {
        process.stdout.write(`KUBECONFIG=${kubeconfig}\n`);
        if (agent.healthUrl) process.stdout.write(`${agent.healthUrl}/healthz\n`);
        if (agent.metricsUrl) process.stdout.write(`${agent.metricsUrl}\n`);
      },
    });
  } finally {
    await server.close();
    await rm(workdir, { recursive: true, force: true });
  }
}

// Last: runCluster needs ClusterLab, and a class is not hoisted.
const exitCode = interrupted ? await runCluster(interrupted) : await runWithoutDataplane();
process.exit(exitCode);
