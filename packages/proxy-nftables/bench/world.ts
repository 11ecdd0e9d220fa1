import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { ExecRunner } from '@kube-router/netfilter';

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

/** Endpoint addresses of every bench Service; the pod namespace answers on all of them. */
export const ENDPOINT_RANGE = '10.100.0.0/14';
/** The node's InternalIP, on its link to the client namespace. */
export const NODE_IP = '192.168.88.1';
const CLIENT_IP = '192.168.88.2';

export interface ProbeSummary {
  readonly answered: number;
  readonly failedCount: number;
  readonly failed: readonly { target: string; error: string }[];
  readonly ms: number;
  readonly lastAnswerMs: number;
}

/**
 * The bench's network namespaces on the host kernel, all named `krt-bench-<run>-<role>` and deleted by tearDown.
 * `connect()` makes a served node: a client namespace routed through the node namespace (where the proxy's table goes)
 * to one pod namespace that holds every endpoint address of the range (a local route, AnyIP) with an echo server on
 * port 8080, so that a connection to any bench Service is answered by a real process after the node's DNAT.
 */
export class BenchWorld {
  readonly run = randomBytes(3).toString('hex');
  readonly runner = new ExecRunner({ defaultTimeoutMs: 900_000 });
  readonly #namespaces: string[] = [];
  readonly #servers: ChildProcess[] = [];

  name(role: string): string {
    return `krt-bench-${this.run}-${role}`;
  }

  async sh(command: string, netns?: string, timeoutMs?: number): Promise<{ stdout: string; durationMs: number }> {
    return this.runner.run({ command: 'sh', args: ['-c', command], ...(netns && { netns }), ...(timeoutMs && { timeoutMs }) });
  }

  async namespace(role: string): Promise<string> {
    const netns = this.name(role);
    await this.sh(`ip netns add ${netns}`);
    this.#namespaces.push(netns);
    await this.sh('ip link set lo up', netns);
    return netns;
  }

  /** Deletes one namespace now (its kernel state with it). */
  async drop(netns: string): Promise<void> {
    const index = this.#namespaces.indexOf(netns);
    if (index >= 0) this.#namespaces.splice(index, 1);
    await this.sh(`ip netns del ${netns}`);
  }

  /** A node namespace with a client namespace and a pod namespace answering every endpoint address. */
  async connect(role: string): Promise<{ node: string; client: string; pod: string }> {
    const node = await this.namespace(`${role}-node`);
    const client = await this.namespace(`${role}-cli`);
    const pod = await this.namespace(`${role}-pod`);
    await this.sh(
      `set -e
      sysctl -qw net.ipv4.ip_forward=1
      ip link add to-pod type veth peer name eth0 netns ${pod}
      ip addr add 10.99.0.1/30 dev to-pod
      ip link set to-pod up
      ip route add ${ENDPOINT_RANGE} via 10.99.0.2
      ip link add to-client type veth peer name eth0 netns ${client}
      ip addr add ${NODE_IP}/24 dev to-client
      ip link set to-client up`,
      node,
    );
    await this.sh(`set -e; ip addr add ${CLIENT_IP}/24 dev eth0; ip link set eth0 up; ip route add default via ${NODE_IP}`, client);
    await this.sh(`set -e; ip addr add 10.99.0.2/30 dev eth0; ip link set eth0 up; ip route add default via 10.99.0.1; ip route add local ${ENDPOINT_RANGE} dev lo`, pod);
    await this.#serve(pod);
    return { node, client, pod };
  }

  /** TCP connections from a namespace to each target ("ip:port"); failures are retried until untilMs. */
  async probe(netns: string, targets: readonly string[], untilMs = 0): Promise<ProbeSummary> {
    const { stdout } = await this.runner.run({
      command: process.execPath,
      args: [here('./probe-many.mjs')],
      input: JSON.stringify({ targets, concurrency: 200, timeoutMs: 2_000, untilMs }),
      netns,
      timeoutMs: untilMs + 600_000,
    });
    return JSON.parse(stdout) as ProbeSummary;
  }

  async tearDown(): Promise<void> {
    for (const server of this.#servers.splice(0)) server.kill('SIGKILL');
    for (const netns of this.#namespaces.splice(0).reverse()) await this.sh(`ip netns del ${netns}`).catch(() => undefined);
  }

  async #serve(pod: string): Promise<void> {
    // The tests' echo server: answers "<name> <client address>" on every local address.
    const child = spawn('ip', ['netns', 'exec', pod, process.execPath, here('../src/testing/echo.mjs'), 'bench-pod', '8080'], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#servers.push(child);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`echo server in ${pod} did not start`)), 20_000);
      child.stdout.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('listening')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`echo server in ${pod} exited with ${code}`));
      });
    });
  }
}
