import type { Logger } from 'pino';
import { runningCommands } from '@kube-router/netfilter';

export interface ProcessGuardOptions {
  /** Ends the process after an uncaught exception. Default process.exit. */
  exit?: (code: number) => void;
}

/**
 * The agent's last line of defence against its own bugs, installed by the CLI:
 *
 * - An unhandled promise rejection is logged with its error and the agent carries on. Whatever rejected has already
 *   failed its own work; ending the process would take the node's firewall, proxy and routes down with it (Node's
 *   default), while every controller keeps its loop and reports its syncs as before.
 * - An uncaught exception leaves the process in an unknown state (a handler half-run, a stream half-written), so it is
 *   logged at fatal level and the agent exits 1 at once, for the DaemonSet to restart it. The kernel keeps the rules
 *   it has meanwhile; running commands are killed first so that none outlives the agent holding the xtables lock.
 *
 * Returns a function that removes the handlers.
 */
export function guardProcess(logger: Logger, options: ProcessGuardOptions = {}): () => void {
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const onRejection = (reason: unknown) => {
    logger.error({ err: reason }, 'unhandled promise rejection (logged, the agent carries on)');
  };
  const onException = (error: Error, origin: string) => {
    logger.fatal({ err: error, origin }, 'uncaught exception: exiting for the DaemonSet to restart the agent');
    runningCommands.halt('the agent is exiting after an uncaught exception');
    exit(1);
  };
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  return () => {
    process.off('unhandledRejection', onRejection);
    process.off('uncaughtException', onException);
  };
}
