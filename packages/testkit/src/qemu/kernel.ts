import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { ExecRunner } from '@kube-router/netfilter';
import type { CommandResult, CommandRunner, CommandSpec } from '@kube-router/netfilter';
import { QemuGuest, guestUnavailableReason, type BackgroundProcess, type GuestOptions } from './guest.js';

/**
 * A kernel to test against: this host's when it has what the test needs, otherwise a QEMU guest's. Tests written
 * against it run unchanged on either; `where` says which one they got.
 */
export interface TestKernel {
  readonly where: 'host' | 'guest';
  readonly runner: CommandRunner;
  /** Set when `where` is 'guest'. */
  readonly guest?: QemuGuest;
  sh(script: string, options?: { netns?: string; timeoutMs?: number }): Promise<CommandResult>;
  spawn(spec: Omit<CommandSpec, 'timeoutMs' | 'okExitCodes'>): Promise<BackgroundProcess>;
  writeFile(path: string, content: string, mode?: number): Promise<void>;
  close(): Promise<void>;
}

/** True when this host's kernel has IPVS loaded (modules cannot be loaded here, so loaded is what counts). */
export function hostHasIpvs(): boolean {
  return existsSync('/proc/net/ip_vs');
}

/** Why no IPVS kernel is available to tests, or undefined: for `describe.skipIf(...)` with the reason in its name. */
export function ipvsKernelUnavailableReason(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root';
  if (hostHasIpvs()) return undefined;
  const reason = guestUnavailableReason();
  return reason && `no IPVS on the host and no QEMU guest: ${reason}`;
}

/** The host's kernel when it has IPVS, else a booted guest. KUBE_ROUTER_TEST_KERNEL=guest forces the guest. */
export async function openIpvsKernel(options: GuestOptions = {}): Promise<TestKernel> {
  if (hostHasIpvs() && process.env.KUBE_ROUTER_TEST_KERNEL !== 'guest') return new HostKernel();
  const guest = await QemuGuest.boot(options);
  return {
    where: 'guest',
    guest,
    runner: guest.runner,
    sh: (script, shOptions) => guest.sh(script, shOptions),
    spawn: (spec) => guest.spawn(spec),
    writeFile: (path, content, mode) => guest.writeFile(path, content, mode),
    close: () => guest.close(),
  };
}

class HostKernel implements TestKernel {
  readonly where = 'host';
  readonly runner = new ExecRunner();
  readonly #children = new Set<number>();

  sh(script: string, options: { netns?: string; timeoutMs?: number } = {}): Promise<CommandResult> {
    return this.runner.run({ command: 'sh', args: ['-c', script], ...options });
  }

  async spawn(spec: Omit<CommandSpec, 'timeoutMs' | 'okExitCodes'>): Promise<BackgroundProcess> {
    const [file, argv] = spec.netns
      ? ['ip', ['netns', 'exec', spec.netns, spec.command, ...(spec.args ?? [])]]
      : [spec.command, [...(spec.args ?? [])]];
    const child = spawn(file, argv, { stdio: [spec.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'], detached: true });
    if (spec.input !== undefined) child.stdin?.end(spec.input);
    let stdout = '';
    let stderr = '';
    let exit: { exitCode: number | null; signal: string | null } | null = null;
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('exit', (exitCode, signal) => (exit = { exitCode, signal }));
    const pid = child.pid;
    if (pid === undefined) throw new Error(`could not start ${spec.command}`);
    this.#children.add(pid);
    return {
      pid,
      output: () => Promise.resolve({ stdout, stderr, exit }),
      stop: () => {
        this.#kill(pid);
        return Promise.resolve({ stdout, stderr });
      },
    };
  }

  writeFile(path: string, content: string, mode = 0o644): Promise<void> {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, content, { mode });
    return Promise.resolve();
  }

  close(): Promise<void> {
    for (const pid of this.#children) this.#kill(pid);
    return Promise.resolve();
  }

  #kill(pid: number): void {
    this.#children.delete(pid);
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
}
