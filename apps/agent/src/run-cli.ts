import type { DestinationStream, Logger } from 'pino';
import type { ReadinessCheck } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import { runningCommands } from '@kube-router/netfilter';
import { createAgent, type Agent, type ServiceEntry } from './agent.js';
import { AssemblyError } from './assembly.js';
import { registerBuildInfo } from './build-info.js';
import { defaultCatalog, MissingFeatureError, pluginsForConfig, type PluginCatalog } from './catalog.js';
import { cleanupAll } from './cleanup.js';
import { runDiff } from './diff-command.js';
import { runExplain } from './explain-command.js';
import type { AgentConfig } from './config.js';
import { unsupportedSettings } from './feature-support.js';
import { createLogger } from './logging.js';
import { guardProcess } from './process-guard.js';
import { cliOutput, parseCommandLine, unsupportedMessage } from './cli-output.js';

/** What the Kubernetes wiring hands the agent: services for the plugins and readiness conditions. */
export interface AgentEnvironment {
  services?: readonly ServiceEntry[];
  readinessChecks?: Readonly<Record<string, ReadinessCheck>>;
  /** Runs after the controllers started and before their first sync (waits for the informer caches). */
  beforeFirstSync?: () => Promise<void>;
  close?(): Promise<void>;
}

export interface CliDependencies {
  catalog?: PluginCatalog;
  /**
   * Connects to the cluster (--kubeconfig, --master, --cache-sync-timeout) and returns what the plugins need. The kube
   * package fills this seam; without it the agent runs with no Kubernetes services.
   */
  environment?: (config: AgentConfig, logger: Logger, metrics: AgentMetrics) => Promise<AgentEnvironment>;
  env?: NodeJS.ProcessEnv;
  /** Where log lines go (JSON, or text with --log-format=text). Default stdout. */
  logDestination?: DestinationStream;
  /**
   * Installs the unhandled-rejection and uncaught-exception handlers (see guardProcess) while the agent runs.
   * Default true; in-process tests that run several CLIs may turn it off.
   */
  guardProcess?: boolean;
  stdout?: (text: string) => void;
  stderr?: (text: string) => void;
  /** Called once the agent runs (servers bound, controllers started), e.g. to print its URLs. */
  onStarted?: (agent: Agent) => void;
}

/** Exit codes: 0 clean stop or help, 1 runtime failure, 2 bad flags or a bad assembly. */
export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

/**
 * The kube-router command: parses the flags, refuses what this build cannot do, assembles the enabled features'
 * plugins, starts the agent and runs until SIGTERM or SIGINT, then stops the controllers and the servers. With
 * --cleanup-config it runs every plugin's cleanup instead and exits. Resolves with the process exit code.
 */
export async function runCli(argv: readonly string[], deps: CliDependencies = {}): Promise<number> {
  if (argv[0] === 'diff') return runDiff(argv.slice(1), deps);
  if (argv[0] === 'explain') return runExplain(argv.slice(1), deps);
  const { stderr } = cliOutput(deps);
  const flags = parseCommandLine(argv, deps);
  if (!flags.ok) return flags.exitCode;
  const { config } = flags;
  const catalog = deps.catalog ?? defaultCatalog;
  const logger = createLogger(config, deps.logDestination);
  const refuse = (error: Error, code: number): number => {
    logger.fatal({ err: error }, error.message);
    stderr(`kube-router: ${error.message}\n`);
    return code;
  };
  logger.info(
    { nodeName: config.nodeName, from: config.nodeNameSource },
    `node name ${config.nodeName} (from ${config.nodeNameSource}; precedence: --hostname-override, NODE_NAME, host name)`,
  );

  const unsupported = unsupportedSettings(config, flags.values, catalog);
  if (unsupported.length > 0) return refuse(new Error(unsupportedMessage(unsupported)), EXIT.usage);

  if (config.cleanupConfig) {
    const report = await cleanupAll(config, catalog, logger);
    if (report.error) return refuse(report.error, EXIT.failure);
    logger.info({ cleaned: report.cleaned, nothingToClean: report.nothingToClean }, 'cleanup done');
    return EXIT.ok;
  }

  let plugins;
  try {
    plugins = pluginsForConfig(config, catalog);
  } catch (error) {
    if (error instanceof MissingFeatureError) return refuse(error, EXIT.usage);
    // A plugin's options could not be built from the flags (an unreadable --peer-router-passwords-file): a clean
    // refusal naming the flag, never an unhandled rejection.
    return refuse(error instanceof Error ? error : new Error(String(error)), EXIT.failure);
  }

  const unguard = deps.guardProcess === false ? () => undefined : guardProcess(logger);
  try {
    return await runAgent(config, plugins, deps, logger, refuse);
  } finally {
    unguard();
  }
}

async function runAgent(
  config: AgentConfig,
  plugins: ReturnType<typeof pluginsForConfig>,
  deps: CliDependencies,
  logger: Logger,
  refuse: (error: Error, code: number) => number,
): Promise<number> {
  // Created here rather than by the agent so that the environment's informers report on the same registry.
  const metrics = new AgentMetrics();
  registerBuildInfo(metrics.registry);
  let environment: AgentEnvironment = {};
  try {
    environment = (await deps.environment?.(config, logger, metrics)) ?? {};
  } catch (error) {
    return refuse(asError(error, 'cannot set up the Kubernetes environment'), EXIT.failure);
  }

  const closeEnvironment = async () => {
    try {
      await environment.close?.();
    } catch (error) {
      logger.error({ err: error }, 'closing the Kubernetes environment failed');
    }
  };

  let agent;
  try {
    agent = await createAgent({
      plugins,
      options: {
        nodeName: config.nodeName,
        health: config.health.port === 0 ? false : { addr: config.health.addr, port: config.health.port },
        metrics: config.metrics.port === 0 ? false : config.metrics,
        healthGraceMs: config.health.graceMs,
        healthWindowsMs: config.health.windowsMs,
      },
      services: environment.services ?? [],
      readinessChecks: environment.readinessChecks ?? {},
      ...(environment.beforeFirstSync && { beforeFirstSync: environment.beforeFirstSync }),
      metrics,
      logger,
    });
  } catch (error) {
    await closeEnvironment();
    return refuse(asError(error, 'cannot assemble the agent'), error instanceof AssemblyError ? EXIT.usage : EXIT.failure);
  }

  const signalled = waitForSignal(logger);
  const starting = agent.start().then(() => 'started' as const);
  let first: NodeJS.Signals | 'started';
  try {
    // A signal during the start (the cache wait can take --cache-sync-timeout) stops at once, not after it.
    first = await Promise.race([starting, signalled.promise]);
  } catch (error) {
    signalled.dispose();
    await closeEnvironment();
    return refuse(asError(error, 'cannot start the agent'), EXIT.failure);
  }

  if (first === 'started') deps.onStarted?.(agent);
  const signal = first === 'started' ? await signalled.promise : first;
  // Every running command (a hung iptables-restore) is killed with its process group now, and new ones fail at once:
  // the syncs being stopped end within moments instead of waiting out their command timeouts, and no child outlives
  // the agent holding the xtables lock that its replacement needs.
  const killed = runningCommands.halt('the agent is stopping');
  logger.info({ signal, killedCommands: killed }, 'stopping');
  try {
    const report = await agent.stop();
    await starting.catch(() => undefined);
    await closeEnvironment();
    return report.notStopped.length === 0 ? EXIT.ok : EXIT.failure;
  } finally {
    signalled.dispose();
    // What runs after the agent (a lab removing its namespaces) may run commands again.
    runningCommands.resume();
  }
}

/** The first SIGTERM or SIGINT starts a clean stop; a second one while stopping exits at once. */
function waitForSignal(logger: Logger): { promise: Promise<NodeJS.Signals>; dispose(): void } {
  let received = false;
  let resolve!: (signal: NodeJS.Signals) => void;
  const promise = new Promise<NodeJS.Signals>((r) => (resolve = r));
  let receivedAt = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    // Ctrl-C reaches the whole process group: a wrapper (npm, tsx) relays the same signal a moment later. Only a
    // signal sent well after the first one asks to skip the clean stop.
    if (received && performance.now() - receivedAt < 2_000) return;
    if (received) {
      logger.warn({ signal }, 'second signal while stopping: exiting now');
      process.exit(EXIT.failure);
    }
    received = true;
    receivedAt = performance.now();
    resolve(signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return {
    promise,
    dispose() {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
    },
  };
}

function asError(error: unknown, context: string): Error {
  return error instanceof Error ? error : new Error(`${context}: ${String(error)}`);
}
