import { existsSync } from 'node:fs';
import type { Logger } from 'pino';
import type { KernelFeature } from '@kube-router/controller';
import type { ReadinessCheck } from '@kube-router/healthcheck';
import { findExecutable } from '@kube-router/netfilter';

/** How long a lookup stands: readiness is probed every few seconds, and a tool installed later is seen within this. */
const RECHECK_MS = 10_000;

/**
 * A readiness check that fails while one of `needs` is missing, in the words `describe` gives the missing ones; the
 * missing ones are logged once, at creation, in one line. Once they are there (a package added to a running node, a
 * module loaded), the check passes within RECHECK_MS.
 */
function presenceCheck<T>(
  needs: readonly T[],
  isPresent: (need: T) => boolean,
  describe: (missing: readonly T[]) => { logLine: string; notReady: string; fields: Record<string, unknown> },
  logger: Logger,
  now: () => number,
): ReadinessCheck {
  const missingNow = () => needs.filter((need) => !isPresent(need));
  let missing = missingNow();
  let checkedAt = now();
  if (missing.length > 0) {
    const { logLine, fields } = describe(missing);
    logger.error(fields, logLine);
  }
  return () => {
    if (missing.length > 0 && now() - checkedAt >= RECHECK_MS) {
      missing = missingNow();
      checkedAt = now();
    }
    return missing.length === 0 ? undefined : describe(missing).notReady;
  };
}

/** The tools a plugin runs (its `tools`): not ready while one is not on PATH, naming each. */
export function toolReadinessCheck(
  controller: string,
  tools: readonly string[],
  logger: Logger,
  find: (name: string) => string | undefined = findExecutable,
  now: () => number = Date.now,
): ReadinessCheck {
  return presenceCheck(
    tools,
    (tool) => find(tool) !== undefined,
    (missing) => ({
      fields: { missing },
      logLine: `${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} not installed (not found on PATH): ${controller} cannot program the node, stays not ready and its syncs fail`,
      notReady: `${missing.join(', ')} not installed`,
    }),
    logger,
    now,
  );
}

/** The kernel features a plugin needs (its `kernelFeatures`): not ready while the running kernel lacks one, naming it. */
export function kernelFeatureReadinessCheck(
  controller: string,
  features: readonly KernelFeature[],
  logger: Logger,
  exists: (path: string) => boolean = existsSync,
  now: () => number = Date.now,
): ReadinessCheck {
  return presenceCheck(
    features,
    (feature) => exists(feature.path),
    (missing) => ({
      fields: { missing: missing.map((feature) => feature.path) },
      logLine: `the kernel has no ${missing.map((feature) => `${feature.name} (${feature.path} is missing)`).join(', ')}: ${controller} cannot program the node, stays not ready and its syncs fail`,
      notReady: `the kernel has no ${missing.map((feature) => feature.name).join(', ')}`,
    }),
    logger,
    now,
  );
}
