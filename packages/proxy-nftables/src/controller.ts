import type { V1Node } from '@kubernetes/client-node';
import { createSyncController, messageOf, SyncFailures, SyncWarnings } from '@kube-router/controller';
import type { Controller, PluginContext, ServiceFlow, ServicePath, SyncContext } from '@kube-router/controller';
import { enabledFamilies, HealthCheckServers, nodePodCidrs, parseCidr, strictServiceAddressRanges } from '@kube-router/kube';
import type { ServiceProxySources } from '@kube-router/kube';
import { isNftRefusal, listConntrackEntries, Mutex, Nft, nftTableLock } from '@kube-router/netfilter';
import type { CommandRunner, IpFamily } from '@kube-router/netfilter';
import { deleteStaleFlow } from './conntrack.js';
import { parseCounterListing, serviceTraffic } from './counters.js';
import type { ServiceTraffic } from '@kube-router/metrics';
import { explainServicePath, servicePortOf } from './explain.js';
import { ProxyNftablesMetrics } from './metrics.js';
import { buildProxyModel, createModelCache } from './model.js';
import type { ModelOptions, ProxyModel, ServicePortPlan } from './model.js';
import { TABLES } from './names.js';
import type { ResolvedProxyNftablesOptions } from './options.js';
import { createRenderCache, renderTable } from './render.js';
import type { Fragment, RenderOptions, TableState } from './render.js';
import { fullScript } from './script.js';
import { staleFlowKey, staleFlows, stillStale } from './stale-flows.js';
import type { StaleFlow } from './stale-flows.js';
import { STALE_CHAIN_DELAY_MS, TableWriter } from './writer.js';
import type { WriteReport } from './writer.js';

export const PROXY_CONTROLLER = 'proxy';

/** Services computed or rendered between two yields to the event loop. */
const WARM_SLICE = 500;

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Where the controller reads the cluster from: the agent's informers, or anything shaped like them. */
/** What the proxy reads of the cluster (kube's informers in the agent; a fake in unit tests and the bench). */
export type ProxySources = ServiceProxySources;

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
  /** Per family, an Nft that reads the counters at scrape time: a lock of its own, so a scrape never waits for a sync. */
  /** Reads the counters of both families' tables, apart from the writers' table locks: a scrape never waits for a sync. */
  readonly #counterReader: Nft;
  /** Per family, the table last written whole or in part: which Service address each counter counts. */
  readonly #counted = new Map<IpFamily, TableState>();
  readonly #healthChecks: HealthCheckServers;
  readonly #warnings: SyncWarnings;
  readonly #metrics: ProxyNftablesMetrics;
  /**
   * What each family's conntrack entries may come from, for their cleanup: the plans last written, and the last plans
   * of Services the kernel refused since (their flows are not purged as if the Services were deleted).
   */
  readonly #programmed = new Map<IpFamily, readonly ServicePortPlan[]>();
  /** UDP flows whose `conntrack -D` failed: tried again next sync (while still stale) rather than lost. */
  readonly #staleFlowsPending = new Map<IpFamily, ReadonlyMap<string, StaleFlow>>();
  /**
   * Services the kernel refused, by family, with the fragment it refused and why: left out of later syncs while their
   * fragment is the same object (the render cache keeps an unchanged Service's), so that one refused Service does not
   * make every sync check every Service with `nft -c` again.
   */
  readonly #refused = new Map<IpFamily, ReadonlyMap<string, { readonly fragment: Fragment; readonly error: unknown }>>();
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
    this.#counterReader = new Nft({ runner: deps.runner, ...(options.netns !== undefined && { netns: options.netns }), timeoutMs: options.commandTimeoutMs, lock: new Mutex() });
    this.#healthChecks = new HealthCheckServers(options.healthCheckBindAddress, ctx.logger);
    this.#warnings = new SyncWarnings((namespace, name, reason, message) => deps.sources.warnService(namespace, name, reason, message));
    this.#metrics = new ProxyNftablesMetrics(
      ctx.metrics.registry,
      () => this.#readTraffic(),
      (error) => ctx.logger.warn({ err: error }, 'proxy: could not read the per-Service counters; their series are missing from this scrape'),
    );
  }

  /**
   * kube-router's per-Service series from the kernel's counters: one `nft -j list counters table …` per family (not
   * the whole table). A family that cannot be read is left out and logged; the scrape goes on.
   */
  async #readTraffic(): Promise<ServiceTraffic[]> {
    const traffic: ServiceTraffic[] = [];
    for (const [family, writer] of this.#writers) {
      const written = this.#counted.get(family);
      if (!written) continue;
      try {
        const { stdout } = await this.#counterReader.run(['-j', 'list', 'counters', 'table', ...writer.table.split(' ')]);
        traffic.push(...serviceTraffic(written.counters, await parseCounterListing(stdout)));
      } catch (error) {
        this.#ctx.logger.warn({ err: error, table: writer.table }, 'proxy: could not read the per-Service counters; their series are missing from this scrape');
      }
    }
    return traffic;
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
      const warm = [...model.groups[family]];
      for (let start = 0; start < warm.length; start += WARM_SLICE) {
        renderTable(new Map(warm.slice(start, start + WARM_SLICE)), model.nodePortAddresses[family], renderOptions, this.#renderCache);
        await yieldToLoop();
      }
      const nodePortIps = model.nodePortAddresses[family];
      let groups = model.groups[family];
      let desired = renderTable(groups, nodePortIps, renderOptions, this.#renderCache);
      // Services refused before and unchanged since stay out, failing again, without asking the kernel again.
      const stillRefused = new Map([...(this.#refused.get(family) ?? [])].filter(([owner, known]) => desired.fragments.get(owner) === known.fragment));
      for (const [owner, known] of stillRefused) {
        failures.add(`service/${owner}`, known.error);
        this.#warnings.warn(owner, 'ServiceNotProgrammed', `nftables refused the Service's rules: ${messageOf(known.error)}`);
      }
      if (stillRefused.size > 0) {
        groups = new Map([...groups].filter(([owner]) => !stillRefused.has(owner)));
        desired = renderTable(groups, nodePortIps, renderOptions, this.#renderCache);
      }
      const accepted = writer.written;
      const written = await failures.attempt(`table/${writer.table}`, async () => {
        try {
          return { report: await writer.write(desired, full), refused: new Map<string, { fragment: Fragment; error: unknown }>() };
        } catch (error) {
          if (!isNftRefusal(error)) throw error;
          return this.#writeWithoutRefused(writer, groups, desired, accepted, nodePortIps, renderOptions, error, failures);
        }
      });
      progress();
      if (!written) {
        this.#metrics.syncFailures.inc();
        continue;
      }
      const { report } = written;
      if (writer.written) this.#counted.set(family, writer.written);
      const refused = new Map([...stillRefused, ...written.refused]);
      this.#refused.set(family, refused);
      const plans = [...groups].flatMap(([owner, group]) => (refused.has(owner) ? [] : group));
      writes[family] = report;
      if (report.drift) {
        driftRepaired('chain', report.drift.chain);
        driftRepaired('map_element', report.drift.map_element);
        driftRepaired('set', report.drift.set);
      }
      const before = this.#programmed.get(family);
      // A refused Service is not a deleted one: its flows are left as they were.
      const flowPlans = [...plans, ...(before ?? []).filter((plan) => refused.has(plan.owner))];
      this.#programmed.set(family, flowPlans);
      conntrackDeleted += await this.#deleteStaleFlows(family, before, flowPlans, failures);
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
   * is programmed. Only Services whose fragment differs from the table the kernel last accepted are checked. When no
   * Service is to blame, the refusal is the table's.
   */
  async #writeWithoutRefused(
    writer: TableWriter,
    groups: ReadonlyMap<string, readonly ServicePortPlan[]>,
    desired: TableState,
    accepted: TableState | undefined,
    nodePortIps: readonly string[],
    options: RenderOptions,
    refusal: unknown,
    failures: SyncFailures,
  ): Promise<{ report: WriteReport; refused: Map<string, { fragment: Fragment; error: unknown }> }> {
    const refused = new Map<string, { fragment: Fragment; error: unknown }>();
    for (const [owner, group] of groups) {
      const fragment = desired.fragments.get(owner);
      if (!fragment || (accepted && accepted.fragments.get(owner) === fragment)) continue;
      const alone = renderTable(new Map([[owner, group]]), nodePortIps, options, this.#renderCache);
      try {
        await writer.check(fullScript(writer.table, alone, { chains: new Set(), sets: new Set() }).script);
      } catch (error) {
        if (!isNftRefusal(error)) throw error;
        refused.set(owner, { fragment, error });
        failures.add(`service/${owner}`, error);
        this.#warnings.warn(owner, 'ServiceNotProgrammed', `nftables refused the Service's rules: ${messageOf(error)}`);
      }
    }
    if (refused.size === 0) throw refusal;
    const kept = new Map([...groups].filter(([owner]) => !refused.has(owner)));
    return { report: await writer.write(renderTable(kept, nodePortIps, options, this.#renderCache), true), refused };
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

  /**
   * Deletes the UDP flows that point at endpoints not serving any more (staleFlows), with those whose deletion failed
   * before. After a restart there is no earlier model to compare with: the entries to each UDP Service address are
   * listed instead, and those not answered by a serving endpoint go (kube-proxy's approach; NodePorts are not listed).
   */
  async #deleteStaleFlows(family: IpFamily, before: readonly ServicePortPlan[] | undefined, after: readonly ServicePortPlan[], failures: SyncFailures): Promise<number> {
    const flows = new Map<string, StaleFlow>();
    for (const [key, flow] of this.#staleFlowsPending.get(family) ?? []) if (stillStale(flow, after)) flows.set(key, flow);
    for (const flow of before ? staleFlows(before, after) : await this.#listedStaleFlows(after, failures)) flows.set(staleFlowKey(flow), flow);
    const failed = new Map<string, StaleFlow>();
    let deleted = 0;
    for (const [key, flow] of flows) {
      const count = await failures.attempt(`conntrack/${flow.originalDestination ?? 'nodeport'}:${flow.originalPort}`, () =>
        deleteStaleFlow(this.#runner, flow, this.#conntrackOptions()),
      );
      if (count === undefined) failed.set(key, flow);
      deleted += count ?? 0;
    }
    this.#staleFlowsPending.set(family, failed);
    if (deleted > 0) this.#metrics.conntrackDeleted.inc(deleted);
    return deleted;
  }

  /** The UDP flows to each Service address that no serving endpoint answers, from conntrack's listing. */
  async #listedStaleFlows(after: readonly ServicePortPlan[], failures: SyncFailures): Promise<StaleFlow[]> {
    const flows: StaleFlow[] = [];
    for (const plan of after) {
      if (plan.protocol !== 'udp') continue;
      const serving = new Set(plan.servingAddresses);
      for (const address of [plan.clusterIp, ...plan.externalIps, ...plan.loadBalancerIps]) {
        const entries = await failures.attempt(`conntrack/${address}:${plan.port}`, () =>
          listConntrackEntries(this.#runner, { protocol: 'udp', family: plan.family, originalDestination: address, originalPort: plan.port }, this.#conntrackOptions()),
        );
        for (const entry of entries ?? []) {
          if (!serving.has(entry.reply.source)) flows.push({ family: plan.family, originalDestination: address, originalPort: plan.port, replySource: entry.reply.source });
        }
      }
    }
    return flows;
  }

  #conntrackOptions(): { netns?: string; timeoutMs: number } {
    return { ...(this.#options.netns !== undefined && { netns: this.#options.netns }), timeoutMs: this.#options.commandTimeoutMs };
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
