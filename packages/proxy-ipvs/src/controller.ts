import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { createSyncController, messageOf, SyncFailures, SyncWarnings } from '@kube-router/controller';
import type { Controller, PluginContext, ServiceFlow, ServicePath, SyncContext } from '@kube-router/controller';
import { enabledFamilies, HealthCheckServers, inCidrs, parseCidrs, strictServiceAddressRanges } from '@kube-router/kube';
import type { ServiceProxySources } from '@kube-router/kube';
import type { CommandRunner, IpvsServiceKey } from '@kube-router/netfilter';
import { Dataplane } from './dataplane.js';
import { explainServicePath, virtualServerOf } from './explain.js';
import { FirewallStage } from './firewall-stage.js';
import { HairpinStage } from './hairpin-stage.js';
import { HostStage } from './host-stage.js';
import { IpvsStage } from './ipvs-stage.js';
import type { IpvsApplied } from './ipvs-stage.js';
import { ProxyMetrics } from './metrics.js';
import { buildProxyModel } from './model.js';
import type { DesiredVirtualServer, ModelOptions, ProxyModel, ProxyModelCache } from './model.js';
import type { ResolvedProxyIpvsOptions } from './options.js';

import { VipStage } from './vip-stage.js';

export const PROXY_CONTROLLER = 'proxy';
/** Services whose model is computed between two turns of the event loop in a sync that computes many. */
const WARM_SLICE = 500;

/** Where the controller reads the cluster from: the agent's informers, or anything shaped like them. */
/** What the proxy reads of the cluster (kube's informers in the agent; a fake in unit tests). */
export type ProxySources = ServiceProxySources;

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
  /** `kernel` when the sync read IPVS (`ipvsadm -Sn`: full syncs), `model` when it planned from its last clean apply. */
  readonly ipvsStateFrom: 'kernel' | 'model' | undefined;
  readonly ipvsSaveMs: number;
  readonly ipvsRestoreMs: number;
  readonly totalMs: number;
  readonly draining: number;
  /** UDP conntrack entries deleted for real servers that went and services that got their first. */
  readonly conntrackDeleted: number;
}

export interface ProxyController extends Controller {
  /** The last sync's report; undefined before the first. */
  lastSync(): ProxySyncReport | undefined;
  /** The Services' virtual servers as last computed, by IPVS service id. */
  desired(): ReadonlyMap<string, DesiredVirtualServer>;
  /** A flow to a Service address: its Service, real servers, and where IPVS sent the client's connections. */
  explainServiceFlow(flow: ServiceFlow): Promise<ServicePath | undefined>;
}

/** While something drains, syncs come at least this often, so that drained real servers go soon. */
const DRAIN_POLL_MS = 2_000;

export function createProxyController(ctx: PluginContext, deps: ProxyControllerDeps, options: ResolvedProxyIpvsOptions): ProxyController {
  const proxy = new ProxySync(ctx, deps, options);
  let unsubscribe: (() => void) | undefined;
  const controller = createSyncController(ctx, {
    name: PROXY_CONTROLLER,
    syncPeriodMs: options.syncPeriodMs,
    ...(options.minSyncIntervalMs !== undefined && { minSyncIntervalMs: options.minSyncIntervalMs }),
    ...(options.syncTimeoutMs !== undefined && { syncTimeoutMs: options.syncTimeoutMs }),
    sync: (syncCtx) => proxy.run(syncCtx),
    start(startCtx) {
      proxy.attach((why) => startCtx.requestSync(why));
      unsubscribe = deps.sources.onChange(() => startCtx.requestSync('cluster changed'));
    },
    // IPVS, VIPs and rules stay when the agent stops: a restarted agent adopts them and Services keep answering.
    async stop() {
      unsubscribe?.();
      unsubscribe = undefined;
      await proxy.detach();
    },
  });
  return Object.assign(controller, {
    lastSync: () => proxy.report,
    desired: () => proxy.desired,
    explainServiceFlow: async (flow: ServiceFlow) => {
      const server = virtualServerOf(proxy.desired, flow);
      // Read only for a flow to one of our Services, and only its entries parsed: a busy node's table is long.
      return server && explainServicePath(proxy.desired, await proxy.connectionTable(server.service), flow);
    },
  });
}

/**
 * The proxy's sync: the model of the cluster, then each stage in turn (node setup and read back, IPVS, VIPs, ipsets
 * and chains, bridge hairpin, health check servers), every failure joined into one.
 */
class ProxySync {
  /** The Services' virtual servers as last computed, by IPVS service id. */
  desired: ReadonlyMap<string, DesiredVirtualServer> = new Map();
  report: ProxySyncReport | undefined;
  readonly #ctx: PluginContext;
  readonly #sources: ProxySources;
  readonly #modelOptions: ModelOptions;
  readonly #modelCache: ProxyModelCache = new WeakMap();
  readonly #gracefulPeriodMs: number;
  readonly #host: HostStage;
  readonly #vips: VipStage;
  readonly #ipvs: IpvsStage;
  readonly #firewall: FirewallStage;
  readonly #hairpin: HairpinStage;
  readonly #healthChecks: HealthCheckServers;
  readonly #warnings: SyncWarnings;
  readonly #metrics: ProxyMetrics;
  readonly #dataplane: Dataplane;
  #requestSync: ((reason: string) => void) | undefined;
  #drainTimer: NodeJS.Timeout | undefined;

  constructor(ctx: PluginContext, deps: ProxyControllerDeps, options: ResolvedProxyIpvsOptions) {
    const families = enabledFamilies(options);
    if (families.length === 0) throw new Error('proxy: enableIpv4 and enableIpv6 are both false');
    // --strict-external-ip-validation: which externalIPs and LoadBalancer IPs may be programmed; undefined, all of them.
    const validation = strictServiceAddressRanges(options);
    const excluded = parseCidrs(options.excludedCidrs);
    parseCidrs(options.podCidrs);
    const isExcluded = (address: string) => inCidrs(address, excluded);
    const common = { runner: deps.runner, ...(options.netns !== undefined && { netns: options.netns }), timeoutMs: options.commandTimeoutMs };
    const dataplane = new Dataplane({ ...common, families, iptablesBackend: options.iptablesBackend });

    this.#ctx = ctx;
    this.#dataplane = dataplane;
    this.#sources = deps.sources;
    this.#modelOptions = {
      families,
      nodePortBindOnAllIp: options.nodePortBindOnAllIp,
      serviceProxyName: options.serviceProxyName,
      hairpinMode: options.hairpinMode,
      ...(validation && { validation }),
    };
    this.#gracefulPeriodMs = options.gracefulPeriodMs;
    this.#host = new HostStage(dataplane, options);
    this.#vips = new VipStage(dataplane, families, isExcluded);
    this.#ipvs = new IpvsStage(dataplane.ipvs, {
      isExcluded,
      gracefulPeriodMs: options.gracefulTermination ? options.gracefulPeriodMs : 0,
      deleteConntrack: (filter) => dataplane.deleteConntrack(filter),
    });
    this.#firewall = new FirewallStage(dataplane, families, options, ctx.nodeName);
    this.#hairpin = new HairpinStage(common, ctx.logger);
    this.#healthChecks = new HealthCheckServers(options.healthCheckBindAddress, ctx.logger);
    this.#warnings = new SyncWarnings((namespace, name, reason, message) => deps.sources.warnService(namespace, name, reason, message));
    this.#metrics = new ProxyMetrics(ctx.metrics.registry, () => dataplane.ipvs.stats(), () => this.desired, (error) =>
      ctx.logger.warn({ err: error }, 'proxy: could not read the IPVS statistics; the per-Service series are missing from this scrape'),
    );
  }

  /** IPVS's connection table: which real server each client connection went to. */
  connectionTable(virtual: IpvsServiceKey) {
    return this.#dataplane.ipvsConnections.connectionTable(virtual);
  }

  /** Lets the sync ask for the next one while real servers drain. */
  attach(requestSync: (reason: string) => void): void {
    this.#requestSync = requestSync;
  }

  async detach(): Promise<void> {
    this.#requestSync = undefined;
    clearTimeout(this.#drainTimer);
    await this.#healthChecks.close();
  }

  async run({ reason, full: fullSync, progress, signal, driftRepaired }: SyncContext): Promise<void> {
    if (!this.#sources.hasSynced()) throw new Error('informer caches have not synced: refusing to program IPVS from an incomplete view');
    const started = performance.now();
    const full = fullSync || !this.#vips.known;
    const failures = new SyncFailures();
    this.#warnings.beginSync();
    if (full) {
      await this.#host.configure(failures);
      await this.#vips.readBack(failures);
      await this.#host.readLocalAddresses(failures);
    }
    progress();
    signal.throwIfAborted();

    const model = await this.#model(failures, progress);
    const ipvs = await failures.attempt('ipvs', () => this.#ipvs.apply(model, failures, this.#warnings, { full }));
    if (ipvs) {
      driftRepaired('ipvs_service', ipvs.drift.services);
      driftRepaired('ipvs_destination', ipvs.drift.destinations);
    }
    progress();
    signal.throwIfAborted();

    await this.#vips.reconcile(model, failures);
    const firewall = await this.#firewall.reconcile(model, { full, localAddresses: this.#host.localAddresses, node: this.#sources.node() }, failures);
    driftRepaired('chain', firewall.chain);
    driftRepaired('ipset', firewall.ipset);
    await this.#hairpin.reconcile(model, failures);
    for (const [owner, error] of await this.#healthChecks.reconcile(model.healthChecks)) {
      failures.add(`service/${owner}`, error);
      this.#warnings.warn(owner, 'HealthCheckNodePortFailed', messageOf(error));
    }
    this.#warnings.endSync();

    this.#record(reason, model, ipvs, performance.now() - started, failures.size);
    this.#pollWhileDraining();
    failures.throwIfAny(PROXY_CONTROLLER);
  }

  /** The model of the cluster as the informers see it now; its problems are failures and Warnings of their Services. */
  async #model(failures: SyncFailures, progress: () => void): Promise<ProxyModel> {
    const sources = this.#sources;
    const inputs = { services: sources.services(), slicesFor: sources.slicesFor, node: sources.node(), nodeName: this.#ctx.nodeName, localAddresses: this.#host.localAddresses };
    // The cache is filled a slice of Services at a time, yielding in between, so that a first sync of a large cluster
    // leaves the event loop to health probes; the whole model then comes from the cache.
    for (let start = 0; start < inputs.services.length; start += WARM_SLICE) {
      buildProxyModel({ ...inputs, services: inputs.services.slice(start, start + WARM_SLICE) }, this.#modelOptions, this.#modelCache);
      await yieldToEventLoop();
      progress();
    }
    const model = buildProxyModel(inputs, this.#modelOptions, this.#modelCache);
    this.desired = model.virtualServers;
    for (const problem of model.problems) {
      failures.add(`service/${problem.owner}`, new Error(`${problem.reason}: ${problem.message}`));
      this.#warnings.warn(problem.owner, problem.reason, problem.message);
    }
    for (const refusal of model.refused) this.#warnings.warn(refusal.owner, refusal.reason, refusal.message);
    for (const problem of model.nodeProblems) failures.add(`node/${this.#ctx.nodeName}`, new Error(problem));
    return model;
  }

  #record(reason: string, model: ProxyModel, ipvs: IpvsApplied | undefined, totalMs: number, failures: number): void {
    this.#metrics.ipvsServices.set(ipvs?.virtualServers ?? model.virtualServers.size);
    this.#metrics.syncTime.observe(totalMs / 1000);
    this.report = {
      reason,
      virtualServers: model.virtualServers.size,
      ipvsOperations: ipvs?.operations ?? 0,
      ipvsStateFrom: ipvs?.stateFrom,
      ipvsSaveMs: Math.round(ipvs?.saveMs ?? 0),
      ipvsRestoreMs: Math.round(ipvs?.restoreMs ?? 0),
      totalMs: Math.round(totalMs),
      draining: this.#ipvs.draining,
      conntrackDeleted: ipvs?.conntrackDeleted ?? 0,
    };
    this.#ctx.logger.debug({ ...this.report, services: model.services, failures }, 'proxy sync applied');
  }

  /** While real servers drain, the next sync comes soon, whatever else asks for one. */
  #pollWhileDraining(): void {
    clearTimeout(this.#drainTimer);
    const request = this.#requestSync;
    if (this.#ipvs.draining === 0 || !request) return;
    this.#drainTimer = setTimeout(() => request('graceful termination'), Math.min(DRAIN_POLL_MS, this.#gracefulPeriodMs));
    this.#drainTimer.unref();
  }
}
