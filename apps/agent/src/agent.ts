import { pino, type Logger } from 'pino';
import {
  messageOf,
  servicePathExplainerKey,
  ServiceRegistry,
  SyncScheduler,
  type Controller,
  type PluginContext,
  type ServiceKey,
  type Services,
} from '@kube-router/controller';
import { HealthRegistry, type ReadinessCheck } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import { netpolExplainServiceKey } from '@kube-router/netpol';
import { AssemblyError, planAssembly, type PluginEntry } from './assembly.js';
import { resolveAgentOptions, type AgentOptions, type ResolvedAgentOptions } from './options.js';
import { startServers, type RunningServers } from './servers.js';
import { kernelFeatureReadinessCheck, toolReadinessCheck } from './tool-readiness.js';

/** A service the assembly starts with, such as the Kubernetes context; plugins look it up by key. */
export type ServiceEntry<T = unknown> = readonly [ServiceKey<T>, T];

export interface CreateAgentInput {
  plugins: readonly PluginEntry[];
  options: AgentOptions;
  /** Services provided before any plugin is created: the seam through which the Kubernetes wiring comes in. */
  services?: readonly ServiceEntry[];
  /** Readiness conditions of the agent itself, such as "informers have synced", next to each first sync. */
  readinessChecks?: Readonly<Record<string, ReadinessCheck>>;
  /** Default: JSON lines on stdout at level info. */
  logger?: Logger;
  /** The agent's metrics, when the environment registers on them before the agent exists (informer health). */
  metrics?: AgentMetrics;
  /**
   * Runs after every controller has started (so every informer a plugin needs exists) and before the first sync:
   * the Kubernetes wiring waits for its caches here, so that no first sync runs against an empty cache.
   */
  beforeFirstSync?: () => Promise<void>;
}

export interface StopReport {
  /** Controllers whose running sync or stop did not end within stopTimeoutMs, in stop order. */
  notStopped: string[];
}

export interface Agent {
  readonly options: ResolvedAgentOptions;
  readonly logger: Logger;
  readonly health: HealthRegistry;
  readonly metrics: AgentMetrics;
  readonly services: Services;
  /** In creation order: every controller after the controllers its plugin requires. */
  readonly controllers: readonly Controller[];
  /** Base URL of the health server once started (actual bound port), undefined when disabled. */
  readonly healthUrl: string | undefined;
  /** URL of the metrics endpoint once started (actual bound port, path included), undefined when disabled. */
  readonly metricsUrl: string | undefined;
  /** Starts the servers, then every controller, then every controller's scheduler. */
  start(): Promise<void>;
  /** Stops the schedulers in reverse creation order (each after its running sync), then closes the servers. */
  stop(): Promise<StopReport>;
}

/**
 * Assembles an agent: validates the plugins (names, requirements, cycles) and their options, then creates the
 * controllers in dependency order. A bad assembly rejects with an AssemblyError listing every problem.
 */
export async function createAgent(input: CreateAgentInput): Promise<Agent> {
  const { resolved, problems } = resolveAgentOptions(input.options);
  const planned = planAssembly(input.plugins, problems);

  const logger = input.logger ?? pino({ level: 'info' });
  const health = new HealthRegistry({
    defaultGraceMs: resolved.healthGraceMs,
    windowOverridesMs: resolved.healthWindowsMs,
  });
  const metrics = input.metrics ?? new AgentMetrics({ collectDefaultMetrics: resolved.collectDefaultMetrics });
  const services = new ServiceRegistry();
  for (const [key, service] of input.services ?? []) services.provide(key, service);
  for (const [name, check] of Object.entries(input.readinessChecks ?? {})) health.addReadinessCheck(name, check);

  const controllers: Controller[] = [];
  for (const { entry, options } of planned) {
    const { plugin } = entry;
    const ctx: PluginContext = {
      nodeName: resolved.nodeName,
      logger: logger.child({ controller: plugin.name }),
      metrics,
      health,
      services,
    };
    let controller: Controller;
    try {
      controller = await plugin.create(ctx, options);
    } catch (error) {
      throw new Error(`plugin ${plugin.name}: create failed: ${messageOf(error)}`, { cause: error });
    }
    const tools = plugin.tools?.(options) ?? [];
    if (tools.length > 0) health.addReadinessCheck(`${controller.name}/tools`, toolReadinessCheck(controller.name, tools, ctx.logger));
    const kernelFeatures = plugin.kernelFeatures?.(options) ?? [];
    if (kernelFeatures.length > 0) {
      health.addReadinessCheck(`${controller.name}/kernel`, kernelFeatureReadinessCheck(controller.name, kernelFeatures, ctx.logger));
    }
    controllers.push(controller);
  }

  // An override that names no check is almost always a typo, and it would silently leave the default window.
  const unknownWindows = Object.keys(resolved.healthWindowsMs).filter((name) => !health.status(name));
  if (unknownWindows.length > 0) {
    const known = controllers.map((c) => c.name).join(', ') || 'none';
    throw new AssemblyError(
      unknownWindows.map((name) => `health window override for ${name}, which is no health check (have: ${known})`),
    );
  }

  // For each controller, the controllers whose plugins require its plugin: they stop before it does.
  const indexOfPlugin = new Map(planned.map(({ entry }, index) => [entry.plugin.name, index]));
  const dependents = planned.map(() => [] as number[]);
  planned.forEach(({ entry }, index) => {
    for (const required of entry.plugin.requires ?? []) dependents[indexOfPlugin.get(required) as number]?.push(index);
  });

  return new AssembledAgent(resolved, logger, health, metrics, services, controllers, dependents, input.beforeFirstSync);
}

class AssembledAgent implements Agent {
  readonly #schedulers: SyncScheduler[];
  readonly #stopping = new AbortController();
  #servers: RunningServers | undefined;
  #startedControllers = 0;
  #state: 'created' | 'starting' | 'running' | 'stopped' = 'created';

  constructor(
    readonly options: ResolvedAgentOptions,
    readonly logger: Logger,
    readonly health: HealthRegistry,
    readonly metrics: AgentMetrics,
    readonly services: Services,
    readonly controllers: readonly Controller[],
    private readonly dependents: readonly (readonly number[])[],
    private readonly beforeFirstSync?: () => Promise<void>,
  ) {
    this.#schedulers = controllers.map((controller) => new SyncScheduler(controller, options.scheduler));
  }

  get healthUrl(): string | undefined {
    return this.#servers?.healthUrl;
  }

  get metricsUrl(): string | undefined {
    return this.#servers?.metricsUrl;
  }

  async start(): Promise<void> {
    if (this.#state !== 'created') throw new Error(`agent cannot start: it is ${this.#state}`);
    this.#state = 'starting';
    try {
      // Servers first: the kubelet probes from the moment the container runs, and /readyz explains what is pending.
      this.#servers = await startServers({
        health: this.options.health,
        metrics: this.options.metrics,
        healthRegistry: this.health,
        agentMetrics: this.metrics,
        logger: this.logger,
        explain: this.options.metrics && this.options.metrics.explain && this.services.has(netpolExplainServiceKey)
          ? {
              netpol: this.services.get(netpolExplainServiceKey),
              ...(this.services.has(servicePathExplainerKey) && { services: this.services.get(servicePathExplainerKey) }),
            }
          : undefined,
      });
      for (const [index, controller] of this.controllers.entries()) {
        const scheduler = this.#schedulers[index] as SyncScheduler;
        this.#startedControllers = index + 1;
        await controller.start({
          requestSync: (reason) => scheduler.requestSync(reason),
          signal: this.#stopping.signal,
        });
        if (this.#stopping.signal.aborted) return;
      }
      // A stop during the wait for caches (up to --cache-sync-timeout) must not wait for it to end.
      if (this.beforeFirstSync) await untilAborted(this.beforeFirstSync(), this.#stopping.signal);
      if (this.#stopping.signal.aborted) return;
      this.health.restartClocks();
      for (const scheduler of this.#schedulers) scheduler.start();
    } catch (error) {
      await this.stop();
      throw error;
    }
    this.#state = 'running';
    this.logger.info(
      {
        nodeName: this.options.nodeName,
        controllers: this.controllers.map((c) => c.name),
        healthUrl: this.healthUrl,
        metricsUrl: this.metricsUrl,
      },
      'agent started',
    );
  }

  async stop(): Promise<StopReport> {
    if (this.#state === 'stopped') return { notStopped: [] };
    this.#state = 'stopped';
    this.#stopping.abort(new Error('agent stopping'));
    const deadline = performance.now() + this.options.stopTimeoutMs;
    const notStopped: string[] = [];
    // No controller starts a sync (with an already aborted signal) while an earlier one is being waited for.
    for (const scheduler of this.#schedulers) scheduler.halt();
    // Every controller stops as soon as the controllers that require it have stopped, all under one deadline: a slow
    // controller holds back only what it depends on, and a leader with nothing depending on it (lballoc) releases
    // its Lease at once instead of after the others have used the budget up.
    const stops = new Map<number, Promise<void>>();
    const stop = (index: number): Promise<void> => {
      let stopping = stops.get(index);
      if (!stopping) {
        stopping = this.#stopAfterDependents(index, stop, deadline, notStopped);
        stops.set(index, stopping);
      }
      return stopping;
    };
    await Promise.all(Array.from({ length: this.#startedControllers }, (_, index) => stop(index)));
    await this.#servers?.close();
    this.logger.info({ notStopped }, 'agent stopped');
    return { notStopped };
  }

  async #stopAfterDependents(
    index: number,
    stop: (index: number) => Promise<void>,
    deadline: number,
    notStopped: string[],
  ): Promise<void> {
    await Promise.all((this.dependents[index] ?? []).filter((dependent) => dependent < this.#startedControllers).map(stop));
    const controller = this.controllers[index] as Controller;
    const log = this.logger.child({ controller: controller.name });
    const stopped = await withinDeadline((this.#schedulers[index] as SyncScheduler).stop(), deadline);
    if (stopped.ok) log.info('controller stopped');
    else if (stopped.timedOut) {
      notStopped.push(controller.name);
      log.error({ stopTimeoutMs: this.options.stopTimeoutMs }, 'controller did not stop in time; leaving it behind');
    } else {
      log.error({ err: stopped.error }, 'controller failed to stop cleanly');
    }
  }
}

/** Resolves when `work` settles or `signal` aborts, whichever comes first; rejects only with work's error. */
function untilAborted(work: Promise<unknown>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => resolve();
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        if (signal.aborted) resolve();
        else reject(error);
      },
    );
  });
}

type Settled = { ok: true } | { ok: false; timedOut: true } | { ok: false; timedOut: false; error: unknown };

async function withinDeadline(work: Promise<unknown>, deadline: number): Promise<Settled> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<Settled>((resolve) => {
    timer = setTimeout(() => resolve({ ok: false, timedOut: true }), Math.max(0, deadline - performance.now()));
  });
  try {
    return await Promise.race([
      work.then(
        (): Settled => ({ ok: true }),
        (error: unknown): Settled => ({ ok: false, timedOut: false, error }),
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
