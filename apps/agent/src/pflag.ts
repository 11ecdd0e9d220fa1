/**
 * A command-line parser with spf13/pflag's syntax, because kube-router parses its flags with pflag and an operator's
 * manifests must mean the same thing here: `--flag=value` and `--flag value`, `-v=2`, `-v 2` and `-v2` for
 * shorthands, booleans as `--flag` or `--flag=false` (never `--flag false`: pflag reads that `false` as a positional
 * argument), list flags whose first use replaces the default and later uses append, and `--` ending the flags.
 * General-purpose parsers (commander, yargs) differ on each of these, so the grammar is implemented here.
 */
import { isIp } from '@kube-router/kube';
import { parseGoDuration } from './duration.js';

/** One flag's syntax: how a value is read from the command line and shown in the help. */
export interface FlagSyntax<T> {
  /** pflag's type name, shown in the help after the flag (`duration`, `strings`, `uint32`); `bool` shows none. */
  type: string;
  default: T;
  /**
   * Reads one occurrence. `previous` is the value of the earlier occurrences, or undefined on the first one (so that
   * list flags replace their default, as pflag's do). Throws an Error whose message says what was expected.
   */
  set(text: string, previous: T | undefined): T;
  /** The value of `--flag` given without `=value` (pflag's NoOptDefVal); only booleans have one. */
  noValue?: string;
  /** The default as pflag's help prints it; omitted from the help when empty. */
  defaultText: string;
}

export interface ParsedCommandLine {
  /** Every flag's value: the parsed one when given, the default otherwise. */
  values: Record<string, unknown>;
  /** The names of the flags given on the command line. */
  given: Set<string>;
  /** Arguments that are not flags (after `--` or not starting with `-`). */
  positional: string[];
}

export class FlagSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FlagSyntaxError';
  }
}

/** Parses argv against the flags (by long name) and their shorthands; throws FlagSyntaxError on the first error. */
export function parseCommandLine(
  argv: readonly string[],
  flags: Readonly<Record<string, FlagSyntax<unknown>>>,
  shorthands: Readonly<Record<string, string>>,
): ParsedCommandLine {
  const values: Record<string, unknown> = {};
  const given = new Set<string>();
  const positional: string[] = [];
  const set = (name: string, text: string, spelled: string) => {
    const flag = flags[name] as FlagSyntax<unknown>;
    try {
      values[name] = flag.set(text, given.has(name) ? values[name] : undefined);
    } catch (error) {
      // pflag's own wording: invalid argument "x" for "--flag" flag: <why>
      throw new FlagSyntaxError(
        `invalid argument ${JSON.stringify(text)} for "${spelled}" flag: ${(error as Error).message}`,
      );
    }
    given.add(name);
  };

  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index] as string;
    if (arg === '--') {
      positional.push(...argv.slice(index + 1));
      break;
    }
    if (arg.startsWith('--')) {
      const body = arg.slice(2);
      const equals = body.indexOf('=');
      const name = equals === -1 ? body : body.slice(0, equals);
      const flag = flags[name];
      if (name === '' || name.startsWith('-') || name.startsWith('=')) throw new FlagSyntaxError(`bad flag syntax: ${arg}`);
      if (!flag) throw new FlagSyntaxError(`unknown flag: --${name}`);
      if (equals !== -1) set(name, body.slice(equals + 1), `--${name}`);
      else if (flag.noValue !== undefined) set(name, flag.noValue, `--${name}`);
      else if (index + 1 < argv.length) set(name, argv[++index] as string, `--${name}`);
      else throw new FlagSyntaxError(`flag needs an argument: --${name}`);
      continue;
    }
    if (arg.startsWith('-') && arg.length > 1) {
      // A cluster of shorthands (`-hV`); the first one that takes a value takes the rest of the cluster or the next arg.
      let rest = arg.slice(1);
      while (rest.length > 0) {
        const letter = rest[0] as string;
        const name = shorthands[letter];
        if (name === undefined) throw new FlagSyntaxError(`unknown shorthand flag: '${letter}' in ${arg}`);
        const flag = flags[name] as FlagSyntax<unknown>;
        rest = rest.slice(1);
        if (rest.startsWith('=')) {
          set(name, rest.slice(1), `-${letter}`);
          rest = '';
        } else if (flag.noValue !== undefined) {
          set(name, flag.noValue, `-${letter}`);
        } else if (rest.length > 0) {
          set(name, rest, `-${letter}`);
          rest = '';
        } else if (index + 1 < argv.length) {
          set(name, argv[++index] as string, `-${letter}`);
        } else {
          throw new FlagSyntaxError(`flag needs an argument: '${letter}' in -${letter}`);
        }
      }
      continue;
    }
    positional.push(arg);
  }
  for (const [name, flag] of Object.entries(flags)) if (!given.has(name)) values[name] = flag.default;
  return { values, given, positional };
}

// ---- value syntaxes, as pflag reads them ----

/** strconv.ParseBool's spellings. */
export function boolSyntax(defaultValue: boolean): FlagSyntax<boolean> {
  return {
    type: 'bool',
    default: defaultValue,
    noValue: 'true',
    defaultText: defaultValue ? 'true' : '',
    set(text) {
      if (['1', 't', 'T', 'true', 'TRUE', 'True'].includes(text)) return true;
      if (['0', 'f', 'F', 'false', 'FALSE', 'False'].includes(text)) return false;
      throw new Error('expected true or false');
    },
  };
}

export function stringSyntax(defaultValue: string): FlagSyntax<string> {
  return { type: 'string', default: defaultValue, defaultText: defaultValue === '' ? '' : JSON.stringify(defaultValue), set: (text) => text };
}

/** A Go duration, in milliseconds. */
export function durationSyntax(defaultText: string): FlagSyntax<number> {
  const defaultValue = parseGoDuration(defaultText);
  return { type: 'duration', default: defaultValue, defaultText, set: (text) => parseGoDuration(text) };
}

/** strconv.ParseUint(text, 0, bits): decimal, or 0x / 0o / 0b prefixed, within the type's range. */
export function uintSyntax(bits: 8 | 16 | 32 | 64, defaultValue: number): FlagSyntax<number> {
  return {
    type: bits === 64 ? 'uint' : `uint${bits}`,
    default: defaultValue,
    defaultText: defaultValue === 0 ? '' : String(defaultValue),
    set: (text) => parseUnsigned(text, bits),
  };
}

/** pflag's stringSlice: comma-separated, repeatable; the first use replaces the default. */
export function stringListSyntax(defaultValue: readonly string[] = []): FlagSyntax<string[]> {
  return {
    type: 'strings',
    default: [...defaultValue],
    defaultText: defaultValue.length === 0 ? '' : `[${defaultValue.join(',')}]`,
    set: (text, previous) => [...(previous ?? []), ...splitList(text)],
  };
}

/** pflag's uintSlice. */
export function uintListSyntax(): FlagSyntax<number[]> {
  return {
    type: 'uints',
    default: [],
    defaultText: '',
    set: (text, previous) => [...(previous ?? []), ...splitList(text).map(parseDecimalUnsigned)],
  };
}

/**
 * pflag's uintSlice reads each item with strconv.ParseUint(item, 10, 0): decimal only, so `065000` is 65000 (not
 * octal 27136, as a single uint flag would read it) and `0x10` or `1_000` is refused.
 */
function parseDecimalUnsigned(text: string): number {
  if (!/^\d+$/.test(text)) throw new Error('expected an unsigned decimal integer');
  const value = BigInt(text);
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`value out of range (at most ${Number.MAX_SAFE_INTEGER})`);
  return Number(value);
}

/** pflag's ipSlice: addresses as Go's net.ParseIP reads them (IPv4 dotted quads, IPv6). */
export function ipListSyntax(): FlagSyntax<string[]> {
  return {
    type: 'ipSlice',
    default: [],
    defaultText: '',
    set(text, previous) {
      const addresses = splitList(text);
      for (const address of addresses) {
        if (!isIp(address)) throw new Error(`${JSON.stringify(address)} is not an IP address`);
      }
      return [...(previous ?? []), ...addresses];
    },
  };
}

/**
 * pflag's slices: an empty value is an empty list, but a blank item inside one is kept (kube-router documents
 * `--peer-router-passwords=pw,,pw` for a peer without a password); the typed lists refuse it as pflag does.
 */
function splitList(text: string): string[] {
  if (text.trim() === '') return [];
  return text.split(',').map((item) => item.trim());
}

function parseUnsigned(text: string, bits: 8 | 16 | 32 | 64): number {
  const digits = text.replaceAll('_', '');
  let value: bigint;
  if (/^0[xX][0-9a-fA-F]+$/.test(digits) || /^0[bB][01]+$/.test(digits) || /^0[oO][0-7]+$/.test(digits)) {
    value = BigInt(digits.toLowerCase());
  } else if (/^0[0-7]+$/.test(digits)) {
    value = BigInt(`0o${digits.slice(1)}`);
  } else if (/^\d+$/.test(digits)) {
    value = BigInt(digits);
  } else {
    throw new Error('expected an unsigned integer');
  }
  const max = bits === 64 ? BigInt(Number.MAX_SAFE_INTEGER) : (1n << BigInt(bits)) - 1n;
  if (value > max) throw new Error(`value out of range (at most ${max})`);
  return Number(value);
}

// ---- help ----

export interface HelpEntry {
  name: string;
  shorthand?: string;
  syntax: FlagSyntax<unknown>;
  usage: string;
  /** Shown after the default. */
  note?: string;
}

/** pflag's FlagUsages layout: `  -v, --v string   usage (default "0")`, aligned, sorted by name. */
export function formatFlagUsages(entries: readonly HelpEntry[]): string {
  const lines = [...entries]
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((entry) => {
      const lead = entry.shorthand ? `  -${entry.shorthand}, --${entry.name}` : `      --${entry.name}`;
      const type = entry.syntax.type === 'bool' ? '' : ` ${entry.syntax.type}`;
      const shown = entry.syntax.defaultText;
      const right = [entry.usage, shown === '' ? '' : `(default ${shown})`, entry.note ?? ''].filter(Boolean).join(' ');
      return { left: `${lead}${type}`, right };
    });
  const width = Math.max(...lines.map((line) => line.left.length)) + 3;
  return lines.map((line) => `${line.left.padEnd(width)}${line.right}\n`).join('');
}
