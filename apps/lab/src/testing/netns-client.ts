import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { POD_AGENT_FILES } from '@kube-router/testkit';

/** The helper's script: started on this host as it is (told where testkit's probes are), copied into the QEMU guest. */
const NETNS_CLIENT_SCRIPT = fileURLToPath(new URL('./netns-client.mjs', import.meta.url));
/** The helper's files by name, for a place that runs it from a copy (the QEMU guest): it imports testkit's probes. */
export const NETNS_CLIENT_FILES: Readonly<Record<string, string>> = { 'netns-client.mjs': NETNS_CLIENT_SCRIPT, 'probe-core.mjs': POD_AGENT_FILES['probe-core.mjs'] };
/** How long the helper may take to start, or to answer anything but a probe, on a loaded two-core machine. */
const answerTimeoutMs = 15_000;

export interface Outcome {
  ok: boolean;
  /** The first line the server answered: `<namespace>/<pod>` from a lab pod, `<identity> <client address>` from serve. */
  reply?: string;
  /** Why it failed: `timeout`, `ECONNREFUSED`, `connected, but no answer`, ... */
  error?: string;
  ms: number;
}

export interface ProbeRequest {
  protocol: 'TCP' | 'UDP';
  host: string;
  port: number;
  /** Connections (or datagrams) one after another; default 1. */
  count?: number;
  /** Per request; default 1500 ms. */
  timeoutMs?: number;
  /**
   * TCP: a TLS handshake instead of a line, its completion the answer (reply: the protocol and the certificate's CN),
   * for a server that says nothing first.
   */
  tls?: boolean;
}

/** The answers a UDP stream has had so far, in order. */
export interface UdpStream {
  readonly replies: { reply: string; at: number }[];
  stop(): Promise<void>;
}

/**
 * The helper's process: a child process on this host, or one in the QEMU guest (testkit's InteractiveProcess), which
 * has the same parts.
 */
export interface HelperProcess {
  readonly stdin: Writable;
  readonly stdout: Readable;
  readonly stderr: Readable;
  once(event: 'close', listener: (code: number | null, signal: NodeJS.Signals | null) => void): unknown;
  kill(signal?: NodeJS.Signals): boolean;
}

/** Starts `netns-client.mjs <netns>` inside `netns`, wherever that namespace is. */
export type HelperLauncher = (netns: string) => HelperProcess | Promise<HelperProcess>;

// The namespace's name on the command line makes the process recognisable in `ps` as this run's.
const launchOnHost: HelperLauncher = (netns) =>
  spawn('ip', ['netns', 'exec', netns, process.execPath, NETNS_CLIENT_SCRIPT, netns], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, PROBE_CORE: pathToFileURL(POD_AGENT_FILES['probe-core.mjs']).href },
  });

type Message = { id?: number; ready?: boolean; results?: Outcome[]; ok?: boolean; error?: string; event?: string; reply?: string; at?: number };

/**
 * A client (and, when asked, a server) inside one network namespace: one long-lived process there, so that probing
 * every few hundred milliseconds starts no process per probe on a small machine.
 */
export class NetnsClient {
  readonly #pending = new Map<number, { resolve: (message: Message) => void; reject: (error: Error) => void }>();
  readonly #streams = new Map<number, { reply: string; at: number }[]>();
  #nextId = 1;
  #exited: string | undefined;
  #stderr = '';
  readonly #closed: Promise<void>;

  private constructor(
    readonly netns: string,
    private readonly child: HelperProcess,
  ) {
    this.#closed = new Promise((resolve) => child.once('close', () => resolve()));
    child.once('close', (code, signal) => {
      this.#exited = `the client in ${netns} exited (${code ?? signal})${this.#stderr ? `: ${this.#stderr.trim()}` : ''}`;
      for (const entry of this.#pending.values()) entry.reject(new Error(this.#exited));
      this.#pending.clear();
    });
    child.stdin.on('error', () => undefined);
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (this.#stderr = (this.#stderr + chunk).slice(-2000)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      let message: Message;
      try {
        message = JSON.parse(line) as Message;
      } catch {
        return;
      }
      if (message.event === 'reply' && message.id !== undefined) {
        this.#streams.get(message.id)?.push({ reply: message.reply ?? '', at: message.at ?? Date.now() });
        return;
      }
      const key = message.ready ? 0 : message.id;
      if (key === undefined) return;
      const entry = this.#pending.get(key);
      this.#pending.delete(key);
      entry?.resolve(message);
    });
  }

  /**
   * Starts the helper in `netns` (on this host unless `launch` says where) and resolves once it is ready, within
   * `startTimeoutMs` (node starts in seconds under the QEMU guest's emulation).
   */
  static async start(netns: string, launch: HelperLauncher = launchOnHost, startTimeoutMs = answerTimeoutMs): Promise<NetnsClient> {
    const child = await launch(netns);
    const client = new NetnsClient(netns, child);
    try {
      await client.#ask(0, undefined, startTimeoutMs);
    } catch (error) {
      await client.close();
      throw error;
    }
    return client;
  }

  /** `count` requests one after another; each outcome in order. */
  async probe(request: ProbeRequest): Promise<Outcome[]> {
    const timeoutMs = request.timeoutMs ?? 1_500;
    const count = request.count ?? 1;
    // Each request may use its timeout plus the answer's grace; the helper itself must answer after that.
    const answer = await this.#request({ op: 'probe', ...request, timeoutMs, count }, count * (timeoutMs + 2_500) + answerTimeoutMs);
    return answer.results ?? [];
  }

  /** A listener on `port` of both families answering `<identity> <client address>`. */
  async serve(protocol: 'TCP' | 'UDP', port: number, identity: string): Promise<void> {
    await this.#request({ op: 'serve', protocol, port, identity }, answerTimeoutMs);
  }

  /** Sends a datagram from `localPort` to host:port every `intervalMs` until stopped; collects every answer. */
  async udpStream(host: string, port: number, localPort: number, intervalMs: number): Promise<UdpStream> {
    const id = this.#nextId++;
    const replies: { reply: string; at: number }[] = [];
    this.#streams.set(id, replies);
    await this.#ask(id, { id, op: 'stream', host, port, localPort, intervalMs }, answerTimeoutMs);
    return {
      replies,
      stop: async () => {
        if (this.#exited === undefined) await this.#request({ op: 'stop', target: id }, answerTimeoutMs);
        this.#streams.delete(id);
      },
    };
  }

  /** Ends the helper (its listeners and streams with it) and waits for it. */
  async close(): Promise<void> {
    if (this.#exited !== undefined) return;
    this.child.stdin.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 3_000);
    await this.#closed;
    clearTimeout(timer);
  }

  #request(body: Record<string, unknown>, timeoutMs: number): Promise<Message> {
    const id = this.#nextId++;
    return this.#ask(id, { id, ...body }, timeoutMs);
  }

  #ask(id: number, body: Record<string, unknown> | undefined, timeoutMs = answerTimeoutMs): Promise<Message> {
    if (this.#exited !== undefined) return Promise.reject(new Error(this.#exited));
    return new Promise<Message>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`the client in ${this.netns} did not answer ${body ? JSON.stringify(body) : 'ready'} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(id, {
        resolve: (message) => {
          clearTimeout(timer);
          if (message.error !== undefined) reject(new Error(`the client in ${this.netns}: ${message.error}`));
          else resolve(message);
        },
        reject: (error) => (clearTimeout(timer), reject(error)),
      });
      if (body !== undefined) this.child.stdin.write(`${JSON.stringify(body)}\n`);
    });
  }
}
