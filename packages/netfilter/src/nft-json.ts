export interface NftTable {
  readonly family: string;
  readonly name: string;
  readonly handle: number;
}

export interface NftChain {
  readonly family: string;
  readonly table: string;
  readonly name: string;
  readonly handle: number;
  /** Base chains only. */
  readonly type?: string;
  readonly hook?: string;
  readonly prio?: number | string;
  readonly policy?: string;
}

export interface NftRule {
  readonly family: string;
  readonly table: string;
  readonly chain: string;
  readonly handle: number;
  readonly comment?: string;
  /** The rule's expressions in nft's JSON schema, not interpreted here. */
  readonly expr: readonly unknown[];
}

export interface NftSet {
  readonly family: string;
  readonly table: string;
  readonly name: string;
  readonly handle: number;
  /** A concatenated type is listed element by element. */
  readonly type: string | readonly string[];
  readonly flags: readonly string[];
  /** Elements in nft's text notation: `10.0.0.1`, `10.0.0.0/8`, `10.0.0.1-10.0.0.9`, `10.0.0.1 . 80`. */
  readonly elements: readonly string[];
}

export interface NftMap extends NftSet {
  /** The type of the values, e.g. `verdict`. */
  readonly map: string;
  /** `key : value` in nft's text notation, in the same order as elements. */
  readonly entries: readonly string[];
}

/** A named counter object (`add counter`), not a rule's anonymous counter statement. */
export interface NftCounter {
  readonly family: string;
  readonly table: string;
  readonly name: string;
  readonly packets: number;
  readonly bytes: number;
}

export interface NftRuleset {
  readonly tables: readonly NftTable[];
  readonly chains: readonly NftChain[];
  readonly rules: readonly NftRule[];
  readonly sets: readonly NftSet[];
  readonly maps: readonly NftMap[];
  readonly counters: readonly NftCounter[];
}

type JsonObject = Record<string, unknown>;

/** Parses `nft -j list ...` output into tables, chains, rules, sets, maps and named counters. Other objects are skipped. */
export function parseNftJson(text: string): NftRuleset {
  const trimmed = text.trim();
  const ruleset = {
    tables: [] as NftTable[],
    chains: [] as NftChain[],
    rules: [] as NftRule[],
    sets: [] as NftSet[],
    maps: [] as NftMap[],
    counters: [] as NftCounter[],
  };
  if (trimmed === '') return ruleset;
  const document = JSON.parse(trimmed) as { nftables?: unknown };
  if (!Array.isArray(document.nftables)) throw new SyntaxError('nft JSON output has no "nftables" array');
  for (const item of document.nftables as JsonObject[]) {
    if (isObject(item.table)) ruleset.tables.push(item.table as unknown as NftTable);
    else if (isObject(item.chain)) ruleset.chains.push(item.chain as unknown as NftChain);
    else if (isObject(item.rule))
      ruleset.rules.push({ ...(item.rule as unknown as NftRule), expr: arrayOf(item.rule.expr) });
    else if (isObject(item.set)) ruleset.sets.push(toSet(item.set));
    else if (isObject(item.map)) {
      const set = toSet(item.map);
      const pairs = arrayOf(item.map.elem).filter(Array.isArray) as unknown[][];
      ruleset.maps.push({
        ...set,
        elements: pairs.map((pair) => elementText(pair[0])),
        map: String(item.map.map),
        entries: pairs.map((pair) => `${elementText(pair[0])} : ${elementText(pair[1])}`),
      });
    } else if (isObject(item.counter)) {
      const counter = item.counter;
      ruleset.counters.push({
        family: String(counter.family),
        table: String(counter.table),
        name: String(counter.name),
        packets: Number(counter.packets ?? 0),
        bytes: Number(counter.bytes ?? 0),
      });
    }
  }
  return ruleset;
}

function toSet(raw: JsonObject): NftSet {
  const type = Array.isArray(raw.type) ? (raw.type as string[]) : String(raw.type);
  return {
    family: String(raw.family),
    table: String(raw.table),
    name: String(raw.name),
    handle: Number(raw.handle),
    type,
    flags: arrayOf(raw.flags).map(String),
    elements: arrayOf(raw.elem).map(elementText),
  };
}

/** nft's JSON element forms written back in nft's text notation. */
export function elementText(value: unknown): string {
  if (typeof value === 'string' || typeof value === 'number') return String(value);
  if (!isObject(value)) return JSON.stringify(value);
  if (isObject(value.prefix)) return `${elementText(value.prefix.addr)}/${elementText(value.prefix.len)}`;
  if (Array.isArray(value.range)) return value.range.map(elementText).join('-');
  if (Array.isArray(value.concat)) return value.concat.map(elementText).join(' . ');
  if (isObject(value.elem)) return elementText(value.elem.val);
  const keys = Object.keys(value);
  // Verdicts are objects with one key and a null value: {"accept": null}, {"jump": {"target": "x"}}.
  if (keys.length === 1) {
    const key = keys[0] as string;
    const inner = value[key];
    if (inner === null) return key;
    if (isObject(inner) && typeof inner.target === 'string') return `${key} ${inner.target}`;
  }
  return JSON.stringify(value);
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function arrayOf(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}
