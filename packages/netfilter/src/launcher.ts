import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { closeSync, openSync, unlinkSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
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
  | {
      readonly code: number | null;
      readonly signal: NodeJS.Signals | null;
      readonly stdout: string;
      readonly stderr: string;
      /** From the spawn to the exit, when the launcher measured it (the helper's start is not the command's time). */
      readonly durationMs?: number;
      /** The command started but its end was not seen as it was (its helper went and killed it, its output was lost). */
      readonly lostBecause?: string;
    }
  | { readonly spawnError: string };

export interface LaunchedCommand {
  /** Settles once, never rejects. */
  readonly ended: Promise<LaunchEnd>;
  /**
   * Kills the command's process group (each command leads one, so that what it started goes too). It then ends on
   * its exit, without waiting for pipes that a descendant which left the group may still hold open. False when the
   * command had ended already (its end may still be on its way): nothing was killed.
   */
  kill(): boolean;
}

/** Starts commands. ExecRunner decides deadlines, errors and logging; a launcher only starts and ends processes. */
export interface Launcher {
  launch(launch: Launch): LaunchedCommand;
  /** Gets ready for the first command ahead of it (the helper starts). */
  prepare?(): void;
}

/** Inputs above this size reach the tool's stdin from a file rather than through a pipe. */
const LARGE_INPUT_BYTES = 64 * 1024;
/** Outputs above this size come back from the helper in a file rather than in a message. */
const LARGE_OUTPUT_BYTES = 1024 * 1024;

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
      return { ended, kill: () => false };
    }
    // The child holds its own descriptor of the file now.
    if (inputFile !== undefined) closeSync(inputFile);
    const spawned = performance.now();
    let over = false;
    endOf(child, launch.input !== undefined && inputFile === undefined ? launch.input : undefined, (end) => {
      over = true;
      settle('spawnError' in end ? end : { ...end, durationMs: performance.now() - spawned });
    });
    let killed = false;
    return {
      ended,
      kill: () => {
        if (killed) return true;
        if (over) return false;
        killed = true;
        killGroup(child);
        // A descendant that left the process group may still hold stdout open, and 'close' would wait for it.
        const dropPipes = () => {
          child.stdout?.destroy();
          child.stderr?.destroy();
        };
        if (child.exitCode !== null || child.signalCode !== null) dropPipes();
        else child.once('exit', dropPipes);
        return true;
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
const { openSync, closeSync, unlinkSync, writeFileSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');
const { randomUUID } = require('node:crypto');
const LARGE_OUTPUT_BYTES = ${LARGE_OUTPUT_BYTES};
const running = new Map();
const send = (message) => { if (process.connected) process.send(message); };
const killGroup = (child) => {
  if (child.pid === undefined) return;
  try { process.kill(-child.pid, 'SIGKILL'); } catch { child.kill('SIGKILL'); }
};
// A large output (an nft listing of megabytes) goes through a file: the agent reads it off its event loop, instead of
// parsing it out of the channel in one piece.
const output = (bytes) => {
  if (bytes.length < LARGE_OUTPUT_BYTES) return { stdout: bytes.toString('utf8') };
  const path = join(tmpdir(), 'kube-router-output-' + process.pid + '-' + randomUUID());
  try { writeFileSync(path, bytes, { mode: 0o600, flag: 'wx' }); return { stdoutPath: path }; }
  catch { return { stdout: bytes.toString('utf8') }; }
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
  const spawned = performance.now();
  const entry = { child, killed: false };
  running.set(id, entry);
  if (child.pid !== undefined) send({ type: 'started', id, pid: child.pid });
  const stdout = [];
  const stderr = [];
  // Absent when the spawn failed before making them (EMFILE): the 'error' below ends the command.
  child.stdout?.on('data', (chunk) => stdout.push(chunk));
  child.stderr?.on('data', (chunk) => stderr.push(chunk));
  if (input !== undefined && child.stdin) { child.stdin.on('error', () => {}); child.stdin.end(input); }
  let done = false;
  const finish = (end) => {
    if (done) return;
    done = true;
    running.delete(id);
    // The agent is gone: nobody will read the output file.
    if (!process.connected && end.stdoutPath !== undefined) { try { unlinkSync(end.stdoutPath); } catch {} }
    send({ type: 'end', id, ...end });
  };
  child.on('error', (error) => finish({ spawnError: error.message }));
  child.on('close', (code, signal) => finish({
    code, signal, ...output(Buffer.concat(stdout)), stderr: Buffer.concat(stderr).toString('utf8'), durationMs: performance.now() - spawned,
  }));
});
// A Ctrl-C or a SIGTERM to the agent's process group is the agent's to handle: it kills its commands through this
// helper while it stops, and the helper goes when the agent does.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => {});
process.on('disconnect', () => {
  for (const { child } of running.values()) killGroup(child);
  process.exit(0);
});
// Before any answer: a helper that goes without having said so started no command.
send({ type: 'ready' });
`;

interface Pending {
  readonly launch: Launch;
  readonly settle: (end: LaunchEnd) => void;
  readonly inputPath: string | undefined;
  /** Known once the helper said it started the command. */
  pid?: number;
  /** When the helper could not start after all, the command's own in-process launch. */
  inProcess?: LaunchedCommand;
  /** kill() was called: a command moved in-process is not started at all. */
  killed?: boolean;
}

type ExitEnd = Extract<LaunchEnd, { code: unknown }>;

type HelperMessage =
  | { readonly type: 'ready' }
  | { readonly type: 'started'; readonly id: number; readonly pid: number }
  | ({ readonly type: 'end'; readonly id: number } & (
      | { readonly spawnError: string }
      // A large output is in the file at stdoutPath instead.
      | (Omit<ExitEnd, 'stdout'> & ({ readonly stdout: string } | { readonly stdoutPath: string }))
    ));

/** After the helper could not be started, commands spawn in-process for this long before it is tried again. */
const HELPER_RETRY_MS = 30_000;

/**
 * Starts commands through the helper process (see HELPER_SOURCE), started ahead of the first command. When the helper
 * cannot start, commands spawn from this process instead (the helper is tried again later); when it dies, the
 * commands it was running are killed and failed, and the next one starts a new helper.
 */
export class HelperLauncher implements Launcher {
  #helper: ChildProcess | undefined;
  /** Whether the current helper said it is ready (one that never did started no command). */
  #ready = false;
  #retryAt = 0;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  readonly #nodePath: string;

  /** @param nodePath The Node binary that runs the helper (a test's stand-in for one that cannot start). */
  constructor(options: { readonly nodePath?: string } = {}) {
    this.#nodePath = options.nodePath ?? process.execPath;
  }

  prepare(): void {
    if (performance.now() >= this.#retryAt) this.#started();
  }

  launch(launch: Launch): LaunchedCommand {
    const helper = performance.now() < this.#retryAt ? undefined : this.#started();
    if (!helper?.connected) return inProcessLauncher.launch(launch);
    const id = this.#nextId++;
    const inputPath = launch.input === undefined ? undefined : largeInputPath(launch.input);
    let settle: (end: LaunchEnd) => void = () => undefined;
    const ended = new Promise<LaunchEnd>((resolve) => (settle = resolve));
    const message = {
      type: 'spawn',
      id,
      file: launch.file,
      argv: launch.argv,
      env: launch.env,
      ...(inputPath === undefined ? (launch.input === undefined ? {} : { input: launch.input }) : { inputPath }),
    };
    const pending: Pending = { launch, settle, inputPath };
    this.#pending.set(id, pending);
    // The channel keeps this process alive only while a command runs, as a child process of its own would.
    helper.channel?.ref();
    // A helper that is going sends no answer: its going fails this command with the others it had.
    helper.send(message, (error) => {
      if (error) this.#lost(helper, `the command helper is gone: ${error.message}`);
    });
    return {
      ended,
      kill: () => {
        pending.killed = true;
        if (pending.inProcess) return pending.inProcess.kill();
        // Ended already: its output may still be being read.
        if (!this.#pending.has(id)) return false;
        if (helper.connected) {
          helper.send({ type: 'kill', id }, (error) => {
            if (error) this.#lost(helper, `the command helper is gone: ${error.message}`);
          });
        } else {
          this.#lost(helper, 'the command helper is gone');
        }
        return true;
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
      helper = spawn(this.#nodePath, ['-e', HELPER_SOURCE], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], env });
    } catch {
      this.#retryAt = performance.now() + HELPER_RETRY_MS;
      return undefined;
    }
    helper.unref();
    helper.channel?.unref();
    helper.on('message', (message: HelperMessage) => this.#answer(helper, message));
    helper.on('error', (error) => {
      // Never started (no process): the commands sent to it run in-process, and so do the next ones for a while.
      if (helper.pid === undefined) {
        this.#lost(helper, `the command helper could not start: ${error.message}`);
        return;
      }
      this.#lost(helper, `the command helper failed: ${error.message}`);
    });
    // On the channel's end, not the exit: the messages sent before it (which commands started, which ended) are all
    // read by then, which the exit does not wait for.
    const exited = () => `the command helper exited (${helper.signalCode ?? `code ${helper.exitCode}`})`;
    helper.on('disconnect', () => {
      if (helper.exitCode !== null || helper.signalCode !== null) this.#lost(helper, exited());
      else helper.once('exit', () => this.#lost(helper, exited()));
    });
    this.#ready = false;
    this.#helper = helper;
    return helper;
  }

  #answer(helper: ChildProcess, message: HelperMessage): void {
    if (message.type === 'ready') {
      if (this.#helper === helper) this.#ready = true;
      return;
    }
    const pending = this.#pending.get(message.id);
    if (message.type === 'started') {
      if (pending) pending.pid = message.pid;
      return;
    }
    const { type: _type, id: _id, ...end } = message;
    if (!pending) {
      // Its command was failed already (the helper was lost): nobody will read the output.
      if ('stdoutPath' in end) removeFile(end.stdoutPath);
      return;
    }
    this.#pending.delete(message.id);
    if (this.#pending.size === 0) helper.channel?.unref();
    if (!('stdoutPath' in end)) {
      pending.settle(end);
      return;
    }
    const { stdoutPath, ...rest } = end;
    // Read on libuv's threads, not on the event loop in one piece.
    readFile(stdoutPath, 'utf8')
      .then(
        (stdout) => pending.settle({ ...rest, stdout }),
        (error: Error) => pending.settle({ ...rest, stdout: '', lostBecause: `its output could not be read: ${error.message}` }),
      )
      .finally(() => removeFile(stdoutPath));
  }

  /** The commands sent to a helper that never started, launched in-process instead. */
  #runInProcess(): void {
    for (const [id, pending] of this.#pending) {
      this.#pending.delete(id);
      if (pending.inputPath !== undefined) removeFile(pending.inputPath);
      if (pending.killed) {
        pending.settle({ code: null, signal: 'SIGKILL', stdout: '', stderr: '', lostBecause: 'killed before it started' });
        continue;
      }
      pending.inProcess = inProcessLauncher.launch(pending.launch);
      void pending.inProcess.ended.then(pending.settle);
    }
  }

  /**
   * The helper went: the commands it was running are killed (they would run on without a deadline, holding locks such
   * as xtables') and failed, and the next command starts a new helper.
   */
  #lost(helper: ChildProcess, why: string): void {
    if (this.#helper !== helper) return;
    this.#helper = undefined;
    // One that lost its channel but still runs kills its commands and exits on its own once disconnected.
    if (helper.connected) helper.disconnect();
    if (!this.#ready) {
      // It started no command: they run in-process, and so do the next ones for a while (it may fail again at once).
      this.#retryAt = performance.now() + HELPER_RETRY_MS;
      this.#runInProcess();
      return;
    }
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const { settle, inputPath, pid } of pending) {
      if (inputPath !== undefined) removeFile(inputPath);
      if (pid !== undefined) {
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
      }
      const lostBecause = pid === undefined ? `${why} before it said whether it started the command` : `killed: ${why}`;
      settle({ code: null, signal: 'SIGKILL', stdout: '', stderr: '', lostBecause });
    }
  }
}

/** The helper that every ExecRunner uses unless told otherwise: one per agent process. */
export const sharedHelperLauncher = new HelperLauncher();
