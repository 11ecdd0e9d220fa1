import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { messageOf } from '@kube-router/controller';
import type { Controller } from '@kube-router/controller';
import { hasTool } from '@kube-router/netfilter';
import { startApiServer } from '../apiserver/server.js';
import type { ApiServer } from '../apiserver/server.js';
import { startLab } from '../lab/index.js';
import type { Lab, ProbeRequest } from '../lab/index.js';
import type { EnforcerEnv } from './enforcer.js';

const run = promisify(execFile);

/** Why a backend's real tests cannot run here (not root, or a tool missing), or undefined. */
export function missingForBackendTests(tools: readonly string[]): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root';
  for (const tool of ['ip', ...tools]) if (!hasTool(tool)) return `needs ${tool}`;
  return undefined;
}

/** `prefix` and three random characters: a lab run id, so that every name a test creates starts with krt-<prefix>. */
export function backendTestRunId(prefix: string): string {
  return `${prefix}${randomBytes(2).toString('hex').slice(0, 3)}`;
}

/** The embedded API server and one lab node for a backend's own real tests; enforcers started through it stop with it. */
export interface BackendWorld<Options, Enforcer> {
  api: ApiServer;
  kubeconfig: string;
  lab: Lab;
  start(options?: Options): Promise<Enforcer>;
  policy(namespace: string, name: string, spec: unknown): void;
  deletePolicy(namespace: string, name: string): void;
  /** Creates the namespace with these labels, or merges them into its labels. */
  labelNamespace(name: string, labels: Record<string, string>): void;
  /** Runs a command in the node netns and returns its stdout. */
  inNode(command: string, args: readonly string[], input?: string): Promise<string>;
  close(): Promise<void>;
}

export interface BackendWorldOptions<Options, Enforcer> {
  /** How the backend starts an enforcer for the lab node. */
  startEnforcer(env: EnforcerEnv, options?: Options): Promise<Enforcer>;
  /** Every name the lab creates starts with krt-<runId>. */
  runId: string;
}

export async function startBackendWorld<Options, Enforcer extends { stop(): Promise<void> }>(
  options: BackendWorldOptions<Options, Enforcer>,
): Promise<BackendWorld<Options, Enforcer>> {
  const api = await startApiServer({ port: 0 });
  const kubeconfig = await api.writeKubeconfig();
  const lab = await startLab({ apiServer: api, probeTimeoutMs: 400, runId: options.runId }).catch(async (error: unknown) => {
    await api.close();
    throw error;
  });
  const enforcers: Enforcer[] = [];
  return {
    api,
    kubeconfig,
    lab,
    async start(extra) {
      const enforcer = await options.startEnforcer({ kubeconfig, nodeName: lab.nodeName, netns: lab.nodeNetns }, extra);
      enforcers.push(enforcer);
      return enforcer;
    },
    policy(namespace, name, spec) {
      api.upsert({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace, name }, spec } as never);
    },
    deletePolicy(namespace, name) {
      api.delete('networking.k8s.io/v1', 'NetworkPolicy', namespace, name);
    },
    labelNamespace(name, labels) {
      if (api.get('v1', 'Namespace', undefined, name)) {
        api.patch('v1', 'Namespace', undefined, name, { metadata: { labels } }, 'merge');
      } else {
        api.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } } as never);
      }
    },
    async inNode(command, args, input) {
      if (input === undefined) {
        const { stdout } = await run('ip', ['netns', 'exec', lab.nodeNetns, command, ...args], { timeout: 20_000 });
        return stdout;
      }
      return await new Promise<string>((resolve, reject) => {
        const child = execFile('ip', ['netns', 'exec', lab.nodeNetns, command, ...args], { timeout: 20_000 }, (error, stdout, stderr) =>
          error ? reject(new Error(`${command} failed: ${stderr}`)) : resolve(stdout),
        );
        child.stdin?.end(input);
      });
    },
    async close() {
      for (const enforcer of enforcers) await enforcer.stop().catch(() => undefined);
      await lab.stop();
      await api.close();
    },
  };
}

export interface Expectation {
  from: string;
  to: string;
  port: number;
  family?: 4 | 6;
  protocol?: 'TCP' | 'UDP';
  open: boolean;
}

function probeOf(e: Expectation, timeoutMs?: number): ProbeRequest {
  const request = { from: e.from, to: e.to, port: e.port, protocol: e.protocol ?? 'TCP', family: e.family ?? 4 } as const;
  return timeoutMs === undefined ? request : { ...request, timeoutMs };
}

/** Probes every expectation at once and lists the ones that came out otherwise, so a failure shows the whole matrix. */
export async function mismatches(lab: Lab, expectations: readonly Expectation[]): Promise<string[]> {
  const results = await lab.probeMany(expectations.map((e) => probeOf(e)));
  return expectations.flatMap((e, i) => {
    const ok = results[i]?.ok ?? false;
    if (ok === e.open) return [];
    return [`${e.from} -> ${e.to}:${e.port}/${e.protocol ?? 'TCP'} v${e.family ?? 4}: expected ${e.open ? 'open' : 'blocked'}, was ${ok ? 'open' : 'blocked'}`];
  });
}

/**
 * A periodic sync (the one that reads the kernel back and repairs drift), then the probes: what went wrong, the
 * sync's failure and each mismatch, in one list that is empty when the sync succeeded and traffic is as expected.
 */
export async function periodicSyncMismatches(
  controller: Pick<Controller, 'runObservedSync'>,
  lab: Lab,
  expectations: readonly Expectation[],
): Promise<string[]> {
  const outcome = await controller.runObservedSync('periodic');
  const failure = outcome.ok ? [] : [`the periodic sync failed: ${messageOf(outcome.error)}`];
  return [...failure, ...(await mismatches(lab, expectations))];
}

/** What the probes of probeThroughout saw, once stopped. */
export interface ProbedThroughout {
  /** How many times every path was probed. */
  rounds: number;
  /** Probes of a path expected blocked that got through. */
  forbiddenOpened: number;
  /** Probes of a path expected open that did not. */
  allowedBlocked: number;
}

/**
 * Probes the expected paths over and over, all at once each time, until stop() (a restart or a switch of backend in
 * between): a forbidden path that opened even once, or an allowed one that closed, is counted. A forbidden path
 * gives up after 150 ms (a blocked probe waits out its timeout, and a short one probes often); an allowed one after a
 * second, so that a slow answer is not called blocked.
 */
export function probeThroughout(lab: Lab, expectations: readonly Expectation[]): { stop(): Promise<ProbedThroughout> } {
  const requests = expectations.map((e) => probeOf(e, e.open ? 1000 : 150));
  const seen: ProbedThroughout = { rounds: 0, forbiddenOpened: 0, allowedBlocked: 0 };
  let probing = true;
  const loop = (async () => {
    while (probing) {
      const results = await lab.probeMany(requests);
      expectations.forEach((e, i) => {
        const ok = results[i]?.ok ?? false;
        if (e.open && !ok) seen.allowedBlocked++;
        if (!e.open && ok) seen.forbiddenOpened++;
      });
      seen.rounds++;
    }
  })();
  // Should a probe fail (the lab gone after the test failed before stop()), that is stop()'s to throw, not an unhandled
  // rejection on top of the test's own failure.
  loop.catch(() => undefined);
  return {
    async stop() {
      probing = false;
      await loop;
      return seen;
    },
  };
}
