import type { V1Node } from '@kubernetes/client-node';
import { isIp } from '@kube-router/kube';
import { parseDocument } from 'yaml';
import { yamlBoundsProblem } from './bounded-yaml.js';
import type { Afi } from './gobgp-api.js';
import { AFI_OF, familyOf, type NodeAddresses } from './nodes.js';
import { canonicalAddress, parseGoUint, splitList } from './parse.js';

/** kube-router's annotations of a Node's own external peers. */
export const PEERS_ANNOTATION = 'kube-router.io/peers';
export const PEER_IPS_ANNOTATION = 'kube-router.io/peer.ips';
export const PEER_ASNS_ANNOTATION = 'kube-router.io/peer.asns';
export const PEER_PASSWORDS_ANNOTATION = 'kube-router.io/peer.passwords';
export const PEER_PORTS_ANNOTATION = 'kube-router.io/peer.ports';
export const PEER_LOCAL_IPS_ANNOTATION = 'kube-router.io/peer.localips';
/** The addresses gobgpd listens on, comma-separated (default: every address). */
export const BGP_LOCAL_ADDRESSES_ANNOTATION = 'kube-router.io/bgp-local-addresses';

/** kube-router's port of an external peer without one: BGP's own, not --bgp-port (that one is the mesh's). */
export const DEFAULT_EXTERNAL_PEER_PORT = 179;

/** An external peer as the operator wrote it (--peer-router-* or a Node annotation), validated. */
export interface ExternalPeerSpec {
  address: string;
  asn: number;
  port?: number;
  /** The TCP MD5 password in clear text (decoded from base64). */
  password?: string;
  /** The address this node dials from; default the node's primary address (or its address of the peer's family). */
  localAddress?: string;
}

/** An external peer as gobgpd gets it. */
export interface PlannedExternalPeer {
  address: string;
  asn: number;
  port: number;
  password?: string;
  localAddress: string;
  families: Afi[];
  /** Where it was configured: `options` or the annotation's name. */
  source: string;
}

export interface ExternalPeerPlan {
  peers: PlannedExternalPeer[];
  /** Entries that could not be used, each naming its annotation (or option) and index. */
  problems: Error[];
  /**
   * Some annotation entry did not parse, so `peers` may lack a peer that works today: no peer may be removed. A
   * permanent mistake (a peer listed twice, one of a family this node has no address of) does not count: its peer is
   * simply not configured, and the others are reconciled as usual.
   */
  incomplete: boolean;
}

/**
 * The ASN ranges kube-router accepts for a peer: everything but 0, AS_TRANS (23456), the reserved 64000-64511,
 * 65535-131071 and 4294967295. Returns why `asn` is not usable, undefined when it is.
 */
export function asnProblem(asn: number): string | undefined {
  if (!Number.isInteger(asn) || asn < 1 || asn > 4_294_967_294) return `${asn} is not an ASN (1-4294967294)`;
  if (asn === 23_456 || (asn >= 64_000 && asn <= 64_511) || (asn >= 65_535 && asn <= 131_071)) return `ASN ${asn} is reserved`;
  return undefined;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Strict base64 (with padding), as Go's base64.StdEncoding that kube-router uses; Buffer.from alone accepts anything.
 * The bytes must be UTF-8: gobgpd's API carries the password as a protobuf string, and a lenient decode silently
 * replaced each invalid byte with U+FFFD, so the session came up with another password than the operator's.
 */
export function decodeBase64(text: string): string {
  const trimmed = text.trim();
  if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(trimmed)) {
    throw new Error('is not base64');
  }
  try {
    return UTF8.decode(Buffer.from(trimmed, 'base64'));
  } catch {
    throw new Error('is not UTF-8 text once decoded (gobgpd takes a password as text)');
  }
}

/** kube-router's index-aligned peer lists: --peer-router-ips/-asns/-ports/-passwords, or kube-router.io/peer.*. */
export interface PeerLists {
  ips: readonly string[];
  asns: readonly string[];
  /** Empty, or one per peer (blank for the default). */
  ports?: readonly string[];
  /** base64; empty, or one per peer (blank for none). */
  passwords?: readonly string[];
  /** Empty, or one per peer (blank for the default). */
  localIps?: readonly string[];
}

export type PeerListName = keyof PeerLists;

export interface PeerListProblem {
  /** The list at fault (its flag or annotation is the caller's to name). */
  list: PeerListName;
  /** The peer's index, undefined when the whole list is at fault (its length). */
  index?: number;
  message: string;
}

/**
 * Pairs kube-router's index-aligned lists into peers. A list of the wrong length makes every peer unusable (nothing
 * says which entry is missing); otherwise a bad entry loses only its own peer.
 */
export function peersFromLists(lists: PeerLists): { peers: ExternalPeerSpec[]; problems: PeerListProblem[] } {
  const count = lists.ips.length;
  const problems: PeerListProblem[] = [];
  if (lists.asns.length !== count) {
    problems.push({ list: 'asns', message: `has ${lists.asns.length} ASNs for ${count} peer addresses: the numbers must be equal` });
  }
  for (const list of ['ports', 'passwords', 'localIps'] as const) {
    const values = lists[list] ?? [];
    if (values.length !== 0 && values.length !== count) {
      problems.push({ list, message: `has ${values.length} entries for ${count} peers: give none or one per peer (blank for the default)` });
    }
  }
  if (problems.length > 0) return { peers: [], problems };

  const peers: ExternalPeerSpec[] = [];
  for (let i = 0; i < count; i++) {
    const entryProblems: PeerListProblem[] = [];
    const problem = (list: PeerListName, message: string) => entryProblems.push({ list, index: i, message });
    const address = lists.ips[i]!.trim();
    if (!isIp(address)) problem('ips', `${JSON.stringify(address)} is not an IP address`);
    const asnText = lists.asns[i]!.trim();
    // strconv.ParseUint(text, 0, 32), as kube-router's stringToUint32.
    const asn = parseGoUint(asnText, 32) ?? Number.NaN;
    const badAsn = Number.isNaN(asn) ? `${JSON.stringify(asnText)} is not an ASN` : asnProblem(asn);
    if (badAsn) problem('asns', badAsn);
    const spec: ExternalPeerSpec = { address: canonicalAddress(address), asn };
    const portText = lists.ports?.[i]?.trim() ?? '';
    if (portText !== '') {
      const port = parseGoUint(portText, 16) ?? Number.NaN;
      if (!(port >= 1)) problem('ports', `${JSON.stringify(portText)} is not a port (1-65535)`);
      else spec.port = port;
    }
    const passwordText = lists.passwords?.[i] ?? '';
    if (passwordText.trim() !== '') {
      try {
        spec.password = decodeBase64(passwordText);
      } catch (error) {
        problem('passwords', `the password ${(error as Error).message}`);
      }
    }
    const localIp = lists.localIps?.[i]?.trim() ?? '';
    if (localIp !== '') {
      if (!isIp(localIp)) problem('localIps', `${JSON.stringify(localIp)} is not an IP address`);
      else spec.localAddress = canonicalAddress(localIp);
    }
    if (entryProblems.length > 0) problems.push(...entryProblems);
    else peers.push(spec);
  }
  return { peers, problems };
}

const PER_FIELD_ANNOTATIONS: Record<PeerListName, string> = {
  ips: PEER_IPS_ANNOTATION,
  asns: PEER_ASNS_ANNOTATION,
  ports: PEER_PORTS_ANNOTATION,
  passwords: PEER_PASSWORDS_ANNOTATION,
  localIps: PEER_LOCAL_IPS_ANNOTATION,
};

/**
 * The external peers a Node's annotations name, as kube-router reads them: kube-router.io/peers (a YAML list of
 * `remoteip`, `remoteasn`, `localip`, `password` (base64), `port`) when present, else the older per-field
 * annotations, which need both kube-router.io/peer.ips and kube-router.io/peer.asns.
 */
export function annotatedExternalPeers(node: V1Node): { peers: ExternalPeerSpec[]; problems: Error[]; source: string } {
  const annotations = node.metadata?.annotations ?? {};
  const yamlList = annotations[PEERS_ANNOTATION];
  if (yamlList !== undefined) return { ...peersFromYaml(yamlList), source: PEERS_ANNOTATION };
  const ips = annotations[PEER_IPS_ANNOTATION];
  const asns = annotations[PEER_ASNS_ANNOTATION];
  if (ips === undefined || asns === undefined) return { peers: [], problems: [], source: PEER_IPS_ANNOTATION };
  const split = (value: string | undefined) => (value === undefined ? [] : value.split(','));
  const { peers, problems } = peersFromLists({
    ips: split(ips),
    asns: split(asns),
    ports: split(annotations[PEER_PORTS_ANNOTATION]),
    passwords: split(annotations[PEER_PASSWORDS_ANNOTATION]),
    localIps: split(annotations[PEER_LOCAL_IPS_ANNOTATION]),
  });
  return {
    peers,
    problems: problems.map(
      (p) => new Error(`${PER_FIELD_ANNOTATIONS[p.list]}${p.index === undefined ? '' : ` entry ${p.index + 1}`}: ${p.message}`),
    ),
    source: PEER_IPS_ANNOTATION,
  };
}

/**
 * A list of flat peer mappings is 2 levels deep and about 100 bytes a peer: these leave room for any real list (some
 * 600 peers) and keep a hostile one from reaching the parser (bounded-yaml.ts says why).
 */
const PEERS_YAML_BOUNDS = { maxBytes: 64 * 1024, maxDepth: 8 };

/** The kube-router.io/peers field behind each list. */
const YAML_FIELDS: Record<PeerListName, string> = { ips: 'remoteip', asns: 'remoteasn', ports: 'port', passwords: 'password', localIps: 'localip' };

/**
 * One peer per YAML list entry, each entry checked on its own (kube-router rejects the whole list on one bad entry).
 * The YAML library's own messages quote the annotation's text, passwords included: they are neither logged (no
 * process warning) nor passed on; a problem names the YAML error's code and line only.
 */
function peersFromYaml(text: string): { peers: ExternalPeerSpec[]; problems: Error[] } {
  const tooCostly = yamlBoundsProblem(text, PEERS_YAML_BOUNDS);
  if (tooCostly !== undefined) return { peers: [], problems: [new Error(`${PEERS_ANNOTATION} ${tooCostly}`)] };
  const parsed = parseDocument(text, { logLevel: 'silent', prettyErrors: false, uniqueKeys: true });
  const lineOf = (offset: number) => text.slice(0, offset).split('\n').length;
  const yamlProblems = [...parsed.errors, ...parsed.warnings].map(
    (issue) => new Error(`${PEERS_ANNOTATION} is not valid YAML: ${issue.code} at line ${lineOf(issue.pos[0])}`),
  );
  if (parsed.errors.length > 0) return { peers: [], problems: yamlProblems };
  let document: unknown;
  try {
    document = parsed.toJS({ maxAliasCount: 100 });
  } catch (error) {
    return { peers: [], problems: [new Error(`${PEERS_ANNOTATION} is not valid YAML: ${(error as { code?: string }).code ?? 'too many aliases'}`)] };
  }
  if (document === null || document === undefined) return { peers: [], problems: yamlProblems };
  if (!Array.isArray(document)) return { peers: [], problems: [new Error(`${PEERS_ANNOTATION} must be a YAML list of peers`)] };
  const peers: ExternalPeerSpec[] = [];
  const problems: Error[] = [...yamlProblems];
  document.forEach((entry: unknown, i) => {
    const where = `${PEERS_ANNOTATION} entry ${i + 1}`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      problems.push(new Error(`${where}: must be a mapping with remoteip and remoteasn`));
      return;
    }
    const fields = entry as Record<string, unknown>;
    const text = (name: string) => (fields[name] === undefined || fields[name] === null ? '' : String(fields[name]));
    if (text('remoteip') === '') problems.push(new Error(`${where}: remoteip cannot be empty`));
    if (text('remoteasn') === '') problems.push(new Error(`${where}: remoteasn cannot be empty`));
    if (text('remoteip') === '' || text('remoteasn') === '') return;
    const { peers: parsed, problems: entryProblems } = peersFromLists({
      ips: [text('remoteip')],
      asns: [text('remoteasn')],
      ports: [text('port')],
      passwords: [text('password')],
      localIps: [text('localip')],
    });
    for (const problem of entryProblems) problems.push(new Error(`${where}: ${YAML_FIELDS[problem.list]} ${problem.message}`));
    peers.push(...parsed);
  });
  return { peers, problems };
}

export interface ExternalPeerPlanInput {
  /** The peers of the plugin options (--peer-router-*): when there are any, the annotations are not read (kube-router). */
  configured: readonly ExternalPeerSpec[];
  /** This agent's Node. */
  node: V1Node;
  self: NodeAddresses;
}

/**
 * The external peers this node should have: the configured ones, else those of its annotations, each dialled from
 * its local address (else the node's primary address, or the node's address of the peer's family), carrying the
 * unicast families this node has addresses in. A peer whose family has no local address is a problem.
 */
export function planExternalPeers(input: ExternalPeerPlanInput): ExternalPeerPlan {
  const fromOptions = input.configured.length > 0;
  const { peers, problems, source } = fromOptions
    ? { peers: input.configured, problems: [] as Error[], source: 'options' }
    : annotatedExternalPeers(input.node);
  const plan: ExternalPeerPlan = { peers: [], problems: [...problems], incomplete: problems.length > 0 };
  const families = Object.keys(input.self.byFamily).map((f) => AFI_OF[f as keyof typeof AFI_OF]);
  const seen = new Set<string>();
  for (const spec of peers) {
    const family = familyOf(spec.address);
    const localAddress = spec.localAddress ?? (familyOf(input.self.primary) === family ? input.self.primary : input.self.byFamily[family]);
    if (!localAddress || familyOf(localAddress) !== family) {
      plan.problems.push(
        new Error(`${source}: peer ${spec.address} is ${family} but this node has no ${family} address to dial it from${spec.localAddress ? ` (localip ${spec.localAddress})` : ''}`),
      );
      continue;
    }
    if (seen.has(spec.address)) {
      plan.problems.push(new Error(`${source}: peer ${spec.address} is listed twice; the first entry is used`));
      continue;
    }
    seen.add(spec.address);
    plan.peers.push({
      address: spec.address,
      asn: spec.asn,
      port: spec.port ?? DEFAULT_EXTERNAL_PEER_PORT,
      ...(spec.password !== undefined && { password: spec.password }),
      localAddress,
      families,
      source,
    });
  }
  return plan;
}

/**
 * kube-router.io/bgp-local-addresses: the addresses gobgpd listens on; undefined without the annotation (gobgpd then
 * listens on every address). Throws when an entry is not an IP address or not an address of this node.
 */
export function bgpListenAddresses(node: V1Node, localAddresses: readonly string[]): string[] | undefined {
  const value = node.metadata?.annotations?.[BGP_LOCAL_ADDRESSES_ANNOTATION];
  if (value === undefined) return undefined;
  const local = new Set(localAddresses.map(canonicalAddress));
  const addresses = splitList(value);
  for (const address of addresses) {
    if (!isIp(address)) throw new Error(`${BGP_LOCAL_ADDRESSES_ANNOTATION}: ${JSON.stringify(address)} is not an IP address`);
    if (!local.has(canonicalAddress(address))) {
      throw new Error(`${BGP_LOCAL_ADDRESSES_ANNOTATION}: ${address} is not an address of this node, gobgpd cannot listen on it`);
    }
  }
  return addresses.map(canonicalAddress);
}
