import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { setPriority } from 'node:os';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { trackProcess, untrackProcess } from './exit-cleanup.js';
import type { ProbeOutcome, WireProbe } from './probe-types.js';

const agentScript = fileURLToPath(new URL('./pod-agent.mjs', import.meta.url));
const readyTimeoutMs = 10_000;
const stopTimeoutMs = 3_000;
const agentPriority = -10;

export interface ListenPort {
  port: number;
  protocol: 'TCP' | 'UDP';
}

type AgentMessage =
  | { type: 'ready'; pid: number }
  | { type: 'error'; message: string }
  | { type: 'probed'; id: number; results: ProbeOutcome[] };

/**
 * The helper process of one pod, living in the pod's netns: it serves the pod's ports and runs probes from the pod.
 */
export class PodAgent {
  private nextRequestId = 1;
  private readonly pending = new Map<number, { resolve(results: ProbeOutcome[]): void; reject(error: Error): void }>();
  private exited = false;
  private readonly exitPromise: Promise<void>;
  private stderr = '';

  private constructor(
    readonly netns: string,
    private readonly child: ChildProcessByStdio<Writable, Readable, Readable>,
  ) {
    this.exitPromise = new Promise((resolve) => child.once('close', () => resolve()));
    child.once('close', (code, signal) => {
      this.exited = true;
      untrackProcess(child);
      const error = new Error(`pod agent in ${netns} exited with ${code ?? signal}${this.stderrSuffix()}`);
      for (const request of this.pending.values()) request.reject(error);
      this.pending.clear();
    });
    // Writing to an agent that has just died must not become an unhandled EPIPE; its exit rejects the requests.
    child.stdin.on('error', () => undefined);
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-4000);
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return !this.exited;
  }

  /** Starts the agent and resolves once it listens on every port. */
  static async start(netns: string, identity: string, ports: readonly ListenPort[]): Promise<PodAgent> {
    const config = JSON.stringify({ identity, ports });
    // The netns name in the command line makes the process recognisable in `ps` as belonging to this run.
    const child = spawn('ip', ['netns', 'exec', netns, process.execPath, agentScript, netns, identity, config], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    trackProcess(child);
    raisePriority(child.pid);
    const agent = new PodAgent(netns, child);
    try {
      await agent.waitUntilReady();
    } catch (error) {
      await agent.stop();
      throw error;
    }
    return agent;
  }

  private waitUntilReady(): Promise<void> {
    return new Promise((resolve, reject) => {
      const lines = createInterface({ input: this.child.stdout });
      const timer = setTimeout(() => reject(new Error(`pod agent in ${this.netns} not ready after ${readyTimeoutMs} ms`)), readyTimeoutMs);
      const onClose = (): void => {
        clearTimeout(timer);
        reject(new Error(`pod agent in ${this.netns} exited before it was ready${this.stderrSuffix()}`));
      };
      this.child.once('close', onClose);
      lines.on('line', (line) => {
        const message = parseMessage(line);
        if (message?.type === 'ready') {
          clearTimeout(timer);
          this.child.off('close', onClose);
          resolve();
        } else if (message?.type === 'error') {
          clearTimeout(timer);
          this.child.off('close', onClose);
          reject(new Error(`pod agent in ${this.netns}: ${message.message}`));
        } else if (message?.type === 'probed') {
          this.pending.get(message.id)?.resolve(message.results);
          this.pending.delete(message.id);
        }
      });
    });
  }

  /** Runs the probes from inside the pod, all at once. */
  probe(probes: readonly WireProbe[]): Promise<ProbeOutcome[]> {
    if (probes.length === 0) return Promise.resolve([]);
    if (this.exited) return Promise.reject(new Error(`pod agent in ${this.netns} is not running${this.stderrSuffix()}`));
    const id = this.nextRequestId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.stdin.write(`${JSON.stringify({ id, probes })}\n`);
    });
  }

  /** Closing stdin asks the agent to exit; a kill follows if it does not. */
  async stop(): Promise<void> {
    if (this.exited) return;
    this.child.stdin.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), stopTimeoutMs);
    await this.exitPromise;
    clearTimeout(timer);
  }

  private stderrSuffix(): string {
    const text = this.stderr.trim();
    return text ? `: ${text}` : '';
  }
}

/**
 * Probes time out after a few hundred milliseconds, so an agent that a busy machine schedules late would make an open
 * path look dropped; a higher priority for these small processes keeps that from happening. Only root may raise it.
 */
function raisePriority(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    setPriority(pid, agentPriority);
  } catch {
    // Not root, or the process is already gone: the agent works either way.
  }
}

function parseMessage(line: string): AgentMessage | undefined {
  try {
    return JSON.parse(line) as AgentMessage;
  } catch {
    return undefined;
  }
}
