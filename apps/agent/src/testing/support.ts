import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';

/** GETs a URL and returns status and body text. */
export async function get(url: string): Promise<{ status: number; body: string }> {
  const response = await fetch(url);
  return { status: response.status, body: await response.text() };
}

export { freePort } from '@kube-router/testkit';

/** testkit's log capture, beside the fixtures that the tests import. */
export { captureLogs } from '@kube-router/testkit';
export type { LogLine } from '@kube-router/testkit';

/** The repository's one waiter (`@kube-router/testkit`), here beside the fixtures that the tests import. */
export { waitFor } from '@kube-router/testkit';

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** netfilter's probe (PATH plus the sbin directories), the one every test and the agent use. */
export { hasTool } from '@kube-router/netfilter';

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

/** Alive means running or sleeping; a zombie waiting for its parent is already dead. */
export async function alive(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat !== '' && stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}
