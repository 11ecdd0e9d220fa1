import { splitWords } from './shell-words.js';
import type { IpFamily } from './family.js';

export interface SavedIpset {
  readonly name: string;
  readonly type: string;
  readonly family: IpFamily | undefined;
  /** Creation options as saved: `hashsize: '1024'`, flags such as `counters: true`. */
  readonly options: Readonly<Record<string, string | true>>;
  /** Each entry as saved after the set name, with its options: `10.0.0.1`, `10.0.0.0/8 nomatch`. */
  readonly members: readonly string[];
}

/** Creation options that take no value. */
const FLAG_OPTIONS = new Set(['counters', 'comment', 'skbinfo', 'forceadd', 'nomatch', 'bucketsize-auto']);

/** Parses `ipset save` output. */
export function parseIpsetSave(text: string): SavedIpset[] {
  const sets = new Map<
    string,
    {
      name: string;
      type: string;
      family: IpFamily | undefined;
      options: Record<string, string | true>;
      members: string[];
    }
  >();
  const lines = text.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const line = (lines[index] as string).trim();
    if (line === '') continue;
    if (line.startsWith('create ')) {
      const [, name = '', type = '', ...rest] = splitWords(line);
      const options: Record<string, string | true> = {};
      for (let i = 0; i < rest.length; i++) {
        const key = rest[i] as string;
        if (FLAG_OPTIONS.has(key) || i + 1 >= rest.length) options[key] = true;
        else options[key] = rest[++i] as string;
      }
      const family = options.family === 'inet' ? 'ipv4' : options.family === 'inet6' ? 'ipv6' : undefined;
      sets.set(name, { name, type, family, options, members: [] });
    } else if (line.startsWith('add ')) {
      const afterAdd = line.slice(4);
      const space = afterAdd.indexOf(' ');
      const name = afterAdd.slice(0, space);
      const set = sets.get(name);
      if (!set || space < 0) throw new SyntaxError(`ipset save line ${index + 1}: ${JSON.stringify(line)}`);
      set.members.push(afterAdd.slice(space + 1));
    } else {
      throw new SyntaxError(`ipset save line ${index + 1}: unexpected ${JSON.stringify(line)}`);
    }
  }
  return [...sets.values()];
}

/** Parses `ipset list -n`: one set name per line. */
export function parseIpsetNames(text: string): string[] {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean);
}
