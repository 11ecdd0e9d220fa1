import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { createSyncController, messageOf, SyncFailures } from '@kube-router/controller';
import type { Controller, PluginContext } from '@kube-router/controller';
import { ipvsServiceId, Mutex } from '@kube-router/netfilter';
import type { CommandRunner, IpFamily, IpvsDestinationConnections, IpvsVirtualServer } from '@kube-router/netfilter';
import { BridgeHairpin } from './bridge-hairpin.js';
import { Dataplane, PROXY_SYSCTLS } from './dataplane.js';
import { HealthCheckServers } from './health-check-servers.js';
import { ProxyMetrics } from './metrics.js';
import { inCidrs, nodePodCidrs, parseCidrs, strictServiceAddressRanges } from '@kube-router/kube';
import { buildProxyModel } from './model.js';
import type { DesiredVirtualServer, ProxyModel } from './model.js';
import { enabledFamilies } from './options.js';
import type { ResolvedProxyIpvsOptions } from './options.js';
import { drainKey, planIpvs } from './plan.js';
import type { DrainingDestination, IpvsPlan } from './plan.js';

export const PROXY_CONTROLLER = 'proxy';

/** Where the controller reads the cluster from: the agent's informers, or anything shaped like them. */
export interface ProxySources {
  services(): readonly V1Service[];
  slicesFor(namespace: string, name: string): readonly V1EndpointSlice[];
  node(): V1Node | undefined;
  hasSynced(): boolean;
  onChange(handler: () => void): () => void;
  /** Records a Warning event on a Service. */
  warnService(namespace: string, name: string, reason: string, message: string): void;
}

export interface ProxyControllerDeps {
  readonly sources: ProxySources;
  readonly runner: CommandRunner;
}

/** What the last sync did, for logs, tests and the benchmark. */
export interface ProxySyncReport {
  readonly reason: string;
  readonly virtualServers: number;
  /** ipvsadm operations issued (restore lines), retries of refused services included. */
  readonly ipvsOperations: number;
  readonly ipvsSaveMs: number;
  readonly ipvsRestoreMs: number;
  readonly totalMs: number;
  readonly draining: number;
}

export interface ProxyController extends Controller {
  /** The last sync's report; undefined before the first. */
  lastSync(): ProxySyncReport | undefined;
  /** The Services' virtual servers as last computed, by IPVS service id. */
  desired(): ReadonlyMap<string, DesiredVirtualServer>;
}

/** While something drains, syncs come at least this often, so that drained real servers go soon. */
const DRAIN_POLL_MS = 2_000;

export function createProxyController(ctx: PluginContext, deps: ProxyControllerDeps, options: ResolvedProxyIpvsOptions): ProxyController {
  const families = enabledFamilies(options);
  if (families.length === 0) throw new Error('proxy: enableIpv4 and enableIpv6 are both false');
  // --strict-external-ip-validation: which externalIPs and LoadBalancer IPs may be programmed; undefined, all of them.
  const validation = strictServiceAddressRanges(options);
  const excluded = parseCidrs(options.excludedCidrs);
  parseCidrs(options.podCidrs);
  const isExcluded = (address: string) => inCidrs(address, excluded);

  const dataplane = new Dataplane({
    runner: deps.runner,
    ...(options.netns !== undefined && { netns: options.netns }),
    timeoutMs: options.commandTimeoutMs,
    families,
    iptablesBackend: options.iptablesBackend,
  });
  const bridgeHairpin = new BridgeHairpin({
    runner: deps.runner,
    ...(options.netns !== undefined && { netns: options.netns }),
    timeoutMs: options.commandTimeoutMs,
  });
  const healthChecks = new HealthCheckServers(options.healthCheckBindAddress, ctx.logger);
  let desired: ReadonlyMap<string, DesiredVirtualServer> = new Map();
  const metrics = new ProxyMetrics(ctx.metrics.registry, () => dataplane.ipvs.stats(), () => desired);
  const exclusive = new Mutex();
  let draining: ReadonlyMap<string, DrainingDestination> = new Map();
  let report: ProxySyncReport | undefined;
  let unsubscribe: (() => void) | undefined;
  let drainTimer: NodeJS.Timeout | undefined;
  let requestSync: ((reason: string) => void) | undefined;
  const reported = new Set<string>();
  // What the last sync applied, so that a triggered sync skips steps whose input did not change.
  let appliedVips: Record<IpFamily, Set<string>> | undefined;
  let localAddresses: string[] | undefined;
  const appliedSets = new Map<IpFamily, string>();
  const appliedChains = new Map<IpFamily, string>();

  const warn = (seen: Set<string>, owner: string, reason: string, message: string) => {
    const key = `${owner}\0${reason}\0${message}`;
    seen.add(key);
    if (reported.has(key)) return;
    reported.add(key);
    const [namespace = '', name = ''] = owner.split('/');
    deps.sources.warnService(namespace, name, reason, message);
  };

  const applyIpvs = async (model: ProxyModel, failures: SyncFailures, seen: Set<string>) => {
    let operations = 0;
    let restoreMs = 0;
    const saveStarted = performance.now();
    const current = await dataplane.ipvs.save();
    const ipvsSaveMs = performance.now() - saveStarted;
    let connections: Map<string, IpvsDestinationConnections> | undefined;
    if (draining.size > 0) {
      connections = new Map((await dataplane.ipvs.connections()).map((entry) => [drainKey(entry.service, entry), entry]));
    }
    const now = Date.now();
    const planOf = (state: readonly IpvsVirtualServer[]): IpvsPlan =>
      planIpvs(state, model.virtualServers, {
        isExcluded,
        gracefulPeriodMs: options.gracefulTermination ? options.gracefulPeriodMs : 0,
        now,
        draining,
        ...(connections !== undefined && { connections }),
      });
    const plan = planOf(current);
    const lines = [...plan.deletions, ...[...plan.byService.values()].flat()];
    const restored = await dataplane.ipvs.restore(lines);
    operations += restored.lines;
    restoreMs += restored.durationMs;
    if (restored.stderr) {
      // ipvsadm went on past the lines the kernel refused without saying which: the state says.
      const leftover = planOf(await dataplane.ipvs.save());
      for (const [id, serviceLines] of leftover.byService) {
        const owner = model.virtualServers.get(id)?.owner ?? id;
        // Alone, its lines get the kernel's message for this Service only (or apply, if the refusal was transient).
        const retry = await dataplane.ipvs.restore(serviceLines);
        operations += retry.lines;
        restoreMs += retry.durationMs;
        if (!retry.stderr) continue;
        const error = new Error(`IPVS refused ${id}: ${retry.stderr}`);
        failures.add(`service/${owner}`, error);
        warn(seen, owner, 'IpvsServiceNotProgrammed', error.message);
      }
      for (const line of leftover.deletions) failures.add(`ipvs-cleanup/${line}`, new Error(`IPVS refused "${line}": ${restored.stderr}`));
    }
    draining = plan.draining;
    const inKernel = new Set(current.map((server) => ipvsServiceId(server.service)));
    let added = 0;
    for (const id of model.virtualServers.keys()) if (!inKernel.has(id)) added++;
    return { operations, ipvsSaveMs, restoreMs, virtualServers: current.length - plan.deletions.length + added };
  };

  const sync = async (progress: () => void, signal: AbortSignal, reason: string): Promise<void> => {
    if (!deps.sources.hasSynced()) throw new Error('informer caches have not synced: refusing to program IPVS from an incomplete view');
    const started = performance.now();
    const full = reason === 'initial' || reason === 'periodic' || reason === 'retry' || appliedVips === undefined;
    const failures = new SyncFailures();
    const seen = new Set<string>();

    if (full && options.setSysctls) {
      for (const [key, value] of PROXY_SYSCTLS) await failures.attempt(`sysctl/${key}`, () => dataplane.setSysctl(key, value));
    }
    if (full && (options.tcpTimeoutSeconds || options.tcpFinTimeoutSeconds || options.udpTimeoutSeconds)) {
      await failures.attempt('ipvs-timeouts', () =>
        dataplane.ipvs.setTimeouts({ tcpSeconds: options.tcpTimeoutSeconds, tcpFinSeconds: options.tcpFinTimeoutSeconds, udpSeconds: options.udpTimeoutSeconds }),
      );
    }
    if (full) {
      appliedVips = await failures.attempt('dummy-interface', () => dataplane.ensureDummyInterface());
      localAddresses = (await failures.attempt('local-addresses', () => dataplane.localAddresses())) ?? localAddresses;
    }
    progress();
    signal.throwIfAborted();

    const model = buildProxyModel(
      { services: deps.sources.services(), slicesFor: deps.sources.slicesFor, node: deps.sources.node(), nodeName: ctx.nodeName, localAddresses: localAddresses ?? [] },
      {
        families,
        nodePortBindOnAllIp: options.nodePortBindOnAllIp,
        serviceProxyName: options.serviceProxyName,
        hairpinMode: options.hairpinMode,
        ...(validation && { validation }),
      },
    );
    desired = model.virtualServers;
    for (const problem of model.problems) {
      failures.add(`service/${problem.owner}`, new Error(`${problem.reason}: ${problem.message}`));
      warn(seen, problem.owner, problem.reason, problem.message);
    }
    for (const refusal of model.refused) warn(seen, refusal.owner, refusal.reason, refusal.message);
    for (const problem of model.nodeProblems) failures.add(`node/${ctx.nodeName}`, new Error(problem));

    const ipvs = await failures.attempt('ipvs', () => applyIpvs(model, failures, seen));
    progress();
    signal.throwIfAborted();

    // VIPs: every desired one added, stale ones (outside --excluded-cidrs) removed; a failure belongs to its Services.
    if (appliedVips) {
      const add: string[] = [];
      const remove: string[] = [];
      for (const family of families) {
        for (const ip of model.vips[family]) if (!appliedVips[family].has(ip)) add.push(ip);
        for (const ip of appliedVips[family]) if (!model.vips[family].has(ip) && !isExcluded(ip)) remove.push(ip);
      }
      const vipFailures = (await failures.attempt('vips', () => dataplane.changeVips(add, remove))) ?? new Map<string, Error>();
      for (const ip of add) if (!vipFailures.has(ip)) appliedVips[ip.includes(':') ? 'ipv6' : 'ipv4'].add(ip);
      for (const ip of remove) if (!vipFailures.has(ip)) appliedVips[ip.includes(':') ? 'ipv6' : 'ipv4'].delete(ip);
      for (const [ip, error] of vipFailures) {
        const owners = new Set([...model.virtualServers.values()].filter((server) => server.service.address === ip).map((server) => server.owner));
        if (owners.size === 0) failures.add(`vip-cleanup/${ip}`, error);
        for (const owner of owners) failures.add(`service/${owner}`, error);
      }
    }

    // The pod CIDRs not to masquerade: the configured ones, else the Node's as kube-router reads them. One that does
    // not parse would make iptables-restore refuse every Service's chains: it fails the sync, and the node
    // masquerades all IPVS traffic as it does with no pod CIDR known.
    let podCidrs = options.podCidrs;
    if (podCidrs.length === 0) {
      try {
        podCidrs = nodePodCidrs(deps.sources.node());
      } catch (error) {
        failures.add(`node/${ctx.nodeName}`, error);
      }
    }
    for (const family of families) {
      const servers = [...model.virtualServers.values()].filter((server) => (server.service.address.includes(':') ? 'ipv6' : 'ipv4') === family);
      const members = {
        localIps: (localAddresses ?? []).filter((ip) => ip.includes(':') === (family === 'ipv6')).sort(),
        serviceIps: [...new Set(servers.map((server) => server.service.address))].sort(),
        serviceIpPorts: [...new Set(servers.map((server) => `${server.service.address},${server.service.protocol}:${server.service.port}`))].sort(),
      };
      const setsKey = JSON.stringify(members);
      if (full || appliedSets.get(family) !== setsKey) {
        appliedSets.delete(family);
        const ok = await failures.attempt(`ipsets/${family}`, async () => {
          await dataplane.refreshSets(family, members);
          return true;
        });
        if (ok) appliedSets.set(family, setsKey);
      }
      const chains = {
        permitAll: options.ipvsPermitAll,
        masqueradeAll: options.masqueradeAll,
        podCidrs: podCidrs.filter((cidr) => cidr.includes(':') === (family === 'ipv6')),
        preserveClient: servers.filter((server) => server.preserveClientAddress),
        hairpin: servers.filter((server) => server.hairpin && server.destinations.length > 0),
      };
      const chainsKey = JSON.stringify([
        chains.permitAll,
        chains.masqueradeAll,
        chains.podCidrs,
        chains.preserveClient.map((server) => server.id),
        chains.hairpin.map((server) => [server.id, server.destinations.map((d) => d.address)]),
      ]);
      if (full || appliedChains.get(family) !== chainsKey) {
        appliedChains.delete(family);
        const ok = await failures.attempt(`iptables/${family}`, async () => {
          await dataplane.programChains(family, chains);
          return true;
        });
        if (ok) appliedChains.set(family, chainsKey);
      }
    }

    // hairpin_mode on the kube-bridge port of each local endpoint of a hairpin Service, so that the SNATed reply to a
    // pod reaching itself through its Service gets back out of the port it came in by. Checked at every sync: a
    // restarted pod keeps its address but gets a new port. Nothing runs without hairpin Services or without the bridge.
    if (model.hairpinEndpoints.size > 0) {
      const hairpin = await failures.attempt('bridge-hairpin', () => bridgeHairpin.ensure(model.hairpinEndpoints.keys()));
      for (const [address, error] of hairpin?.failures ?? []) {
        const owners = model.hairpinEndpoints.get(address) ?? [];
        failures.add(`bridge-hairpin/${address}`, owners.length > 0 ? new Error(`${messageOf(error)} (endpoint of ${owners.join(', ')})`, { cause: error }) : error);
      }
      if (hairpin && hairpin.enabled.length > 0) ctx.logger.info({ ports: hairpin.enabled, bridge: bridgeHairpin.bridge }, 'hairpin_mode turned on for bridge ports of hairpin Service endpoints');
    }

    const healthFailures = await healthChecks.reconcile(model.healthChecks);
    for (const [owner, error] of healthFailures) {
      failures.add(`service/${owner}`, error);
      warn(seen, owner, 'HealthCheckNodePortFailed', messageOf(error));
    }
    for (const key of [...reported]) if (!seen.has(key)) reported.delete(key);

    metrics.ipvsServices.set(ipvs?.virtualServers ?? model.virtualServers.size);
    const totalMs = performance.now() - started;
    metrics.syncTime.observe(totalMs / 1000);
    report = {
      reason,
      virtualServers: model.virtualServers.size,
      ipvsOperations: ipvs?.operations ?? 0,
      ipvsSaveMs: Math.round(ipvs?.ipvsSaveMs ?? 0),
      ipvsRestoreMs: Math.round(ipvs?.restoreMs ?? 0),
      totalMs: Math.round(totalMs),
      draining: draining.size,
    };
    ctx.logger.debug({ ...report, services: model.services, failures: failures.size }, 'proxy sync applied');
    clearTimeout(drainTimer);
    if (draining.size > 0 && requestSync) {
      const request = requestSync;
      drainTimer = setTimeout(() => request('graceful termination'), Math.min(DRAIN_POLL_MS, options.gracefulPeriodMs));
      drainTimer.unref();
    }
    failures.throwIfAny(PROXY_CONTROLLER);
  };

  const controller = createSyncController(ctx, {
    name: PROXY_CONTROLLER,
    syncPeriodMs: options.syncPeriodMs,
    ...(options.minSyncIntervalMs !== undefined && { minSyncIntervalMs: options.minSyncIntervalMs }),
    ...(options.syncTimeoutMs !== undefined && { syncTimeoutMs: options.syncTimeoutMs }),
    sync: ({ progress, signal, reason }) => exclusive.runExclusive(() => sync(progress, signal, reason)),
    start(startCtx) {
      requestSync = (why) => startCtx.requestSync(why);
      unsubscribe = deps.sources.onChange(() => startCtx.requestSync('cluster changed'));
    },
    // IPVS, VIPs and rules stay when the agent stops: a restarted agent adopts them and Services keep answering.
    async stop() {
      unsubscribe?.();
      unsubscribe = undefined;
      requestSync = undefined;
      clearTimeout(drainTimer);
      await healthChecks.close();
    },
  });
  return Object.assign(controller, { lastSync: () => report, desired: () => desired });
}
