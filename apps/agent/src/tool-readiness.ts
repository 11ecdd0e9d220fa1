import type { Logger } from 'pino';
import type { ReadinessCheck } from '@kube-router/healthcheck';
import { findExecutable } from '@kube-router/netfilter';

/** How long a lookup stands: readiness is probed every few seconds, and a tool installed later is seen within this. */
const RECHECK_MS = 10_000;

/**
 * A readiness check that fails while one of `tools` is not installed, naming each; logs the missing ones once, at
 * creation, in one line. Installed later (a package added to a running node), the check passes within RECHECK_MS.
 */
export function toolReadinessCheck(
  controller: string,
  tools: readonly string[],
  logger: Logger,
  find: (name: string) => string | undefined = findExecutable,
  now: () => number = Date.now,
): ReadinessCheck {
  const missingNow = () => tools.filter((tool) => find(tool) === undefined);
  let missing = missingNow();
  let checkedAt = now();
  if (missing.length > 0) {
    logger.error(
      { missing },
      `${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} not installed (not found on PATH): ${controller} cannot program the node, stays not ready and its syncs fail`,
    );
  }
  return () => {
    if (missing.length > 0 && now() - checkedAt >= RECHECK_MS) {
      missing = missingNow();
      checkedAt = now();
    }
    return missing.length === 0 ? undefined : `${missing.join(', ')} not installed`;
  };
}
