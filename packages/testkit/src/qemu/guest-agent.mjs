/* global process, Buffer, performance, setTimeout, clearTimeout */
// The agent inside the QEMU guest: newline-delimited JSON requests over a virtio-serial port, one reply per request.
// It is plain JavaScript without dependencies because the guest has node and nothing else from the workspace.
//
// Requests: { id, op: 'run', spec }        one command to completion (the CommandSpec of @kube-router/netfilter)
//           { id, op: 'spawn', spec, interactive? }  a background process; replies with its pid. An interactive
//                                          one keeps its stdin open for 'write' and is read with 'read'.
//           { id, op: 'write', pid, data, end? }  writes to an interactive process's stdin (end closes it)
//           { id, op: 'read', pid, waitMs }  what it wrote since the last read, waiting up to waitMs for something
//           { id, op: 'output', pid }      what a background process wrote so far, and whether it exited
//           { id, op: 'kill', pid }        ends a background process group
//           { id, op: 'writeFile', path, data }   data is base64
//           { id, op: 'readFile', path }
//           { id, op: 'ping' }
// Replies:  { id, ok: true, value } or { id, ok: false, error }
import { spawn } from 'node:child_process';
import { mkdirSync, openSync, readFileSync, writeFileSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { Worker } from 'node:worker_threads';

const portPath = process.argv[2];
if (!portPath) throw new Error('usage: guest-agent.mjs <virtio-serial port device>');

// A virtio-serial port opens once (a second open is EBUSY): one read-write descriptor, shared with the reader thread.
const portFd = openSync(portPath, 'r+');
const background = new Map();

function send(message) {
  const bytes = Buffer.from(`${JSON.stringify(message)}\n`);
  let offset = 0;
  while (offset < bytes.length) offset += writeSync(portFd, bytes, offset);
}

function runCommand(spec, onSpawn, interactive = false) {
  const args = spec.args ?? [];
  const [file, argv] = spec.netns ? ['ip', ['netns', 'exec', spec.netns, spec.command, ...args]] : [spec.command, args];
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(file, argv, {
      stdio: [spec.input === undefined && !interactive ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      detached: true,
      env: { ...process.env, LC_ALL: 'C' },
    });
    onSpawn?.(child);
    const stdout = [];
    const stderr = [];
    let timedOut = false;
    let settled = false;
    const timer =
      spec.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            killGroup(child.pid);
          }, spec.timeoutMs);
    // A spawned process's output is kept by its caller (its table entry, for 'output' and 'read' requests): kept here
    // too, it would be held twice, an interactive one's for its whole life.
    if (!onSpawn) {
      child.stdout.on('data', (chunk) => stdout.push(chunk));
      child.stderr.on('data', (chunk) => stderr.push(chunk));
    }
    if (interactive) child.stdin.on('error', () => {});
    else if (spec.input !== undefined) {
      child.stdin.on('error', () => {});
      child.stdin.end(spec.input);
    }
    const finish = (value) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...value, durationMs: Math.round((performance.now() - started) * 10) / 10 });
    };
    child.on('error', (error) => finish({ stdout: '', stderr: '', exitCode: null, signal: null, spawnError: error.message }));
    child.on('close', (code, signal) =>
      finish({
        stdout: Buffer.concat(stdout).toString('utf8'),
        stderr: Buffer.concat(stderr).toString('utf8'),
        exitCode: code,
        signal,
        timedOut,
      }),
    );
  });
}

function killGroup(pid) {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

async function handle(request) {
  switch (request.op) {
    case 'ping':
      return { uptimeSeconds: Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) };
    case 'run':
      return runCommand(request.spec);
    case 'spawn': {
      // `unread` is what 'read' has not returned yet; `wake` ends a 'read' that waits for output.
      const entry = { stdout: '', stderr: '', exit: undefined, child: undefined, unread: { stdout: '', stderr: '' }, wake: undefined };
      const notify = () => entry.wake?.();
      const done = runCommand(
        request.spec,
        (child) => {
          entry.child = child;
          // Whole characters: a multi-byte one split across two chunks must not become two broken ones.
          if (request.interactive) {
            child.stdout.setEncoding('utf8');
            child.stderr.setEncoding('utf8');
          }
          child.stdout.on('data', (chunk) => {
            if (request.interactive) entry.unread.stdout += chunk;
            else entry.stdout += chunk;
            notify();
          });
          child.stderr.on('data', (chunk) => {
            if (request.interactive) entry.unread.stderr += chunk;
            else entry.stderr += chunk;
            notify();
          });
        },
        request.interactive === true,
      );
      void done.then((result) => {
        entry.exit = { exitCode: result.exitCode, signal: result.signal, spawnError: result.spawnError };
        notify();
      });
      const pid = entry.child?.pid;
      if (pid === undefined) {
        const result = await done;
        throw new Error(`could not start ${request.spec.command}: ${result.spawnError ?? 'no pid'}`);
      }
      background.set(pid, entry);
      return { pid };
    }
    case 'output': {
      const entry = background.get(request.pid);
      if (!entry) throw new Error(`no background process ${request.pid}`);
      return { stdout: entry.stdout, stderr: entry.stderr, exit: entry.exit ?? null };
    }
    case 'write': {
      const entry = background.get(request.pid);
      if (!entry?.child?.stdin) throw new Error(`no interactive process ${request.pid}`);
      if (request.data) entry.child.stdin.write(request.data);
      if (request.end) entry.child.stdin.end();
      return null;
    }
    case 'read': {
      const entry = background.get(request.pid);
      if (!entry) throw new Error(`no background process ${request.pid}`);
      const pending = () => entry.unread.stdout !== '' || entry.unread.stderr !== '' || entry.exit !== undefined;
      if (!pending() && request.waitMs > 0) {
        await new Promise((resolve) => {
          const timer = setTimeout(resolve, request.waitMs);
          entry.wake = () => (clearTimeout(timer), resolve());
        });
        entry.wake = undefined;
      }
      const unread = entry.unread;
      entry.unread = { stdout: '', stderr: '' };
      if (entry.exit !== undefined) background.delete(request.pid);
      return { ...unread, exit: entry.exit ?? null };
    }
    case 'kill': {
      const entry = background.get(request.pid);
      // Only a process of ours that still runs: the pid of one that ended may be another command's group by now.
      if (entry !== undefined && entry.exit === undefined) killGroup(request.pid);
      background.delete(request.pid);
      return { stdout: entry?.stdout ?? '', stderr: entry?.stderr ?? '' };
    }
    case 'writeFile':
      mkdirSync(dirname(request.path), { recursive: true });
      writeFileSync(request.path, Buffer.from(request.data, 'base64'), { mode: request.mode ?? 0o644 });
      return null;
    case 'readFile':
      return readFileSync(request.path).toString('base64');
    default:
      throw new Error(`unknown op ${request.op}`);
  }
}

function dispatch(line) {
  if (!line.trim()) return;
  let request;
  try {
    request = JSON.parse(line);
  } catch {
    send({ id: null, ok: false, error: `unparsable request: ${line.slice(0, 200)}` });
    return;
  }
  handle(request).then(
    (value) => send({ id: request.id, ok: true, value }),
    (error) => send({ id: request.id, ok: false, error: error instanceof Error ? error.message : String(error) }),
  );
}

// Reads block, so they happen in a worker thread that forwards whole chunks; the main thread stays free to run
// commands while the next request is awaited.
const reader = new Worker(
  `const { parentPort, workerData } = require('node:worker_threads');
   const { readSync } = require('node:fs');
   const fd = workerData;
   const buffer = Buffer.alloc(1 << 20);
   for (;;) {
     const n = readSync(fd, buffer, 0, buffer.length, null);
     // 0 is end of file: the host went away (a crashed test), so the guest powers off instead of lingering.
     if (n === 0) process.exit(0);
     parentPort.postMessage(Buffer.from(buffer.subarray(0, n)).toString('utf8'));
   }`,
  { eval: true, workerData: portFd },
);
let pending = '';
reader.on('message', (chunk) => {
  pending += chunk;
  let newline;
  while ((newline = pending.indexOf('\n')) >= 0) {
    const line = pending.slice(0, newline);
    pending = pending.slice(newline + 1);
    dispatch(line);
  }
});
reader.on('error', (error) => {
  process.stderr.write(`guest agent reader failed: ${error.message}\n`);
  process.exit(1);
});

// Unsolicited and without an id: tells the host that the guest has booted and is listening.
send({ id: null, ok: true, value: { ready: true, kernel: readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim() } });
