import { spawn } from 'node:child_process';

export const DEFAULT_LAB_COMMAND_TIMEOUT_MS = 10_000;

export interface RunOptions {
  /** Written to the command's stdin, which is then closed. */
  input?: string;
  timeoutMs?: number;
}

export class LabCommandError extends Error {
  constructor(
    readonly command: readonly string[],
    readonly exitCode: number | null,
    readonly stderr: string,
    reason: string,
    /** What the command printed on stdout before it failed (a CNI plugin prints its error there). */
    readonly stdout = '',
  ) {
    super(`${command.join(' ')}: ${reason}${stderr.trim() ? `: ${stderr.trim()}` : ''}`);
    this.name = 'LabCommandError';
  }
}

/** Runs one command to completion; its stderr is part of any error, and it is killed when it overruns its timeout. */
export function runCommand(file: string, args: readonly string[], options: RunOptions = {}): Promise<string> {
  const command = [file, ...args];
  const timeoutMs = options.timeoutMs ?? DEFAULT_LAB_COMMAND_TIMEOUT_MS;
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new LabCommandError(command, null, stderr, error.message));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (timedOut) reject(new LabCommandError(command, code, stderr, `timed out after ${timeoutMs} ms`, stdout));
      else if (code !== 0) reject(new LabCommandError(command, code, stderr, `exited with ${code ?? signal}`, stdout));
      else resolve(stdout);
    });
    // A command that exits before reading its input must not turn into an unhandled EPIPE.
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.input ?? '');
  });
}
