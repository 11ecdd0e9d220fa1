import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';

/** GETs a URL and returns status and body text. */
export async function get(url: string): Promise<{ status: number; body: string }> {
  const response = await fetch(url);
  return { status: response.status, body: await response.text() };
}

export { freePort } from '@kube-router/testkit';

export interface LogLine {
  level: number;
  msg: string;
  controller?: string;
  [key: string]: unknown;
}

/** A pino logger whose JSON lines are kept in memory for assertions. */
export function memoryLogger(level: pino.Level = 'debug'): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const text of chunk.toString('utf8').split('\n')) if (text) lines.push(JSON.parse(text) as LogLine);
      done();
    },
  });
  return { logger: pino({ level }, sink), lines };
}

/** Polls `check` until it returns true, or fails with `what` after timeoutMs. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** True when `tool` is on PATH. */
export function hasTool(tool: string): boolean {
  return (process.env.PATH ?? '')
    .split(':')
    .some((dir) => dir !== '' && existsSync(`${dir}/${tool}`));
}

/** Runs a command with a timeout, feeding stdin, and returns its exit code and output; never throws on exit codes. */
export function run(
  command: string,
  args: readonly string[],
  options: { input?: string; cwd?: string; timeoutMs?: number } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      command,
      [...args],
      { cwd: options.cwd, timeout: options.timeoutMs ?? 30_000, maxBuffer: 16 << 20 },
      (error, stdout, stderr) => {
        if (error && typeof error.code !== 'number') {
          reject(new Error(`${command} ${args.join(' ')} failed: ${error.message}\n${stderr}`));
          return;
        }
        resolve({ code: error ? (error.code as number) : 0, stdout, stderr });
      },
    );
    child.stdin?.end(options.input ?? '');
  });
}
