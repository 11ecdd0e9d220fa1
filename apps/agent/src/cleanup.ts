import type { Logger } from 'pino';
import { JoinedSyncError, type SyncFailure } from '@kube-router/controller';
import { AssemblyError, orderAssembly, parsePluginOptions, type PluginEntry } from './assembly.js';
import type { PluginCatalog, PluginFactory } from './catalog.js';
import type { AgentConfig } from './config.js';
import { FEATURES } from './flags.js';

export interface CleanupReport {
  /** Plugins whose cleanup ran and succeeded, in the order they ran. */
  cleaned: string[];
  /** Plugins without a cleanup hook: they own nothing on the node (lballoc writes only Service status). */
  nothingToClean: string[];
  /** Every failure, one per plugin (a plugin's own error may join several). Undefined when all succeeded. */
  error: JoinedSyncError | undefined;
}

/**
 * kube-router's --cleanup-config: runs the cleanup of every plugin of every feature of the build, whatever --run-*
 * says (a node that ran the proxy last week still has its rules), without Kubernetes. Plugins are cleaned up in
 * reverse creation order (a plugin before the plugins it requires, as a stop does), and every one is attempted: one
 * plugin's failure never keeps another's state on the node. Never throws.
 */
export async function cleanupAll(config: AgentConfig, catalog: PluginCatalog, logger: Logger): Promise<CleanupReport> {
  const failed: SyncFailure[] = [];
  const entries: PluginEntry[] = [];
  for (const feature of FEATURES) {
    const factory: PluginFactory | undefined = catalog[feature];
    if (!factory) continue;
    try {
      for (const entry of factory(config)) {
        // Two features may share a plugin; it cleans up once.
        if (!entries.some((known) => known.plugin === entry.plugin)) entries.push(entry);
      }
    } catch (error) {
      failed.push({ object: `feature ${feature}`, error });
    }
  }
  let ordered: PluginEntry[];
  try {
    ordered = orderAssembly(entries);
  } catch (error) {
    // A broken requirement must not keep the rest from being cleaned: clean in the catalog's order instead.
    const problems = error instanceof AssemblyError ? error.problems : [String(error)];
    logger.warn({ problems }, 'the plugins cannot be ordered; cleaning up in catalog order');
    ordered = entries;
  }

  const cleaned: string[] = [];
  const nothingToClean: string[] = [];
  for (const entry of [...ordered].reverse()) {
    const { plugin } = entry;
    if (typeof plugin.cleanup !== 'function') {
      nothingToClean.push(plugin.name);
      continue;
    }
    const parsed = parsePluginOptions(entry);
    if (!parsed.ok) {
      failed.push({ object: `plugin ${plugin.name}`, error: new Error(parsed.problems.join('; ')) });
      continue;
    }
    const log = logger.child({ controller: plugin.name });
    const startedAt = performance.now();
    try {
      await plugin.cleanup({ nodeName: config.nodeName, logger: log }, parsed.options);
      cleaned.push(plugin.name);
      log.info({ durationMs: Math.round(performance.now() - startedAt) }, 'cleaned up');
    } catch (error) {
      // Recorded whole under the plugin's name (add() would flatten a joined error and lose which plugin it was).
      failed.push({ object: `plugin ${plugin.name}`, error });
      log.error({ err: error }, 'cleanup failed');
    }
  }
  const error = failed.length > 0 ? new JoinedSyncError(failed, 'cleanup') : undefined;
  return { cleaned, nothingToClean, error };
}
