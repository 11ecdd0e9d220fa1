import { execFile, spawn } from 'node:child_process';
import { extname } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/**
 * Another tool writing its own objects in the node's namespace while the agent syncs (issue 35, kube-router #1918:
 * Istio's ipsets losing members to kube-router's restores). It keeps a record of what it wrote, and reads its objects
 * back now and then and at its end: any difference is someone else's doing.
 */
export interface ForeignWriter {
  /** In the suite's title: `ipset and iptables`, `nft`. */
  readonly name: string;
  /** The tools it runs, besides `ip`. */
  readonly tools: readonly string[];
  /**
   * Creates its objects in `netns` (undefined: the namespace this process is in), then writes them as fast as it can
   * until stopped, in this process (startForeignWriterProcess runs it in another). `seed` picks its writes; `onWrite`
   * hears of each one that succeeded.
   */
  start(netns: string | undefined, seed: number, onWrite?: () => void): Promise<RunningForeignWriter>;
  /**
   * The agent's objects in the tools this writer uses (by the agent's names), as text that is equal whenever their
   * content is: no counters, handles or random set seeds, members and elements sorted.
   */
  agentState(netns: string): Promise<string>;
}

export interface RunningForeignWriter {
  /** Write commands that succeeded so far: sampled around a sync, how many raced it. */
  readonly writes: number;
  /** Ends the loop once the write under way is done, reads its objects back a last time and reports. */
  stop(): Promise<ForeignWriterReport>;
}

export interface ForeignWriterReport {
  /** Write commands that succeeded. */
  writes: number;
  /** Write commands that failed, each with its command and stderr. */
  failures: string[];
  /** Read-backs of all its objects against its record, the last one included. */
  checks: number;
  /** What read-backs found other than it had written, each once. */
  differences: string[];
  /** What the last read-back found other than it had written. */
  finalDifferences: string[];
  /** Every command it ran (writes and reads) and their time in all: how long a command took on this machine. */
  commands: number;
  commandMs: number;
}

/** The commands this process ran through runInNetns, for the report. */
const commandStats = { commands: 0, commandMs: 0 };

/** A command's outcome: the tool's stdout, or why it failed. */
export type ToolOutcome = { ok: true; stdout: string } | { ok: false; failure: string };

/**
 * Runs a tool in `netns` (undefined: this process's own) as another process on the node would: its own process, none
 * of the agent's runners or locks, so that it races the agent's commands as another tool does.
 */
export function runInNetns(netns: string | undefined, command: string, args: readonly string[], input?: string): Promise<ToolOutcome> {
  const [file, argv] = netns === undefined ? [command, args] : ['ip', ['netns', 'exec', netns, command, ...args]];
  const started = performance.now();
  return new Promise((resolve) => {
    const child = execFile(file, argv, { timeout: 20_000, maxBuffer: 1 << 26 }, (error, stdout, stderr) => {
      commandStats.commands++;
      commandStats.commandMs += performance.now() - started;
      const line = [command, ...args].join(' ');
      resolve(error ? { ok: false, failure: `${line}: ${stderr.trim() || error.message}` } : { ok: true, stdout });
    });
    // A tool that fails before it reads its input closes the pipe: its exit says why, not the write's EPIPE.
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(input ?? '');
  });
}

/** Reads a tool's output for a read-back; a read that fails is a difference of its own, not a write failure. */
export async function readOrThrow(netns: string | undefined, command: string, args: readonly string[]): Promise<string> {
  const outcome = await runInNetns(netns, command, args);
  if (!outcome.ok) throw new Error(`read-back failed: ${outcome.failure}`);
  return outcome.stdout;
}

/** A small seeded generator (mulberry32): a failing run can be replayed with the seed it printed. */
export function seededRandom(seed: number): { below(n: number): number; pick<T>(items: readonly T[]): T; chance(p: number): boolean } {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const below = (n: number) => Math.floor(next() * n);
  return {
    below,
    pick: <T>(items: readonly T[]) => items[below(items.length)] as T,
    chance: (p) => next() < p,
  };
}

/** Differences between what a writer recorded and what it read back, per object key. */
export function recordDifferences(expected: ReadonlyMap<string, string>, actual: ReadonlyMap<string, string>): string[] {
  const differences: string[] = [];
  for (const [key, text] of expected) {
    const found = actual.get(key);
    if (found === undefined) differences.push(`${key}: gone (written as ${text})`);
    else if (found !== text) differences.push(`${key}: ${found} (written as ${text})`);
  }
  for (const [key, text] of actual) if (!expected.has(key)) differences.push(`${key}: ${text} (never written)`);
  return differences;
}

export interface WriterLoop {
  /**
   * One write (or a few that belong together). It calls `verify(scope)` first, for the objects it is about to write:
   * whatever another process did to them since it last wrote them shows there, before this write covers it up.
   */
  write(record: (outcome: ToolOutcome) => boolean, verify: (scope: string) => Promise<void>): Promise<void>;
  /** Its objects as the kernel holds them, by key; with a scope, only the keys that are it or start with it and a space. */
  readBack(scope?: string): Promise<Map<string, string>>;
  /** Its objects as it wrote them, keyed as readBack keys them. */
  expected(): Map<string, string>;
  /** After a failed write or a difference, what it holds is not its record: take the kernel's word for it and go on. */
  adopt(actual: Map<string, string>): void;
}

/** Every this many writes, a read-back of all its objects, for those it has not written for a while. */
const CHECK_EVERY = 16;

const inScope = (key: string, scope: string | undefined) => scope === undefined || key === scope || key.startsWith(`${scope} `);

/** Runs a writer's loop until stop(), checking its record as it goes. */
export function runWriterLoop(loop: WriterLoop, onWrite: () => void = () => undefined): RunningForeignWriter {
  const report: ForeignWriterReport = { writes: 0, failures: [], checks: 0, differences: [], finalDifferences: [], commands: 0, commandMs: 0 };
  const seen = new Set<string>();
  const adoptKernel = async () => {
    const actual = await loop.readBack().catch(() => undefined);
    if (actual) loop.adopt(actual);
  };
  const check = async (scope?: string): Promise<string[]> => {
    report.checks++;
    let differences: string[];
    try {
      const expected = new Map([...loop.expected()].filter(([key]) => inScope(key, scope)));
      const actual = new Map([...(await loop.readBack(scope))].filter(([key]) => inScope(key, scope)));
      differences = recordDifferences(expected, actual);
    } catch (error) {
      differences = [error instanceof Error ? error.message : String(error)];
    }
    for (const difference of differences) {
      if (!seen.has(difference)) report.differences.push(difference);
      seen.add(difference);
    }
    // Found changed: go on from what is there, so that one change is reported once rather than at every check.
    if (differences.length > 0) await adoptKernel();
    return differences;
  };
  const record = (outcome: ToolOutcome): boolean => {
    if (outcome.ok) {
      report.writes++;
      onWrite();
    } else {
      report.failures.push(outcome.failure);
    }
    return outcome.ok;
  };
  const verify = async (scope: string) => void (await check(scope));
  let running = true;
  const done = (async () => {
    let sinceCheck = 0;
    while (running) {
      const failuresBefore = report.failures.length;
      await loop.write(record, verify);
      if (report.failures.length > failuresBefore) await adoptKernel();
      if (++sinceCheck >= CHECK_EVERY) {
        sinceCheck = 0;
        await check();
      }
    }
  })();
  return {
    get writes() {
      return report.writes;
    },
    async stop() {
      running = false;
      await done;
      report.finalDifferences = await check();
      return { ...report, ...commandStats };
    },
  };
}

/** The child's entry: the same module kind as this one (`.ts` from source, `.js` once built). */
const WRITER_MAIN = fileURLToPath(new URL(`./foreign-writer-main${extname(fileURLToPath(import.meta.url))}`, import.meta.url));

/**
 * Runs the writer in a process of its own inside the node's namespace, as another agent with the host's network is:
 * its loop takes turns with nothing of the agent's (the test process runs the agent, its informers and the API
 * server), and its tools start in the namespace without an `ip netns exec` each. It reports each write as a line, and
 * its report when its stdin closes.
 */
export async function startForeignWriterProcess(writer: ForeignWriter, netns: string, seed: number): Promise<RunningForeignWriter> {
  const child = spawn('ip', ['netns', 'exec', netns, process.execPath, '--import', 'tsx', WRITER_MAIN, writer.name, String(seed)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let writes = 0;
  let onStarted: () => void = () => undefined;
  let onReport: (report: ForeignWriterReport) => void = () => undefined;
  const started = new Promise<void>((resolve) => (onStarted = resolve));
  const reported = new Promise<ForeignWriterReport>((resolve) => (onReport = resolve));
  createInterface({ input: child.stdout }).on('line', (line) => {
    if (line === 'w') writes++;
    else if (line === 'started') onStarted();
    else if (line.startsWith('report ')) onReport(JSON.parse(line.slice('report '.length)) as ForeignWriterReport);
  });
  const failed = (what: string) => async () => {
    const code = await exited;
    throw new Error(`the foreign writer process exited with ${code} ${what}: ${stderr.trim()}`);
  };
  await Promise.race([started, exited.then(failed('before it started'))]);
  return {
    get writes() {
      return writes;
    },
    async stop() {
      child.stdin.end();
      return Promise.race([reported, exited.then(failed('without its report'))]);
    },
  };
}
