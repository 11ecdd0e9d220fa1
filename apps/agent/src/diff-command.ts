import { randomBytes } from 'node:crypto';
import { pino, type Logger } from 'pino';
import { messageOf } from '@kube-router/controller';
import { KubeServices, type KubeContext } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import { addNetns, DEFAULT_COMMAND_TIMEOUT_MS, deleteNetns, DryRunRunner, ExecRunner } from '@kube-router/netfilter';
import type { IptablesBackend } from '@kube-router/netfilter';
import { createNetpolIptablesPlugin } from '@kube-router/netpol-iptables';
import { createNetpolNftablesPlugin, TABLES } from '@kube-router/netpol-nftables';
import { createAgent } from './agent.js';
import { defaultCatalog, firewallOptions, nftablesFirewallOptions } from './catalog.js';
import type { AgentConfig } from './config.js';
import { diffSnapshots, formatChanges } from './diff-print.js';
import { loadScratch, readKernel, type ScratchScope } from './diff-scratch.js';
import { unsupportedSettings } from './feature-support.js';
import { createLogger } from './logging.js';
import type { AgentEnvironment, CliDependencies } from './run-cli.js';
import { cliOutput, parseCommandLine, unsupportedMessage } from './cli-output.js';

/** `kube-router diff`'s exit codes, as diff(1) has them: 0 no difference, 1 a difference, 2 bad flags or a failure. */
export const DIFF_EXIT = { same: 0, different: 1, trouble: 2 } as const;

/** What the features this command does not preview are called in its first line. */
const NOT_PREVIEWED: Readonly<Record<string, string>> = {
  'service-proxy': 'Service proxy rules (--run-service-proxy: IPVS services, or the nftables proxy tables)',
  router: 'routes (--run-router)',
  loadbalancer: 'LoadBalancer IPs (--run-loadbalancer)',
};

/**
 * `kube-router diff [the agent's flags]`: what one sync of the firewall would change in this node's kernel, without
 * changing it. The node's filter tables, ipsets and the nftables backend's tables are copied into a scratch network
 * namespace (`krt-diff-...`); one full sync runs there, against the cluster as the agent sees it; the copy before and
 * after the sync is compared object by object. The kernel spells both sides, so a rule written again unchanged is no
 * difference. Every command goes through a DryRunRunner, which lets only reads reach the node. Differences go to
 * stdout; the first line on stderr says what is and is not previewed.
 */
export async function runDiff(argv: readonly string[], deps: CliDependencies = {}): Promise<number> {
  const { stdout, stderr } = cliOutput(deps);
  const flags = parseCommandLine(argv, deps);
  if (!flags.ok) return flags.exitCode === 0 ? DIFF_EXIT.same : DIFF_EXIT.trouble;
  const { config } = flags;
  const refuse = (message: string) => {
    stderr(`kube-router diff: ${message}\n`);
    return DIFF_EXIT.trouble;
  };
  if (config.cleanupConfig) return refuse('--cleanup-config removes rules; diff only previews a sync: drop one of them');
  const unsupported = unsupportedSettings(config, flags.values, defaultCatalog);
  if (unsupported.length > 0) return refuse(unsupportedMessage(unsupported));

  const backend = config.firewall.useNftables ? 'nftables' : 'iptables';
  const skipped = Object.entries(NOT_PREVIEWED)
    .filter(([feature]) => config.features[feature as keyof AgentConfig['features']])
    .map(([, what]) => what);
  stderr(
    `kube-router diff: ${config.features.firewall ? `firewall (netpol-${backend}) previewed` : 'firewall disabled, nothing previewed'}; ` +
      `BGP paths are not previewed${skipped.length > 0 ? `; not previewed either: ${skipped.join(', ')}` : ''}\n`,
  );
  if (!config.features.firewall) return DIFF_EXIT.same;

  // Log lines go to stderr, so that stdout holds the differences alone; at -v 0 only warnings and worse.
  const quiet = config.logging.level === 'info' ? { ...config, logging: { ...config.logging, level: 'warn' as const } } : config;
  const logger = createLogger(quiet, deps.logDestination ?? pino.destination({ dest: 2, sync: true }));
  try {
    const changes = await previewFirewall(config, deps, logger);
    stdout(changes.text);
    if (changes.error) return refuse(changes.error);
    return changes.text === '' ? DIFF_EXIT.same : DIFF_EXIT.different;
  } catch (error) {
    return refuse(messageOf(error));
  }
}

interface Preview {
  readonly text: string;
  /** Why the sync failed: what it would change is shown, and the diff exits with trouble. */
  readonly error?: string;
}

async function previewFirewall(config: AgentConfig, deps: CliDependencies, logger: Logger): Promise<Preview> {
  const scratch = `krt-diff-${randomBytes(3).toString('hex')}`;
  const exec = new ExecRunner({ logger });
  const guard = new DryRunRunner(exec, { scratchNetns: scratch, reason: 'kube-router diff changes nothing in the kernel' });
  const flagged = config.firewall.useNftables ? nftablesFirewallOptions(config, scratch) : firewallOptions(config, scratch);
  // The drop log reads live packets of the node; a preview of one sync has none to read.
  const options = { ...flagged, ...('dropLog' in flagged && { dropLog: false }) };
  const plugin = config.firewall.useNftables ? createNetpolNftablesPlugin({ runner: guard }) : createNetpolIptablesPlugin({ runner: guard });
  const resolved = options as { iptablesBackend?: IptablesBackend; commandTimeoutMs?: number };
  const scope: ScratchScope = {
    iptablesBackend: resolved.iptablesBackend ?? 'default',
    // Both backends remove the other's objects: the nftables tables are read by either.
    nftTables: Object.values(TABLES).map((table) => `${table.family} ${table.name}`),
    timeoutMs: resolved.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
  };

  const node = await readKernel(guard, undefined, scope);
  // Creating and deleting a namespace touches no rule of the node; it runs outside the guard, which refuses it.
  await addNetns(exec, scratch);
  // Ctrl-C or a SIGTERM mid-way still removes the scratch namespace before the process ends.
  const onSignal = () => void deleteNetns(exec, scratch).finally(() => process.exit(DIFF_EXIT.trouble));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await loadScratch(guard, scratch, node, scope);
    const before = await readKernel(guard, scratch, scope);
    const outcome = await syncOnce(config, deps, logger, { plugin, options });
    const after = await readKernel(guard, scratch, scope);
    const text = formatChanges(diffSnapshots(before, after));
    if (guard.refused.length > 0) return { text, error: `refused to run commands that would change the node: ${guard.refused.join('; ')}` };
    if (!outcome.ok) return { text, error: `the sync failed, so the preview may be incomplete: ${messageOf(outcome.error)}` };
    return { text };
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await deleteNetns(exec, scratch).catch((error: unknown) => logger.error({ err: error, netns: scratch }, 'could not delete the scratch namespace'));
  }
}

/** One initial (full) sync of the firewall controller against the cluster, wired as the agent wires it. */
async function syncOnce(
  config: AgentConfig,
  deps: CliDependencies,
  logger: Logger,
  entry: { plugin: ReturnType<typeof createNetpolIptablesPlugin> | ReturnType<typeof createNetpolNftablesPlugin>; options: object },
): Promise<{ ok: boolean; error?: unknown }> {
  const metrics = new AgentMetrics({ collectDefaultMetrics: false });
  const environment: AgentEnvironment = (await deps.environment?.(config, logger, metrics)) ?? {};
  const aborter = new AbortController();
  try {
    const agent = await createAgent({
      plugins: [entry as never],
      options: { nodeName: config.nodeName, health: false, metrics: false },
      services: (environment.services ?? []).map(([key, service]) =>
        key === KubeServices ? ([key, withoutEvents(service as KubeContext)] as const) : ([key, service] as const),
      ),
      readinessChecks: environment.readinessChecks ?? {},
      metrics,
      logger,
    });
    const [controller] = agent.controllers;
    if (!controller) throw new Error('the firewall plugin made no controller');
    // Events only request syncs, which this one-shot run never schedules.
    await controller.start({ requestSync: () => undefined, signal: aborter.signal });
    try {
      await environment.beforeFirstSync?.();
      return await controller.runObservedSync('initial');
    } finally {
      aborter.abort();
      await controller.stop();
    }
  } finally {
    await environment.close?.();
  }
}

/**
 * The Kubernetes context with an event recorder that records nothing: a preview must not tell the cluster that a
 * policy failed to program (those Warning events are the agent's to post, for what it really did).
 */
function withoutEvents(kube: KubeContext): KubeContext {
  const silent = new Set<PropertyKey>(['record', 'warning', 'normal']);
  const events = new Proxy(kube.events, {
    get(target, property) {
      if (silent.has(property)) return () => Promise.resolve();
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { ...kube, events };
}
