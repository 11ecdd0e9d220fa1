/** What stream.mjs saw of its one connection: the answers' times and how it ended, if it did. */
export interface StreamRecord {
  readonly greeting: string | undefined;
  readonly greetedAt: number | undefined;
  readonly sent: number;
  /** Times (kernel uptime, ms) of the answers, in order. */
  readonly answers: readonly number[];
  /** `error <code>` or `closed`, when the connection ended. */
  readonly ended: string | undefined;
}

export function parseStream(stdout: string): StreamRecord {
  let greeting: string | undefined;
  let greetedAt: number | undefined;
  let sent = 0;
  let ended: string | undefined;
  const answers: number[] = [];
  for (const line of stdout.split('\n')) {
    const [kind, ...rest] = line.split(' ');
    if (kind === 'hello') {
      greetedAt = Number(rest[0]);
      greeting = rest.slice(1).join(' ');
    } else if (kind === 'sent') sent++;
    else if (kind === 'answer') answers.push(Number(rest[1]));
    else if (kind === 'error') ended ??= `error ${rest[0]}`;
    else if (kind === 'closed') ended ??= 'closed';
  }
  return { greeting, greetedAt, sent, answers, ended };
}

/** The longest time without an answer from `from` to `to` (kernel uptime, ms), the ends included. */
export function longestGap(times: readonly number[], from: number, to: number): number {
  const inside = [from, ...times.filter((time) => time > from && time < to), to];
  let longest = 0;
  for (let i = 1; i < inside.length; i++) longest = Math.max(longest, (inside[i] as number) - (inside[i - 1] as number));
  return longest;
}

/** One connection of prober.mjs: when it started (kernel uptime, ms) and its greeting or why it failed. */
export interface ProbeRecord {
  readonly startedAt: number;
  readonly ok: boolean;
  readonly answer: string;
}

export function parseProbes(stdout: string): ProbeRecord[] {
  return stdout
    .split('\n')
    .filter((line) => line.startsWith('ok ') || line.startsWith('fail '))
    .map((line) => {
      const [kind, startedAt, ...rest] = line.split(' ');
      return { startedAt: Number(startedAt), ok: kind === 'ok', answer: (kind === 'ok' ? rest.slice(1) : rest).join(' ') };
    })
    .sort((a, b) => a.startedAt - b.startedAt);
}
