import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { hasTool } from '@kube-router/netfilter';
import { startApiServer, startLab } from '@kube-router/testkit';
import type { ApiServer, Lab } from '@kube-router/testkit';
import { startTestEnforcer } from './enforcer.js';
import type { TestEnforcer, TestEnforcerOptions } from './enforcer.js';

const run = promisify(execFile);

/** Why the real tests cannot run here, or undefined. */
export function missingForRealTests(...tools: string[]): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root';
  for (const tool of ['ip', 'nft', ...tools]) if (!hasTool(tool)) return `needs ${tool}`;
  return undefined;
}

/** `tnf` and three random characters: the lab's run id, so that every name our tests create starts with krt-tnf. */
export function testRunId(): string {
  return `tnf${randomBytes(2).toString('hex').slice(0, 3)}`;
}

export interface World {
  api: ApiServer;
  kubeconfig: string;
  lab: Lab;
  start(extra?: TestEnforcerOptions): Promise<TestEnforcer>;
  policy(namespace: string, name: string, spec: unknown): void;
  deletePolicy(namespace: string, name: string): void;
  /** Runs a command in the node netns and returns its stdout. */
  inNode(command: string, args: readonly string[], input?: string): Promise<string>;
  close(): Promise<void>;
}

/** The embedded API server and a lab node (names `krt-tnf...`); enforcers started through it stop with it. */
export async function startWorld(): Promise<World> {
  const api = await startApiServer({ port: 0 });
  const kubeconfig = await api.writeKubeconfig();
  const lab = await startLab({ apiServer: api, probeTimeoutMs: 400, runId: testRunId() });
  const enforcers: TestEnforcer[] = [];
  return {
    api,
    kubeconfig,
    lab,
    async start(extra = {}) {
      const enforcer = await startTestEnforcer({ kubeconfig, nodeName: lab.nodeName, netns: lab.nodeNetns }, extra);
      enforcers.push(enforcer);
      return enforcer;
    },
    policy(namespace, name, spec) {
      api.upsert({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace, name }, spec } as never);
    },
    deletePolicy(namespace, name) {
      api.delete('networking.k8s.io/v1', 'NetworkPolicy', namespace, name);
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
