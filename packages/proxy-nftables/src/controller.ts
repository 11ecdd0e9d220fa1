import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { createSyncController, messageOf, SyncFailures, SyncWarnings } from '@kube-router/controller';
import type { Controller, PluginContext, ServiceFlow, ServicePath, SyncContext } from '@kube-router/controller';
import { HealthCheckServers, nodePodCidrs, parseCidr, strictServiceAddressRanges } from '@kube-router/kube';
import { isNftRefusal, listConntrackEntries, Nft, nftTableLock } from '@kube-router/netfilter';
import type { CommandRunner, IpFamily } from '@kube-router/netfilter';
import { deleteStaleFlow } from './conntrack.js';
import { explainServicePath, servicePortOf } from './explain.js';
import { ProxyNftablesMetrics } from './metrics.js';
import { buildProxyModel, createModelCache } from './model.js';
import type { ModelOptions, ProxyModel, ServicePortPlan } from './model.js';
import { TABLES } from './names.js';
import { enabledFamilies } from './options.js';
import type { ResolvedProxyNftablesOptions } from './options.js';
import { createRenderCache, renderTable } from './render.js';
import type { RenderOptions } from './render.js';
import { fullScript } from './script.js';
import { staleFlows } from './stale-flows.js';
import { STALE_CHAIN_DELAY_MS, TableWriter } from './writer.js';
import type { WriteReport } from './writer.js';

export const PROXY_CONTROLLER = 'proxy';

/** Services computed or rendered between two yields to the event loop. */
const WARM_SLICE = 500;

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

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

export interface ProxyNftablesDeps {
  readonly sources: ProxySources;
  readonly runner: CommandRunner;
}

/** What the last sync did, for logs, tests and the benchmark. */
export interface ProxyNftablesSyncReport {
  readonly reason: string;
  readonly full: boolean;
  readonly servicePorts: number;
  /** Per family: full, partial (only the changes) or unchanged (nothing written). */
  readonly writes: Partial<Record<IpFamily, WriteReport>>;
  readonly conntrackDeleted: number;
  readonly totalMs: number;
}

export interface ProxyNftablesController extends Controller {
  /** The last sync's report; undefined before the first. */
  lastSync(): ProxyNftablesSyncReport | undefined;
  /** The model the last sync programmed. */
  model(): ProxyModel | undefined;
  /**
   * How a flow to a Service address is carried, from the model the last sync programmed and conntrack (for `kube-router
   * explain`); undefined when the destination is none of the proxy's Services, or before the first sync.
   */
  explainServiceFlow(flow: ServiceFlow): Promise<ServicePath | undefined>;
}

export function createProxyNftablesController(ctx: PluginContext, deps: ProxyNftablesDeps, options: ResolvedProxyNftablesOptions): ProxyNftablesController {
  const proxy = new ProxyNftablesSync(ctx, deps, options);
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
    // The tables stay when the agent stops: a restarted agent adopts them and Services keep answering meanwhile.
    async stop() {
      unsubscribe?.();
      unsubscribe = undefined;
      await proxy.detach();
    },
  });
  async function explainServiceFlow(flow: ServiceFlow): Promise<ServicePath | undefined> {
    const model = proxy.model;
    const matched = model && servicePortOf(model, flow, options.nodePortBindOnAllIp);
    if (!matched) return undefined;
    const entries = await listConntrackEntries(
      deps.runner,
      { protocol: matched.plan.protocol, family: matched.plan.family, originalDestination: flow.destination, originalPort: flow.port },
      { ...(options.netns !== undefined && { netns: options.netns }), timeoutMs: options.commandTimeoutMs },
    );
    return explainServicePath(matched, entries, flow);
  }
  return Object.assign(controller, { lastSync: () => proxy.report, model: () => proxy.model, explainServiceFlow });
}

/** Splits CIDRs by family, canonical. */
function cidrsByFamily(cidrs: readonly string[]): Record<IpFamily, string[]> {
  const out: Record<IpFamily, string[]> = { ipv4: [], ipv6: [] };
  for (const text of cidrs) {
    const parsed = parseCidr(text);
    if (parsed && !out[parsed.family].includes(parsed.cidr)) out[parsed.family].push(parsed.cidr);
  }
  return out;
}

class ProxyNftablesSync {
  report: ProxyNftablesSyncReport | undefined;
  model: ProxyModel | undefined;
  readonly #ctx: PluginContext;
  readonly #sources: ProxySources;
  readonly #runner: CommandRunner;
  readonly #options: ResolvedProxyNftablesOptions;
  readonly #modelOptions: ModelOptions;
  readonly #writers: ReadonlyMap<IpFamily, TableWriter>;
  readonly #healthChecks: HealthCheckServers;
  readonly #warnings: SyncWarnings;
  readonly #metrics: ProxyNftablesMetrics;
  /** What each family's table was last written from, for conntrack cleanup. */
  readonly #programmed = new Map<IpFamily, readonly ServicePortPlan[]>();
  // An event sync recomputes and re-renders only the Services that changed (the informers' objects are kept as is).
  readonly #modelCache = createModelCache();
  readonly #renderCache = createRenderCache();
  #requestSync: ((reason: string) => void) | undefined;
  #staleTimer: NodeJS.Timeout | undefined;

  constructor(ctx: PluginContext, deps: ProxyNftablesDeps, options: ResolvedProxyNftablesOptions) {
    const families = enabledFamilies(options);
    if (families.length === 0) throw new Error('proxy-nftables: enableIpv4 and enableIpv6 are both false');
    const validation = strictServiceAddressRanges(options);
    this.#ctx = ctx;
    this.#sources = deps.sources;
    this.#runner = deps.runner;
    this.#options = options;
    this.#modelOptions = {
      families,
      nodePortBindOnAllIp: options.nodePortBindOnAllIp,
      serviceProxyName: options.serviceProxyName,
      ...(validation && { validation }),
    };
    this.#writers = new Map(
      families.map((family) => {
        const { family: nftFamily, name } = TABLES[family];
        const nft = new Nft({
          runner: deps.runner,
          ...(options.netns !== undefined && { netns: options.netns }),
          timeoutMs: options.commandTimeoutMs,
          // Our tables alone: a firewall writing its own table never waits for us, nor we for it.
          lock: nftTableLock(`${nftFamily} ${name}`),
        });
        return [family, new TableWriter(nft, nftFamily, name)];
      }),
    );
    this.#healthChecks = new HealthCheckServers(options.healthCheckBindAddress, ctx.logger);
    this.#warnings = new SyncWarnings((namespace, name, reason, message) => deps.sources.warnService(namespace, name, reason, message));
    this.#metrics = new ProxyNftablesMetrics(ctx.metrics.registry);
  }

  attach(requestSync: (reason: string) => void): void {
    this.#requestSync = requestSync;
  }

  async detach(): Promise<void> {
    this.#requestSync = undefined;
    clearTimeout(this.#staleTimer);
    await this.#healthChecks.close();
  }

  async run({ reason, full, progress, signal, driftRepaired }: SyncContext): Promise<void> {
    if (!this.#sources.hasSynced()) throw new Error('informer caches have not synced: refusing to program the proxy from an incomplete view');
    const started = performance.now();
    const failures = new SyncFailures();
    this.#warnings.beginSync();
    const node = this.#sources.node();
    const inputs = { services: this.#sources.services(), slicesFor: this.#sources.slicesFor, node, nodeName: this.#ctx.nodeName };
    // The caches are filled a slice of Services at a time, yielding in between, so that a first sync of a large
    // cluster leaves the event loop to health probes; the whole model then comes from the caches.
    for (let start = 0; start < inputs.services.length; start += WARM_SLICE) {
      buildProxyModel({ ...inputs, services: inputs.services.slice(start, start + WARM_SLICE) }, this.#modelOptions, this.#modelCache);
      await yieldToLoop();
      progress();
    }
    const model = buildProxyModel(inputs, this.#modelOptions, this.#modelCache);
    for (const problem of model.problems) {
      failures.add(`service/${problem.owner}`, new Error(`${problem.reason}: ${problem.message}`));
      this.#warnings.warn(problem.owner, problem.reason, problem.message);
    }
    for (const refusal of model.refused) this.#warnings.warn(refusal.owner, refusal.reason, refusal.message);
    for (const problem of model.nodeProblems) failures.add(`node/${this.#ctx.nodeName}`, new Error(problem));
    const podCidrs = this.#podCidrs(node, failures);

    const writes: Partial<Record<IpFamily, WriteReport>> = {};
    let conntrackDeleted = 0;
    for (const [family, writer] of this.#writers) {
      signal.throwIfAborted();
      await failures.attempt(`table/${writer.table}`, () => writer.deleteStaleChains());
      const renderOptions: RenderOptions = {
        family,
        podCidrs: podCidrs[family],
        masqueradeAll: this.#options.masqueradeAll,
        nodePortBindOnAllIp: this.#options.nodePortBindOnAllIp,
      };
      const groups = [...model.groups[family]];
      for (let start = 0; start < groups.length; start += WARM_SLICE) {
        renderTable(new Map(groups.slice(start, start + WARM_SLICE)), [], renderOptions, this.#renderCache);
        await yieldToLoop();
      }
      const desired = renderTable(model.groups[family], model.nodePortAddresses[family], renderOptions, this.#renderCache);
      const written = await failures.attempt(`table/${writer.table}`, async () => {
        try {
          return { report: await writer.write(desired, full), plans: model.ports[family] };
        } catch (error) {
          if (!isNftRefusal(error)) throw error;
          return this.#writeWithoutRefused(writer, model, renderOptions, error, failures);
        }
      });
      progress();
      if (!written) {
        this.#metrics.syncFailures.inc();
        continue;
      }
      const { report, plans } = written;
      writes[family] = report;
      if (report.drift) {
        driftRepaired('chain', report.drift.chain);
        driftRepaired('map_element', report.drift.map_element);
        driftRepaired('set', report.drift.set);
      }
      const before = this.#programmed.get(family);
      this.#programmed.set(family, plans);
      if (before) conntrackDeleted += await this.#deleteStaleFlows(before, plans, failures);
      this.#metrics.servicePorts.set({ family }, plans.length);
    }

    for (const [owner, error] of await this.#healthChecks.reconcile(model.healthChecks)) {
      failures.add(`service/${owner}`, error);
      this.#warnings.warn(owner, 'HealthCheckNodePortFailed', messageOf(error));
    }
    this.#warnings.endSync();
    this.model = model;
    this.#record(reason, full, model, writes, conntrackDeleted, performance.now() - started, failures.size === 0);
    this.#scheduleStaleDeletion();
    failures.throwIfAny(PROXY_CONTROLLER);
  }

  /**
   * The kernel refused the table: find the Services it refuses, each checked alone (`nft -c`), and write the table
   * without them, so that one Service the model let through fails alone (a Warning, a joined failure) and every other
   * is programmed. When no Service is to blame, the refusal is the table's.
   */
  async #writeWithoutRefused(
    writer: TableWriter,
    model: ProxyModel,
    options: RenderOptions,
    refusal: unknown,
    failures: SyncFailures,
  ): Promise<{ report: WriteReport; plans: readonly ServicePortPlan[] }> {
    const plans = model.ports[options.family];
    const owners = [...new Set(plans.map((plan) => plan.owner))];
    const refused = new Set<string>();
    for (const owner of owners) {
      const alone = renderTable(
        plans.filter((plan) => plan.owner === owner),
        model.nodePortAddresses[options.family],
        options,
      );
      try {
        await writer.check(fullScript(writer.table, alone, { chains: new Set(), sets: new Set() }).script);
      } catch (error) {
        if (!isNftRefusal(error)) throw error;
        refused.add(owner);
        failures.add(`service/${owner}`, error);
        this.#warnings.warn(owner, 'ServiceNotProgrammed', `nftables refused the Service's rules: ${messageOf(error)}`);
      }
    }
    if (refused.size === 0) throw refusal;
    const kept = plans.filter((plan) => !refused.has(plan.owner));
    return { report: await writer.write(renderTable(kept, model.nodePortAddresses[options.family], options), true), plans: kept };
  }

  /** podCidrs, else the Node's (its annotations, else spec.podCIDRs): traffic from them is not masqueraded. */
  #podCidrs(node: V1Node | undefined, failures: SyncFailures): Record<IpFamily, string[]> {
    if (this.#options.podCidrs.length > 0) return cidrsByFamily(this.#options.podCidrs);
    try {
      return cidrsByFamily(nodePodCidrs(node));
    } catch (error) {
      failures.add(`node/${this.#ctx.nodeName}`, error);
      return { ipv4: [], ipv6: [] };
    }
  }

  async #deleteStaleFlows(before: readonly ServicePortPlan[], after: readonly ServicePortPlan[], failures: SyncFailures): Promise<number> {
    let deleted = 0;
    for (const flow of staleFlows(before, after)) {
      const count = await failures.attempt(`conntrack/${flow.originalDestination ?? 'nodeport'}:${flow.originalPort}`, () =>
        deleteStaleFlow(this.#runner, flow, { ...(this.#options.netns !== undefined && { netns: this.#options.netns }), timeoutMs: this.#options.commandTimeoutMs }),
      );
      deleted += count ?? 0;
    }
    if (deleted > 0) this.#metrics.conntrackDeleted.inc(deleted);
    return deleted;
  }

  #record(reason: string, full: boolean, model: ProxyModel, writes: Partial<Record<IpFamily, WriteReport>>, conntrackDeleted: number, totalMs: number, ok: boolean): void {
    const seconds = totalMs / 1000;
    this.#metrics.syncDuration.observe(seconds);
    (full ? this.#metrics.fullSyncDuration : this.#metrics.partialSyncDuration).observe(seconds);
    if (ok) this.#metrics.lastSync.setToCurrentTime();
    const all = [...model.ports.ipv4, ...model.ports.ipv6];
    this.#metrics.noLocalEndpoints.set({ traffic_policy: 'internal' }, all.filter((plan) => plan.internalLocal && plan.endpoints.hasAnyEndpoints && plan.endpoints.local.length === 0).length);
    this.#metrics.noLocalEndpoints.set(
      { traffic_policy: 'external' },
      all.filter((plan) => plan.externalLocal && plan.externallyAccessible && plan.endpoints.hasAnyEndpoints && plan.endpoints.local.length === 0).length,
    );
    this.report = { reason, full, servicePorts: all.length, writes, conntrackDeleted, totalMs: Math.round(totalMs) };
    this.#ctx.logger.debug({ ...this.report, services: model.services }, 'proxy sync applied');
  }

  /** Flushed chains are deleted by a sync a little later; ask for one rather than wait for the period. */
  #scheduleStaleDeletion(): void {
    clearTimeout(this.#staleTimer);
    const request = this.#requestSync;
    if (!request || ![...this.#writers.values()].some((writer) => writer.staleChains > 0)) return;
    this.#staleTimer = setTimeout(() => request('stale chains'), STALE_CHAIN_DELAY_MS + 100);
    this.#staleTimer.unref();
  }
}
