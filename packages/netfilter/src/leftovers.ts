import { readdir, readFile, stat } from 'node:fs/promises';

export interface LeftoverProcessQuery {
  /** Whose processes: those in this network namespace (by name, under /run/netns); default this process's own. */
  readonly netns?: string;
  /** Whether a process's argv (from /proc/<pid>/cmdline) is one of ours. */
  readonly matches: (argv: readonly string[]) => boolean;
}

/**
 * Kills (SIGKILL) the processes an earlier agent left running, in the given network namespace, and waits until they
 * are gone (up to 2 s each). A process spawned detached, in its own group, outlives an agent that is SIGKILLed; one
 * that holds what its successor needs (gobgpd's ports, tcpdump's NFLOG group) must go before the successor starts.
 * Resolves with the pids killed.
 */
export async function killLeftoverProcesses(query: LeftoverProcessQuery): Promise<number[]> {
  const wantedNetns = await netnsInode(query.netns ? `/run/netns/${query.netns}` : '/proc/self/ns/net');
  const killed: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    let argv: string[];
    try {
      argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
    } catch {
      continue;
    }
    if (!query.matches(argv)) continue;
    if ((await netnsInode(`/proc/${pid}/ns/net`)) !== wantedNetns) continue;
    try {
      process.kill(pid, 'SIGKILL');
      killed.push(pid);
    } catch {
      // Gone meanwhile.
    }
  }
  // Let the kernel release what they held (sockets, an NFLOG group) before a successor binds it.
  for (const pid of killed) await waitGone(pid, 2_000);
  return killed;
}

async function netnsInode(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).ino;
  } catch {
    return undefined;
  }
}

async function waitGone(pid: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
