import { badRequest } from '../errors.js';

export type LabelOperator = 'equals' | 'notEquals' | 'in' | 'notIn' | 'exists' | 'doesNotExist' | 'gt' | 'lt';

export interface LabelRequirement {
  key: string;
  operator: LabelOperator;
  values: string[];
}

export type LabelSelector = readonly LabelRequirement[];

type Token =
  | { kind: 'word'; text: string }
  | { kind: 'op'; text: '=' | '==' | '!=' | '!' | '>' | '<' }
  | { kind: 'open' }
  | { kind: 'close' }
  | { kind: 'comma' };

function tokenize(input: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < input.length) {
    const ch = input[i] as string;
    if (/\s/.test(ch)) {
      i++;
    } else if (ch === '(') {
      tokens.push({ kind: 'open' });
      i++;
    } else if (ch === ')') {
      tokens.push({ kind: 'close' });
      i++;
    } else if (ch === ',') {
      tokens.push({ kind: 'comma' });
      i++;
    } else if (input.startsWith('==', i) || input.startsWith('!=', i)) {
      tokens.push({ kind: 'op', text: input.slice(i, i + 2) as '==' | '!=' });
      i += 2;
    } else if (ch === '=' || ch === '!' || ch === '>' || ch === '<') {
      tokens.push({ kind: 'op', text: ch });
      i++;
    } else {
      let end = i;
      while (end < input.length && !/[\s(),=!<>]/.test(input[end] as string)) end++;
      tokens.push({ kind: 'word', text: input.slice(i, end) });
      i = end;
    }
  }
  return tokens;
}

function fail(selector: string, why: string): never {
  throw badRequest(`unable to parse requirement: ${why} in label selector "${selector}"`);
}

/** Parses the string form of a label selector (`a=b,c!=d,e in (f,g),!h`) as the API server does. */
export function parseLabelSelector(selector: string | undefined): LabelSelector {
  if (!selector || selector.trim() === '') return [];
  const tokens = tokenize(selector);
  const requirements: LabelRequirement[] = [];
  let pos = 0;
  const next = (): Token | undefined => tokens[pos++];
  const peek = (): Token | undefined => tokens[pos];

  while (pos < tokens.length) {
    let token = next();
    if (token?.kind === 'op' && token.text === '!') {
      const key = next();
      if (key?.kind !== 'word') fail(selector, 'expected a key after "!"');
      requirements.push({ key: key.text, operator: 'doesNotExist', values: [] });
    } else if (token?.kind === 'word') {
      const key = token.text;
      token = peek();
      if (token === undefined || token.kind === 'comma') {
        requirements.push({ key, operator: 'exists', values: [] });
      } else if (token.kind === 'op') {
        pos++;
        const value = peek();
        let text = '';
        if (value?.kind === 'word') {
          text = value.text;
          pos++;
        } else if (token.text === '>' || token.text === '<') {
          fail(selector, `expected a number after "${token.text}"`);
        }
        const operator: LabelOperator =
          token.text === '!=' ? 'notEquals' : token.text === '>' ? 'gt' : token.text === '<' ? 'lt' : 'equals';
        if (token.text === '!') fail(selector, `unexpected "!" after "${key}"`);
        if ((operator === 'gt' || operator === 'lt') && !/^-?\d+$/.test(text)) {
          fail(selector, `"${text}" is not an integer`);
        }
        requirements.push({ key, operator, values: [text] });
      } else if (token.kind === 'word' && (token.text === 'in' || token.text === 'notin')) {
        pos++;
        if (next()?.kind !== 'open') fail(selector, `expected "(" after "${token.text}"`);
        const values: string[] = [];
        for (;;) {
          const item = next();
          if (item?.kind === 'word') values.push(item.text);
          else if (item?.kind === 'close') break;
          else if (item?.kind !== 'comma') fail(selector, 'unterminated set of values');
        }
        if (values.length === 0) fail(selector, `"${token.text}" needs at least one value`);
        requirements.push({ key, operator: token.text === 'in' ? 'in' : 'notIn', values });
      } else {
        fail(selector, `unexpected token after "${key}"`);
      }
    } else {
      fail(selector, 'expected a label key');
    }
    const separator = next();
    if (separator !== undefined && separator.kind !== 'comma') fail(selector, 'expected ","');
  }
  return requirements;
}

function matchesRequirement(labels: Readonly<Record<string, string>>, requirement: LabelRequirement): boolean {
  const has = Object.hasOwn(labels, requirement.key);
  const value = labels[requirement.key];
  switch (requirement.operator) {
    case 'equals':
    case 'in':
      return has && requirement.values.includes(value as string);
    case 'notEquals':
    case 'notIn':
      return !has || !requirement.values.includes(value as string);
    case 'exists':
      return has;
    case 'doesNotExist':
      return !has;
    case 'gt':
    case 'lt': {
      if (!has || !/^-?\d+$/.test(value as string)) return false;
      const actual = Number(value);
      const bound = Number(requirement.values[0]);
      return requirement.operator === 'gt' ? actual > bound : actual < bound;
    }
  }
}

export function matchesLabelSelector(
  labels: Readonly<Record<string, string>> | undefined,
  selector: LabelSelector,
): boolean {
  return selector.every((requirement) => matchesRequirement(labels ?? {}, requirement));
}
