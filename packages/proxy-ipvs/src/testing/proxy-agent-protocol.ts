// The messages between ProxyAgentProcess (the test process) and proxy-agent.ts (the proxy process), over Node's IPC
// channel. Kept apart from both so that the proxy process loads nothing of the test harness.
import { CommandError } from '@kube-router/netfilter';
import type { CommandErrorDetails, CommandResult, CommandSpec } from '@kube-router/netfilter';
import type { ProxySyncReport } from '../controller.js';
import type { ProxyIpvsOptions } from '../options.js';

export interface ProxyAgentConfig {
  readonly kubeconfig: string;
  readonly options: ProxyIpvsOptions;
  /** pino level of the process's log on its stderr; default warn. */
  readonly logLevel?: string;
}

/** The drift kinds the proxy counts (kube_router_controller_drift_repaired_total{controller="proxy",object}). */
export const DRIFT_OBJECTS = ['ipvs_service', 'ipvs_destination', 'chain', 'ipset'] as const;

export interface SyncedMessage {
  readonly type: 'synced';
  /** Set when the sync was asked for with sync(), unset for the scheduler's own. */
  readonly id?: number;
  readonly reason: string;
  readonly ok: boolean;
  readonly error?: string;
  readonly durationMs: number;
  readonly report?: ProxySyncReport;
  /** The process's drift counters after this sync, by object. */
  readonly drift: Record<string, number>;
}

export type SerializedError = { readonly command: CommandErrorDetails } | { readonly message: string };

/** What the test process sends the proxy process. */
export type ToProxyAgent =
  | { readonly type: 'ran'; readonly id: number; readonly result: CommandResult }
  | { readonly type: 'failed'; readonly id: number; readonly error: SerializedError }
  | { readonly type: 'sync'; readonly id: number; readonly reason: string }
  | { readonly type: 'stop' };

/** What the proxy process sends the test process. */
export type FromProxyAgent = { readonly type: 'run'; readonly id: number; readonly spec: CommandSpec } | SyncedMessage | { readonly type: 'started' };

export function serializeError(error: unknown): SerializedError {
  if (!(error instanceof CommandError)) return { message: error instanceof Error ? error.message : String(error) };
  return {
    command: {
      command: error.command,
      args: error.args,
      exitCode: error.exitCode,
      signal: error.signal,
      stderr: error.stderr,
      stdout: error.stdout,
      timedOut: error.timedOut,
      timeoutMs: error.timeoutMs,
      netns: error.netns,
      spawnError: error.spawnError,
      notRunBecause: error.notRunBecause,
      hint: error.hint,
    },
  };
}

export function deserializeError(error: SerializedError): Error {
  return 'command' in error ? new CommandError(error.command) : new Error(error.message);
}
