import { execFileSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';

// A test run that dies without stopping its lab (an uncaught error, process.exit) still takes its namespaces and
// helper processes down with it: `ip netns del` runs synchronously in the exit handler.
const processes = new Set<ChildProcess>();
const namespaces = new Set<string>();
let hooked = false;

function hookExit(): void {
  if (hooked) return;
  hooked = true;
  process.once('exit', () => {
    for (const child of processes) child.kill('SIGKILL');
    for (const netns of namespaces) {
      try {
        execFileSync('ip', ['netns', 'del', netns], { stdio: 'ignore', timeout: 5_000 });
      } catch {
        // Best effort: cleanupStale() removes whatever is left.
      }
    }
  });
}

export function trackProcess(child: ChildProcess): void {
  hookExit();
  processes.add(child);
}

export function untrackProcess(child: ChildProcess): void {
  processes.delete(child);
}

export function trackNetns(name: string): void {
  hookExit();
  namespaces.add(name);
}

export function untrackNetns(name: string): void {
  namespaces.delete(name);
}
