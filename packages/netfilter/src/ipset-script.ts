import type { IpFamily } from './family.js';
import { inetFamily } from './family.js';

export type IpsetType =
  | 'hash:ip'
  | 'hash:net'
  | 'hash:ip,port'
  | 'hash:net,port'
  | 'hash:ip,port,ip'
  | 'hash:ip,port,net'
  | 'hash:net,port,net'
  | 'hash:net,iface'
  | 'bitmap:port'
  | 'list:set';

export interface IpsetSpec {
  readonly name: string;
  readonly type: IpsetType;
  /** Required by the hash types that hold addresses; ignored by bitmap:port and list:set. */
  readonly family?: IpFamily;
  readonly hashSize?: number;
  /** ipset's default is 65536; a set that must hold more needs it raised at creation. */
  readonly maxElements?: number;
  /** Default timeout of entries in seconds (makes the set a timeout set). */
  readonly timeout?: number;
  /** Allows per-entry comments. */
  readonly comment?: boolean;
}

/** An element as ipset writes it (`10.0.0.1`, `10.0.0.0/8`, `fd00::1,tcp:80`); `nomatch` excepts it in hash:net sets. */
export type IpsetMember = string | { readonly element: string; readonly nomatch?: boolean };

/** IPSET_MAXNAMELEN is 32 including the terminating NUL. */
export const MAX_IPSET_NAME_LENGTH = 31;

/**
 * Builds input for `ipset restore -exist`: with -exist, creating an identical set, adding a present element or
 * deleting a missing one is not an error, so the script converges whatever the current state is.
 */
export class IpsetScript {
  readonly #lines: string[] = [];

  get lineCount(): number {
    return this.#lines.length;
  }

  create(spec: IpsetSpec): this {
    assertSetName(spec.name);
    const words = ['create', spec.name, spec.type];
    if (spec.family && spec.type.startsWith('hash:')) words.push('family', inetFamily(spec.family));
    if (spec.hashSize !== undefined) words.push('hashsize', String(positiveInteger(spec.hashSize, 'hashSize')));
    if (spec.maxElements !== undefined) words.push('maxelem', String(positiveInteger(spec.maxElements, 'maxElements')));
    if (spec.timeout !== undefined) words.push('timeout', String(positiveInteger(spec.timeout, 'timeout')));
    if (spec.comment) words.push('comment');
    this.#lines.push(words.join(' '));
    return this;
  }

  add(name: string, member: IpsetMember): this {
    assertSetName(name);
    const { element, nomatch } = typeof member === 'string' ? { element: member, nomatch: false } : member;
    assertElement(element);
    this.#lines.push(`add ${name} ${element}${nomatch ? ' nomatch' : ''}`);
    return this;
  }

  del(name: string, element: string): this {
    assertSetName(name);
    assertElement(element);
    this.#lines.push(`del ${name} ${element}`);
    return this;
  }

  flush(name: string): this {
    assertSetName(name);
    this.#lines.push(`flush ${name}`);
    return this;
  }

  swap(first: string, second: string): this {
    assertSetName(first);
    assertSetName(second);
    this.#lines.push(`swap ${first} ${second}`);
    return this;
  }

  destroy(name: string): this {
    assertSetName(name);
    this.#lines.push(`destroy ${name}`);
    return this;
  }

  /**
   * Replaces a set's members atomically: fills `tempName` and swaps it in, so matching rules never see a half-filled
   * set. The target is created only when `createTarget` is set (the caller knows from `ipset list -n`), because
   * re-creating an existing set with other options (a raised maxelem) fails even with -exist; swap itself only
   * needs type and family to agree.
   */
  replaceMembers(
    spec: IpsetSpec,
    members: Iterable<IpsetMember>,
    options: { readonly tempName: string; readonly createTarget: boolean },
  ): this {
    this.create({ ...spec, name: options.tempName }).flush(options.tempName);
    for (const member of members) this.add(options.tempName, member);
    if (options.createTarget) this.create(spec);
    return this.swap(options.tempName, spec.name).destroy(options.tempName);
  }

  toString(): string {
    return this.#lines.length === 0 ? '' : `${this.#lines.join('\n')}\n`;
  }
}

export function assertSetName(name: string): void {
  if (!/^[A-Za-z0-9_.:-]+$/.test(name)) throw new RangeError(`invalid ipset name ${JSON.stringify(name)}`);
  if (name.length > MAX_IPSET_NAME_LENGTH) {
    throw new RangeError(`ipset name ${name} is longer than ${MAX_IPSET_NAME_LENGTH} characters`);
  }
}

function assertElement(element: string): void {
  if (element === '' || /\s/.test(element)) throw new RangeError(`invalid ipset element ${JSON.stringify(element)}`);
}

function positiveInteger(value: number, what: string): number {
  if (!Number.isInteger(value) || value <= 0) throw new RangeError(`${what} must be a positive integer, got ${value}`);
  return value;
}

/**
 * hash:net cannot hold a /0. A CIDR of /0 is returned as its two /1 halves (what kube-router does), anything else as
 * itself.
 */
export function ipsetNetElements(cidr: string): string[] {
  if (cidr === '0.0.0.0/0') return ['0.0.0.0/1', '128.0.0.0/1'];
  if (cidr.endsWith('/0') && cidr.includes(':')) return ['::/1', '8000::/1'];
  return [cidr];
}
