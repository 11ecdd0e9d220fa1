/**
 * Go's time.ParseDuration grammar, because kube-router's flags take Go durations (`30s`, `5m`, `1h30m`, `250ms`) and
 * an operator's manifests must keep meaning the same thing. Lenient parsers (parse-duration, ms) accept words and
 * bare numbers that Go rejects, which would let a typo through; Go's grammar is small enough to implement exactly.
 */

const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  'µs': 1e-3, // U+00B5 micro sign
  'μs': 1e-3, // U+03BC Greek mu
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Go's longest duration (int64 nanoseconds), in milliseconds. */
export const MAX_GO_DURATION_MS = Number(2n ** 63n - 1n) / 1e6;

const TERM = /(\d+\.?\d*|\.\d+)([a-zµμ]+)/gy;

/** Parses a Go duration into milliseconds; throws with the offending text otherwise. */
export function parseGoDuration(text: string): number {
  const input = text.trim();
  const fail = (why: string): never => {
    throw new Error(`invalid duration ${JSON.stringify(text)}: ${why} (use Go durations such as 30s, 5m, 1h30m, 250ms)`);
  };
  if (input === '') fail('empty');
  let rest = input;
  let sign = 1;
  if (rest[0] === '-' || rest[0] === '+') {
    sign = rest[0] === '-' ? -1 : 1;
    rest = rest.slice(1);
  }
  if (rest === '0') return 0;
  if (rest === '') fail('no number');
  TERM.lastIndex = 0;
  let total = 0;
  let consumed = 0;
  for (let match = TERM.exec(rest); match; match = TERM.exec(rest)) {
    const [whole, amount, unit] = match as unknown as [string, string, string];
    const factor = UNIT_MS[unit];
    if (factor === undefined) fail(`unknown unit ${JSON.stringify(unit)}`);
    total += Number(amount) * (factor as number);
    consumed += whole.length;
  }
  if (consumed !== rest.length) fail(consumed === 0 ? 'missing unit' : `unexpected ${JSON.stringify(rest.slice(consumed))}`);
  // Go's Duration is int64 nanoseconds; a longer text is an error there, and would be Infinity or imprecise here.
  if (total > MAX_GO_DURATION_MS) fail('longer than Go\'s maximum duration, 2562047h47m16.854775807s');
  return sign * total;
}

/** Formats milliseconds the way Go's Duration.String does (`5m0s`, `1h30m0s`, `250ms`), as kube-router's help shows. */
export function formatGoDuration(ms: number): string {
  if (ms === 0) return '0s';
  const sign = ms < 0 ? '-' : '';
  let rest = Math.abs(ms);
  if (rest < 1000) return `${sign}${trimNumber(rest)}ms`;
  const hours = Math.floor(rest / 3_600_000);
  rest -= hours * 3_600_000;
  const minutes = Math.floor(rest / 60_000);
  rest -= minutes * 60_000;
  const seconds = `${trimNumber(rest / 1000)}s`;
  if (hours > 0) return `${sign}${hours}h${minutes}m${seconds}`;
  if (minutes > 0) return `${sign}${minutes}m${seconds}`;
  return `${sign}${seconds}`;
}

function trimNumber(value: number): string {
  return String(Number(value.toFixed(6)));
}
