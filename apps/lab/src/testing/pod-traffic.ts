import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A TCP connect from inside a network namespace, by a process of its own, as any client in the pod would. */
export async function canConnect(netns: string, ip: string, port: number): Promise<boolean> {
  const script = `const s = require('net').connect(${port}, '${ip}'); s.setTimeout(700);
    s.on('connect', () => process.exit(0)); s.on('timeout', () => process.exit(1)); s.on('error', () => process.exit(1));`;
  return run('ip', ['netns', 'exec', netns, process.execPath, '-e', script], { timeout: 5_000 }).then(
    () => true,
    () => false,
  );
}

/**
 * The first line a TCP server answers, from inside a network namespace (a lab pod answers with its `namespace/name`),
 * or undefined when nothing answers within 2 s: the reply names the pod a Service sent the connection to.
 */
export async function replyFrom(netns: string, ip: string, port: number): Promise<string | undefined> {
  const script = `const s = require('net').connect(${port}, '${ip}'); let got = ''; s.setTimeout(2000);
    s.on('data', (d) => { got += d; if (got.includes('\\n')) { process.stdout.write(got.split('\\n')[0]); process.exit(0); } });
    s.on('end', () => { process.stdout.write(got.split('\\n')[0]); process.exit(got ? 0 : 1); });
    s.on('timeout', () => process.exit(1)); s.on('error', () => process.exit(1));`;
  return run('ip', ['netns', 'exec', netns, process.execPath, '-e', script], { timeout: 8_000 }).then(
    ({ stdout }) => stdout.trim() || undefined,
    () => undefined,
  );
}

/** The lab's seeded demo/web pod opened to demo/client alone, on port 80: the intruder (namespace other) is cut off. */
export const WEB_FROM_CLIENT_POLICY = `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: { name: web-from-client, namespace: demo }
spec:
  podSelector: { matchLabels: { app: web } }
  ingress:
    - from: [{ podSelector: { matchLabels: { app: client } } }]
      ports: [{ port: 80, protocol: TCP }]
`;

/**
 * A client in a pod that stays: one process in the pod's network namespace makes each connection asked of it, with
 * canConnect's verdicts (connected within 700 ms or not), so that probing every 200 ms does not start a process for
 * every probe on a small machine.
 */
export class PodProber {
  readonly netns: string;
  readonly #child: ChildProcess;
  readonly #pending = new Map<number, { resolve: (open: boolean) => void; reject: (error: Error) => void }>();
  #nextId = 0;
  #exited: string | undefined;

  constructor(netns: string) {
    this.netns = netns;
    const script = `const net = require('net');
      require('readline').createInterface({ input: process.stdin }).on('line', (line) => {
        const [id, ip, port] = line.split(' ');
        const socket = net.connect(Number(port), ip);
        let done = false;
        const end = (open) => { if (done) return; done = true; socket.destroy(); process.stdout.write(id + ' ' + (open ? 1 : 0) + '\\n'); };
        socket.setTimeout(700);
        // A starved process may see its timer before the connection it made in time: the timer runs first in a turn,
        // the connection's event in the same turn's poll, and the verdict after both.
        socket.on('connect', () => end(true)); socket.on('timeout', () => setImmediate(() => end(false))); socket.on('error', () => end(false));
      }).on('close', () => process.exit(0));`;
    this.#child = spawn('ip', ['netns', 'exec', netns, process.execPath, '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
    createInterface({ input: this.#child.stdout! }).on('line', (line) => {
      const [id, open] = line.split(' ');
      const entry = this.#pending.get(Number(id));
      this.#pending.delete(Number(id));
      entry?.resolve(open === '1');
    });
    this.#child.once('exit', (code, signal) => {
      this.#exited = `the prober in ${netns} exited (${code ?? signal})`;
      for (const entry of this.#pending.values()) entry.reject(new Error(this.#exited));
      this.#pending.clear();
    });
    this.#child.stdin!.on('error', () => undefined);
  }

  /** Whether a TCP connection to ip:port opens from the pod; rejects when the prober itself does not answer in 5 s. */
  connect(ip: string, port: number): Promise<boolean> {
    if (this.#exited !== undefined) return Promise.reject(new Error(this.#exited));
    const id = this.#nextId++;
    return new Promise<boolean>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`the prober in ${this.netns} did not answer within 5 s`));
      }, 5_000);
      this.#pending.set(id, {
        resolve: (open) => (clearTimeout(timer), resolve(open)),
        reject: (error) => (clearTimeout(timer), reject(error)),
      });
      this.#child.stdin!.write(`${id} ${ip} ${port}\n`);
    });
  }

  /** Ends the prober's process and waits for it. */
  async close(): Promise<void> {
    if (this.#exited !== undefined) return;
    const exited = new Promise((resolve) => this.#child.once('exit', resolve));
    this.#child.stdin!.end();
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), 2_000);
    await exited;
    clearTimeout(timer);
  }
}
