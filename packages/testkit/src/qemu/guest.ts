import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, isIPv4, type Socket } from 'node:net';
import { PassThrough, Writable } from 'node:stream';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CommandError, hasTool } from '@kube-router/netfilter';
import type { CommandResult, CommandRunner, CommandSpec } from '@kube-router/netfilter';
import { trackProcess, untrackProcess } from '../lab/exit-cleanup.js';
import { buildGuestImage, findGuestKernel, type GuestImage } from './image.js';

export interface GuestOptions {
  /** Guest memory in MiB; node plus a 10,000-Service IPVS table fit in the default. */
  readonly memoryMiB?: number;
  readonly cpus?: number;
  /** Deadline from starting qemu to the agent's first message. */
  readonly bootTimeoutMs?: number;
  /** Deadline of a command that sets none, as ExecRunner's default. */
  readonly defaultTimeoutMs?: number;
  readonly qemuBinary?: string;
  /** A prebuilt image; by default the cached one for the unpacked kernel is built or reused. */
  readonly image?: GuestImage;
  /**
   * TCP services of this host the guest may reach, and nothing else of it: a NIC on QEMU's user network (slirp, with
   * restrict=on) whose only way out is these forwards. A connection to `guestAddress:guestPort` in the guest becomes
   * one from this host to `hostAddress:hostPort` (socat, one per connection). The NIC is HOST_LINK.interface in the
   * guest's root namespace, down and without an address: the test puts it where its topology needs it.
   */
  readonly hostForwards?: readonly HostForward[];
}

export interface HostForward {
  /** An address of the user network (HOST_LINK.network) other than the guest's and slirp's own, e.g. 10.0.2.100. */
  readonly guestAddress: string;
  readonly guestPort: number;
  /** Default 127.0.0.1. */
  readonly hostAddress?: string;
  readonly hostPort: number;
}

/** The guest's side of `hostForwards`: QEMU's user network (its defaults), the NIC's name and the guest's address. */
export const HOST_LINK = { interface: 'eth0', network: '10.0.2.0/24', guestAddress: '10.0.2.15', gateway: '10.0.2.2' } as const;

export interface GuestInfo {
  readonly kernelRelease: string;
  /** From spawning qemu to the guest agent's ready message. */
  readonly bootMs: number;
  readonly imageBuildMs: number;
}

export interface BackgroundProcess {
  readonly pid: number;
  /** What it wrote so far and its exit, when it has exited. */
  output(): Promise<{ stdout: string; stderr: string; exit: { exitCode: number | null; signal: string | null } | null }>;
  /** Kills its process group and returns what it wrote. */
  stop(): Promise<{ stdout: string; stderr: string }>;
}

/**
 * A process in the guest that one talks to as to a child process: lines written to `stdin` reach it, what it writes
 * comes out of `stdout` and `stderr`, and `close` is emitted with its exit code or signal once it has ended. It is
 * shaped as a ChildProcess's parts, so that code written for `ip netns exec ... node helper.mjs` on the host takes it
 * unchanged.
 */
export interface InteractiveProcess {
  readonly pid: number;
  readonly stdin: Writable;
  readonly stdout: PassThrough;
  readonly stderr: PassThrough;
  once(event: 'close', listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  /** Kills its process group in the guest; `close` follows. */
  kill(signal?: NodeJS.Signals): boolean;
}

/**
 * QEMU's arguments for `hostForwards`: no NIC without forwards; otherwise a virtio NIC on a restricted user network
 * (the guest reaches nothing of this host or beyond but the forwards) with one guestfwd each. guestfwd's `cmd:` runs
 * its command for every connection with the connection as its stdin and stdout: socat joins it to the host's port.
 */
function hostLinkArgs(forwards: readonly HostForward[]): string[] {
  if (forwards.length === 0) return ['-nic', 'none'];
  if (!hasTool('socat')) throw new Error('hostForwards need socat on this host (apt-get install socat)');
  const guestfwds = forwards.map((forward) => {
    for (const value of [forward.guestAddress, forward.hostAddress ?? '127.0.0.1']) {
      // QEMU's option syntax: a comma would end the option; an address is all that belongs here.
      if (!isIPv4(value)) throw new Error(`hostForwards: ${value} is not an IPv4 address`);
    }
    for (const port of [forward.guestPort, forward.hostPort]) {
      if (!Number.isInteger(port) || port < 1 || port > 65_535) throw new Error(`hostForwards: ${port} is not a TCP port`);
    }
    return `guestfwd=tcp:${forward.guestAddress}:${forward.guestPort}-cmd:socat STDIO TCP:${forward.hostAddress ?? '127.0.0.1'}:${forward.hostPort}`;
  });
  return ['-netdev', ['user', 'id=host', 'restrict=on', ...guestfwds].join(','), '-device', 'virtio-net-pci,netdev=host'];
}

/**
 * How long one read of an interactive process's output waits in the guest for something to arrive. It ends early on
 * output and on the process's exit (a kill too), and a guest that dies fails it: the length only sets how often an idle
 * process (a pod's agent after its ready line) costs a request through the TCG guest.
 */
const interactiveReadWaitMs = 30_000;

interface RawResult {
  stdout: string;
  stderr: string;
  exitCode: number | null;
  signal: string | null;
  timedOut?: boolean;
  spawnError?: string;
  durationMs: number;
}

interface Reply {
  id: number | null;
  ok: boolean;
  value?: unknown;
  error?: string;
}

/** Why the tier cannot boot here (missing kernel, qemu or /dev/kvm-less host is fine), or undefined when it can. */
export function guestUnavailableReason(qemuBinary = 'qemu-system-x86_64'): string | undefined {
  const kernel = findGuestKernel();
  if ('missing' in kernel) return kernel.missing;
  const qemu = ['/usr/bin', '/usr/local/bin'].map((dir) => join(dir, qemuBinary)).find((path) => existsSync(path));
  if (!qemu) return `${qemuBinary} is not installed (apt-get install qemu-system-x86)`;
  if (!existsSync('/bin/busybox')) return 'busybox-static is not installed';
  if (process.getuid?.() !== 0) return 'the guest tier builds its image from root-only tools; run as root';
  return undefined;
}

/**
 * A booted QEMU guest (TCG, Debian's cloud kernel) whose kernel has IPVS, dummy and ipip. Commands run there through
 * `runner`, a CommandRunner like ExecRunner, so code under test that takes a runner needs no change to program the
 * guest's kernel. One boot serves many test cases; `close()` powers it off and removes its temporary files.
 */
export class QemuGuest {
  readonly info: GuestInfo;
  readonly runner: CommandRunner;
  readonly defaultTimeoutMs: number;
  readonly #qemu: ChildProcess;
  readonly #socket: Socket;
  readonly #workDir: string;
  readonly #pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  #nextId = 1;
  #closed = false;
  /** Why the guest can answer no more (qemu exited, its port closed); undefined while it can. */
  #failure: Error | undefined;
  #exited: Promise<void>;

  private constructor(qemu: ChildProcess, socket: Socket, workDir: string, info: GuestInfo, defaultTimeoutMs: number) {
    this.#qemu = qemu;
    this.#socket = socket;
    this.#workDir = workDir;
    this.info = info;
    this.defaultTimeoutMs = defaultTimeoutMs;
    this.runner = { run: (spec) => this.run(spec) };
    this.#exited = new Promise((resolve) => qemu.once('exit', () => resolve()));
    qemu.once('exit', () => this.#failPending(new Error(`qemu exited; console:\n${this.console().slice(-2000)}`)));
  }

  static async boot(options: GuestOptions = {}): Promise<QemuGuest> {
    const buildStarted = performance.now();
    const image = options.image ?? buildImageOrThrow();
    const imageBuildMs = Math.round(performance.now() - buildStarted);
    // Before anything is made: a bad forward throws here.
    const hostLink = hostLinkArgs(options.hostForwards ?? []);
    const workDir = mkdtempSync(join(tmpdir(), 'kube-router-guest-'));
    const socketPath = join(workDir, 'rpc.sock');
    const consolePath = join(workDir, 'console.log');
    const started = performance.now();
    const qemu = spawn(
      options.qemuBinary ?? 'qemu-system-x86_64',
      [
        '-accel', 'tcg',
        '-cpu', 'max',
        '-m', String(options.memoryMiB ?? 2048),
        '-smp', String(options.cpus ?? 1),
        '-kernel', image.kernel.vmlinuz,
        '-initrd', image.initramfs,
        '-append', 'console=ttyS0 quiet panic=-1 rdinit=/init',
        '-display', 'none',
        '-monitor', 'none',
        '-no-reboot',
        ...hostLink,
        '-serial', `file:${consolePath}`,
        '-device', 'virtio-serial-pci',
        // wait=on: the guest does not start before the host is connected, so no message is lost.
        '-chardev', `socket,id=rpc,path=${socketPath},server=on,wait=on`,
        '-device', 'virtserialport,chardev=rpc,name=kube-router.rpc',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    // A test process that ends without close() (a hook's timeout, an uncaught error) takes its guest with it.
    trackProcess(qemu);
    qemu.once('exit', () => untrackProcess(qemu));
    let qemuStderr = '';
    qemu.stderr?.on('data', (chunk: Buffer) => (qemuStderr += chunk.toString()));
    const bootTimeoutMs = options.bootTimeoutMs ?? 180_000;
    try {
      const socket = await connectWhenListening(socketPath, qemu, bootTimeoutMs, () => qemuStderr);
      const ready = await firstMessage(socket, qemu, bootTimeoutMs, () => `${qemuStderr}\n${readConsole(consolePath)}`);
      const info: GuestInfo = {
        kernelRelease: (ready.value as { kernel: string }).kernel,
        bootMs: Math.round(performance.now() - started),
        imageBuildMs,
      };
      const guest = new QemuGuest(qemu, socket, workDir, info, options.defaultTimeoutMs ?? 30_000);
      guest.#listen(ready.rest);
      return guest;
    } catch (error) {
      qemu.kill('SIGKILL');
      rmSync(workDir, { recursive: true, force: true });
      throw error;
    }
  }

  /** The serial console so far (kernel messages and the init script's lines). */
  console(): string {
    return readConsole(join(this.#workDir, 'console.log'));
  }

  /** One command in the guest, with the semantics of ExecRunner.run (CommandError on failure or timeout). */
  async run(spec: CommandSpec): Promise<CommandResult> {
    const timeoutMs = spec.timeoutMs ?? this.defaultTimeoutMs;
    const args = spec.args ?? [];
    const raw = (await this.#request({ op: 'run', spec: { ...spec, timeoutMs } })) as RawResult;
    const failure = { command: spec.command, args, netns: spec.netns, timeoutMs };
    if (raw.spawnError) throw new CommandError({ ...failure, exitCode: null, spawnError: raw.spawnError });
    const code = raw.exitCode;
    const ok = !raw.timedOut && code !== null && (code === 0 || (spec.okExitCodes?.includes(code) ?? false));
    if (!ok) {
      throw new CommandError({ ...failure, exitCode: code, signal: raw.signal, stderr: raw.stderr, stdout: raw.stdout, timedOut: raw.timedOut ?? false });
    }
    return { stdout: raw.stdout, stderr: raw.stderr, exitCode: code, durationMs: raw.durationMs };
  }

  /**
   * A shell command line in the guest (busybox sh), for test set-up that reads better as shell. Debian's static
   * busybox prefers its own applets to PATH, and its `ip` applet lacks most of iproute2, so `ip` is redirected.
   */
  sh(script: string, options: { netns?: string; timeoutMs?: number } = {}): Promise<CommandResult> {
    return this.run({ command: 'sh', args: ['-c', `ip() { /usr/sbin/ip "$@"; }\n${script}`], ...options });
  }

  /** A long-running process in the guest (a server in a pod namespace, say); it has no deadline. */
  async spawn(spec: Omit<CommandSpec, 'timeoutMs' | 'okExitCodes'>): Promise<BackgroundProcess> {
    const { pid } = (await this.#request({ op: 'spawn', spec })) as { pid: number };
    return {
      pid,
      output: async () => (await this.#request({ op: 'output', pid })) as Awaited<ReturnType<BackgroundProcess['output']>>,
      stop: async () => (await this.#request({ op: 'kill', pid })) as { stdout: string; stderr: string },
    };
  }

  /**
   * A long-running process in the guest with its stdin kept open (a helper that takes requests line by line). Its
   * output is fetched by reads that wait in the guest until something arrives, so an answer comes back within one
   * round trip, not a polling interval.
   */
  async spawnInteractive(spec: Omit<CommandSpec, 'timeoutMs' | 'okExitCodes' | 'input'>): Promise<InteractiveProcess> {
    const { pid } = (await this.#request({ op: 'spawn', spec, interactive: true })) as { pid: number };
    const request = (body: Record<string, unknown>) => this.#request(body);
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let writes = Promise.resolve();
    const stdin = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        writes = writes.then(() => request({ op: 'write', pid, data: chunk.toString('utf8') }).then(() => undefined));
        writes.then(() => callback(), (error: Error) => callback(error));
      },
      final(callback) {
        writes = writes.then(() => request({ op: 'write', pid, end: true }).then(() => undefined));
        writes.then(() => callback(), (error: Error) => callback(error));
      },
    });
    const emitter = new EventEmitter();
    let ended = false;
    let killed = false;
    const finish = (code: number | null, signal: NodeJS.Signals | null) => {
      ended = true;
      stdout.end();
      stderr.end();
      emitter.emit('close', code, signal);
    };
    void (async () => {
      for (;;) {
        let chunk: { stdout: string; stderr: string; exit: { exitCode: number | null; signal: string | null } | null };
        try {
          chunk = (await request({ op: 'read', pid, waitMs: interactiveReadWaitMs })) as typeof chunk;
        } catch (error) {
          // The guest closed, or the process is gone from its table (killed): it has ended either way. Unless this
          // side killed it, why goes to its stderr, which its readers show (a guest that died says so there).
          if (!killed) stderr.write(`${(error as Error).message}\n`);
          return finish(null, 'SIGKILL');
        }
        if (chunk.stdout) stdout.write(chunk.stdout);
        if (chunk.stderr) stderr.write(chunk.stderr);
        if (chunk.exit) return finish(chunk.exit.exitCode, chunk.exit.signal as NodeJS.Signals | null);
      }
    })();
    const child: InteractiveProcess = {
      pid,
      stdin,
      stdout,
      stderr,
      once(event, listener) {
        emitter.once(event, listener);
        return child;
      },
      kill: () => {
        // After its end the pid may be another process's: only a process still running is killed.
        if (ended) return false;
        killed = true;
        void request({ op: 'kill', pid }).catch(() => undefined);
        return true;
      },
    };
    return child;
  }

  async writeFile(path: string, content: string | Buffer, mode = 0o644): Promise<void> {
    await this.#request({ op: 'writeFile', path, mode, data: Buffer.from(content).toString('base64') });
  }

  async readFile(path: string): Promise<string> {
    return Buffer.from((await this.#request({ op: 'readFile', path })) as string, 'base64').toString('utf8');
  }

  /** Powers the guest off (it is all in memory: nothing to save) and removes the temporary directory. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#socket.destroy();
    if (this.#qemu.exitCode === null && this.#qemu.signalCode === null) this.#qemu.kill('SIGKILL');
    await this.#exited;
    rmSync(this.#workDir, { recursive: true, force: true });
  }

  #request(body: Record<string, unknown>): Promise<unknown> {
    if (this.#closed) return Promise.reject(new Error('the guest is closed'));
    // Once qemu or its port is gone, nothing would ever answer: a later request fails as the pending ones did.
    if (this.#failure) return Promise.reject(this.#failure);
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#socket.write(`${JSON.stringify({ id, ...body })}\n`);
    });
  }

  #listen(initial: string): void {
    // A reply can be megabytes (ipvsadm -Sn of 100,000 real servers) arriving in small chunks: the chunks are kept
    // in a list and joined once its newline arrives, so that receiving it stays linear in its size.
    let parts: string[] = [];
    const take = (chunk: string): void => {
      let newline: number;
      while ((newline = chunk.indexOf('\n')) >= 0) {
        parts.push(chunk.slice(0, newline));
        const line = parts.join('');
        parts = [];
        chunk = chunk.slice(newline + 1);
        if (line.trim()) this.#settle(JSON.parse(line) as Reply);
      }
      if (chunk) parts.push(chunk);
    };
    this.#socket.setEncoding('utf8');
    this.#socket.on('data', (chunk: string) => take(chunk));
    this.#socket.on('close', () => this.#failPending(new Error('the guest closed its RPC port')));
    take(initial);
  }

  #settle(reply: Reply): void {
    if (reply.id === null) return;
    const waiter = this.#pending.get(reply.id);
    if (!waiter) return;
    this.#pending.delete(reply.id);
    if (reply.ok) waiter.resolve(reply.value);
    else waiter.reject(new Error(`guest: ${reply.error ?? 'failed'}`));
  }

  #failPending(error: Error): void {
    this.#failure ??= error;
    for (const waiter of this.#pending.values()) waiter.reject(error);
    this.#pending.clear();
  }
}

function buildImageOrThrow(): GuestImage {
  const kernel = findGuestKernel();
  if ('missing' in kernel) throw new Error(kernel.missing);
  return buildGuestImage(kernel);
}

function readConsole(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

async function connectWhenListening(path: string, qemu: ChildProcess, timeoutMs: number, stderr: () => string): Promise<Socket> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (qemu.exitCode !== null) throw new Error(`qemu exited with ${qemu.exitCode}: ${stderr()}`);
    if (existsSync(path)) {
      try {
        return await new Promise<Socket>((resolve, reject) => {
          const socket = connect(path, () => resolve(socket));
          socket.once('error', reject);
        });
      } catch {
        // Not listening yet.
      }
    }
    if (Date.now() > deadline) throw new Error(`qemu did not open ${path} within ${timeoutMs}ms: ${stderr()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Waits for the agent's ready line; returns it and whatever arrived after it. */
function firstMessage(socket: Socket, qemu: ChildProcess, timeoutMs: number, diagnostics: () => string): Promise<Reply & { rest: string }> {
  return new Promise((resolve, reject) => {
    let buffered = '';
    const cleanup = (): void => {
      clearTimeout(timer);
      socket.off('data', onData);
      qemu.off('exit', onExit);
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`the guest did not come up within ${timeoutMs}ms; console:\n${diagnostics().slice(-3000)}`));
    }, timeoutMs);
    const onExit = (): void => {
      cleanup();
      reject(new Error(`qemu exited during boot; console:\n${diagnostics().slice(-3000)}`));
    };
    const onData = (chunk: Buffer): void => {
      buffered += chunk.toString('utf8');
      const newline = buffered.indexOf('\n');
      if (newline < 0) return;
      cleanup();
      try {
        resolve({ ...(JSON.parse(buffered.slice(0, newline)) as Reply), rest: buffered.slice(newline + 1) });
      } catch (error) {
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    };
    socket.on('data', onData);
    qemu.once('exit', onExit);
  });
}
