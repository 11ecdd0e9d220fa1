import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';

/** One JSON line of a captured logger. */
export interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

export interface CapturedLogs {
  logger: Logger;
  /** Every line written so far, parsed. */
  lines: LogLine[];
}

/**
 * A pino logger whose JSON lines are kept in memory for a test's assertions; `echo` also copies them to stdout, to
 * watch a run. The repository's one: every package's tests capture their logs with it.
 */
export function captureLogs(level: pino.Level = 'debug', options: { echo?: boolean } = {}): CapturedLogs {
  const lines: LogLine[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      if (options.echo) process.stdout.write(chunk);
      for (const text of chunk.toString('utf8').split('\n')) if (text) lines.push(JSON.parse(text) as LogLine);
      done();
    },
  });
  return { logger: pino({ level }, sink), lines };
}
