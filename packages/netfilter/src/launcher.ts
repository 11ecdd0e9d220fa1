import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { closeSync, openSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** One command to start: the file and its arguments as exec sees them, its stdin and its environment. */
export interface Launch {
  readonly file: string;
  readonly argv: readonly string[];
  readonly input?: string;
  readonly env: NodeJS.ProcessEnv;
}

/** How a launched command ended: it exited (or was killed), or it never started. */
export type LaunchEnd =
  | { readonly code: number | null; readonly signal: NodeJS.Signals | null; readonly stdout: string; readonly stderr: string }
  | { readonly spawnError: string };

export interface LaunchedCommand {
  /** Settles once, never rejects. */
  readonly ended: Promise<LaunchEnd>;
  /**
   * Kills the command's process group (each command leads one, so that what it started goes too). It then ends on
   * its exit, without waiting for pipes that a descendant which left the group may still hold open.
   */
  kill(): void;
}

/** Starts commands. ExecRunner decides deadlines, errors and logging; a launcher only starts and ends processes. */
export interface Launcher {
  launch(launch: Launch): LaunchedCommand;
}

/** Inputs above this size reach the tool's stdin from a file rather than through a pipe. */
const LARGE_INPUT_BYTES = 64 * 1024;

/**
 * A large input (a restore or an nft transaction of megabytes) written to a temporary file, for the tool's stdin.
 * Through a pipe from the agent, the input moves one pipe buffer (64 KiB) per turn of the event loop: while the agent
 * keeps the loop busy (building the next transaction), the tool waits for its input, and nft reads all of its input
 * before it parses any. Undefined when the input is small or no file can be written (a read-only filesystem): a pipe
 * then carries it.
 */
function largeInputPath(input: string): string | undefined {
  // A UTF-16 unit is at most three bytes of UTF-8: most inputs are known small without counting.
  if (input.length * 3 < LARGE_INPUT_BYTES) return undefined;
  // Encoded once, to be measured and written.
  const bytes = Buffer.from(input);
  if (bytes.length < LARGE_INPUT_BYTES) return undefined;
  const path = join(tmpdir(), `kube-router-input-${process.pid}-${randomUUID()}`);
  try {
    writeFileSync(path, bytes, { mode: 0o600, flag: 'wx' });
    return path;
  } catch {
    removeFile(path);
    return undefined;
  }
}

/** The file open for reading and already unlinked: it lives as long as the descriptors on it. */
function openUnlinked(path: string): number | undefined {
  try {
    return openSync(path, 'r');
  } catch {
    return undefined;
  } finally {
    removeFile(path);
  }
}

function removeFile(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Never written, or already gone.
  }
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
}

/** Spawns from this process: each spawn copies its page tables, a few milliseconds of the event loop when it is large. */
export const inProcessLauncher: Launcher = {
  launch(launch: Launch): LaunchedCommand {
    const inputPath = launch.input === undefined ? undefined : largeInputPath(launch.input);
    const inputFile = inputPath === undefined ? undefined : openUnlinked(inputPath);
    let settle: (end: LaunchEnd) => void = () => undefined;
    const ended = new Promise<LaunchEnd>((resolve) => (settle = resolve));
    let child: ChildProcess;
    try {
      child = spawn(launch.file, [...launch.argv], {
        stdio: [inputFile ?? (launch.input === undefined ? 'ignore' : 'pipe'), 'pipe', 'pipe'],
        // Its own process group, so that a kill also ends whatever the tool started.
        detached: true,
        env: launch.env,
      });
    } catch (error) {
      // Some failures (an argument Node refuses) throw here instead of arriving as 'error'.
      if (inputFile !== undefined) closeSync(inputFile);
      settle({ spawnError: error instanceof Error ? error.message : String(error) });
      return { ended, kill: () => undefined };
    }
    // The child holds its own descriptor of the file now.
    if (inputFile !== undefined) closeSync(inputFile);
    endOf(child, launch.input !== undefined && inputFile === undefined ? launch.input : undefined, settle);
    let killed = false;
    return {
      ended,
      kill: () => {
        if (killed) return;
        killed = true;
        killGroup(child);
        // A descendant that left the process group may still hold stdout open, and 'close' would wait for it.
        const dropPipes = () => {
          child.stdout?.destroy();
          child.stderr?.destroy();
        };
        if (child.exitCode !== null || child.signalCode !== null) dropPipes();
        else child.once('exit', dropPipes);
      },
    };
  },
};

function endOf(child: ChildProcess, pipedInput: string | undefined, settle: (end: LaunchEnd) => void): void {
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  child.stdout?.on('data', (chunk: Buffer) => stdout.push(chunk));
  child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));
  if (pipedInput !== undefined && child.stdin) {
    // A tool that exits before reading all its input makes the write fail with EPIPE; its exit status tells why.
    child.stdin.on('error', () => {});
    child.stdin.end(pipedInput);
  }
  let done = false;
  const finish = (end: LaunchEnd) => {
    if (done) return;
    done = true;
    settle(end);
  };
  child.on('error', (error) => finish({ spawnError: error.message }));
  const exited = (code: number | null, signal: NodeJS.Signals | null) =>
    finish({ code, signal, stdout: Buffer.concat(stdout).toString('utf8'), stderr: Buffer.concat(stderr).toString('utf8') });
  child.on('close', exited);
  // After a kill, the pipes were destroyed: 'close' follows 'exit' at once, with what was read until then.
}

/**
 * The helper: a small Node process of its own that spawns the agent's commands. Spawning copies the spawning process's
 * page tables; from an agent holding a large cluster (600 MiB) that blocked its event loop 6-10 ms per command, on
 * every sync. The helper stays small, so it spawns in about a millisecond, on another thread of the machine. Plain
 * CommonJS given to `node -e`, so that it runs the same from the package's sources and from its build, whatever
 * loader the agent was started with. It exits when the agent goes (its IPC channel closes), killing what it started.
 */
const HELPER_SOURCE = `
'use strict';
const { spawn } = require('node:child_process');
const { openSync, closeSync, unlinkSync } = require('node:fs');
const running = new Map();
const send = (message) => { if (process.connected) process.send(message); };
const killGroup = (child) => {
  if (child.pid === undefined) return;
  try { process.kill(-child.pid, 'SIGKILL'); } catch { child.kill('SIGKILL'); }
};
process.on('message', (message) => {
  if (message.type === 'kill') {
    const entry = running.get(message.id);
    if (!entry || entry.killed) return;
    entry.killed = true;
    killGroup(entry.child);
    const dropPipes = () => { entry.child.stdout?.destroy(); entry.child.stderr?.destroy(); };
    if (entry.child.exitCode !== null || entry.child.signalCode !== null) dropPipes();
    else entry.child.once('exit', dropPipes);
    return;
  }
  const { id, file, argv, input, inputPath, env } = message;
  let inputFile;
  if (inputPath !== undefined) {
    try { inputFile = openSync(inputPath, 'r'); } catch (error) { send({ type: 'end', id, spawnError: 'cannot read its input: ' + error.message }); return; }
    finally { try { unlinkSync(inputPath); } catch {} }
  }
  let child;
  try {
    child = spawn(file, argv, { stdio: [inputFile ?? (input === undefined ? 'ignore' : 'pipe'), 'pipe', 'pipe'], detached: true, env });
  } catch (error) {
    if (inputFile !== undefined) closeSync(inputFile);
    send({ type: 'end', id, spawnError: error.message });
    return;
  }
  if (inputFile !== undefined) closeSync(inputFile);
  const entry = { child, killed: false };
  running.set(id, entry);
  const stdout = [];
  const stderr = [];
  child.stdout.on('data', (chunk) => stdout.push(chunk));
  child.stderr.on('data', (chunk) => stderr.push(chunk));
  if (input !== undefined && child.stdin) { child.stdin.on('error', () => {}); child.stdin.end(input); }
  let done = false;
  const finish = (end) => { if (done) return; done = true; running.delete(id); send({ type: 'end', id, ...end }); };
  child.on('error', (error) => finish({ spawnError: error.message }));
  child.on('close', (code, signal) => finish({ code, signal, stdout: Buffer.concat(stdout).toString('utf8'), stderr: Buffer.concat(stderr).toString('utf8') }));
});
// A Ctrl-C or a SIGTERM to the agent's process group is the agent's to handle: it kills its commands through this
// helper while it stops, and the helper goes when the agent does.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => {});
process.on('disconnect', () => {
  for (const { child } of running.values()) killGroup(child);
  process.exit(0);
});
`;

interface Pending {
  readonly settle: (end: LaunchEnd) => void;
  readonly inputPath: string | undefined;
}

type HelperMessage = { readonly type: 'end'; readonly id: number } & LaunchEnd;

/**
 * Starts commands through the helper process (see HELPER_SOURCE), started on first use. When the helper cannot start,
 * commands spawn from this process instead; when it dies, the commands it was running fail and the next one starts a
 * new helper.
 */
export class HelperLauncher implements Launcher {
  #helper: ChildProcess | undefined;
  #unavailable = false;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;

  launch(launch: Launch): LaunchedCommand {
    const helper = this.#unavailable ? undefined : this.#started();
    if (!helper?.connected) return inProcessLauncher.launch(launch);
    const id = this.#nextId++;
    const inputPath = launch.input === undefined ? undefined : largeInputPath(launch.input);
    let settle: (end: LaunchEnd) => void = () => undefined;
    const ended = new Promise<LaunchEnd>((resolve) => (settle = resolve));
    this.#pending.set(id, { settle, inputPath });
    // The channel keeps this process alive only while a command runs, as a child process of its own would.
    helper.channel?.ref();
    // A helper that is going sends no answer: its exit fails this command with the others it had.
    helper.send({
      type: 'spawn',
      id,
      file: launch.file,
      argv: launch.argv,
      env: launch.env,
      ...(inputPath === undefined ? (launch.input === undefined ? {} : { input: launch.input }) : { inputPath }),
    }, (error) => {
      if (error) this.#lost(helper, `the command helper is gone: ${error.message}`);
    });
    return {
      ended,
      kill: () => {
        if (this.#pending.has(id) && helper.connected) helper.send({ type: 'kill', id });
      },
    };
  }

  #started(): ChildProcess | undefined {
    if (this.#helper) return this.#helper;
    let helper: ChildProcess;
    try {
      const env = { ...process.env };
      // Options meant for the agent (a loader, a heap size) are not the helper's.
      delete env.NODE_OPTIONS;
      helper = spawn(process.execPath, ['-e', HELPER_SOURCE], {
        stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
        // Strings and buffers cross the channel as they are, without JSON's escaping of megabyte inputs.
        serialization: 'advanced',
        env,
      });
    } catch {
      this.#unavailable = true;
      return undefined;
    }
    helper.unref();
    helper.channel?.unref();
    helper.on('message', (message: HelperMessage) => {
      const pending = this.#pending.get(message.id);
      if (!pending) return;
      this.#pending.delete(message.id);
      if (this.#pending.size === 0) helper.channel?.unref();
      const { type: _type, id: _id, ...end } = message;
      pending.settle(end as LaunchEnd);
    });
    helper.on('error', () => {
      // It could not be started (or signalled): commands spawn from this process from now on.
      this.#unavailable = true;
      this.#lost(helper, 'the command helper could not start');
    });
    helper.on('exit', (code, signal) => this.#lost(helper, `the command helper exited (${signal ?? `code ${code}`})`));
    this.#helper = helper;
    return helper;
  }

  /** The helper went: what it was running is failed, and the next command starts a new one. */
  #lost(helper: ChildProcess, why: string): void {
    if (this.#helper !== helper) return;
    this.#helper = undefined;
    // One that lost its channel but still runs would exit on its own; it is told at once.
    if (helper.exitCode === null && helper.signalCode === null) helper.kill('SIGKILL');
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const { settle, inputPath } of pending) {
      if (inputPath !== undefined) removeFile(inputPath);
      settle({ spawnError: why });
    }
  }
}

/** The helper that every ExecRunner uses unless told otherwise: one per agent process. */
export const sharedHelperLauncher = new HelperLauncher();
