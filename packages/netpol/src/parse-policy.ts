import { AddressRanges, cidrStrictlyContains, parseCidr } from './cidr.js';
import type { ParsedCidr } from './cidr.js';
import { PolicyInputError, assertKnownFields, describeValue, isPlainObject } from './input-error.js';
import type { Direction, IpBlock, PerFamily, PolicyProblem, PortRange, Protocol } from './model.js';
import { namedPortKey } from './pods.js';
import { compileLabelSelector } from './selector.js';
import type { CompiledSelector } from './selector.js';
import { compareText } from './sort.js';
import type { NetworkPolicyLike } from './types.js';

/** A peer given by podSelector and/or namespaceSelector. */
export interface SelectorPeer {
  /** Unset means "the policy's namespace" (podSelector-only peers). */
  readonly namespaceSelector: CompiledSelector | undefined;
  /** Unset means "every pod" of the selected namespaces. */
  readonly podSelector: CompiledSelector | undefined;
  /** The policy's namespace, which podSelector-only peers are confined to. */
  readonly namespace: string;
  /** Equal keys select the same pods. */
  readonly key: string;
}

export interface BlockPeer {
  readonly cidr: ParsedCidr;
  readonly except: readonly ParsedCidr[];
  readonly block: IpBlock;
}

export interface NamedPortRef {
  readonly name: string;
  readonly protocol: Protocol;
  /** Where the policy names it, for the warning when it resolves to nothing. */
  readonly path: string;
}

export interface ParsedRule {
  readonly index: number;
  /** No `from`/`to`, or an empty list: every address. */
  readonly anyPeer: boolean;
  readonly selectorPeers: readonly SelectorPeer[];
  readonly blocks: readonly BlockPeer[];
  /** The blocks as the model lists them: deduplicated and sorted, built once per policy version. */
  readonly ipBlocks: PerFamily<readonly IpBlock[]>;
  /** Every address the blocks cover, for finding the pods inside them. */
  readonly blockRanges: AddressRanges;
  /** No `ports`, or an empty list. */
  readonly allPorts: boolean;
  readonly ports: readonly PortRange[];
  readonly namedPorts: readonly NamedPortRef[];
}

export interface ParsedDirection {
  readonly isolates: boolean;
  readonly failed: boolean;
  readonly rules: readonly ParsedRule[];
}

/** A policy checked and turned into matchers; what is left is resolving it against pods. */
export interface ParsedPolicy {
  readonly id: string;
  readonly namespace: string;
  readonly name: string;
  /** False when the object has no namespace or name: it can select nothing. */
  readonly identified: boolean;
  /** The policy's podSelector; undefined when it is invalid, and then every pod of the namespace is a target. */
  readonly targetSelector: CompiledSelector | undefined;
  readonly ingress: ParsedDirection;
  readonly egress: ParsedDirection;
  readonly problems: readonly PolicyProblem[];
  /** The selector peers of every rule that is compiled, for deciding which pod changes concern the policy. */
  readonly selectorPeers: readonly SelectorPeer[];
  /** Some peer uses a namespaceSelector, so namespace label changes can matter. */
  readonly usesNamespaceSelector: boolean;
  /**
   * The egress rules whose named ports resolve against pods outside their selector peers (any peer, or ipBlocks),
   * for deciding which pod changes concern the policy without resolving it.
   */
  readonly egressNamedPortsBeyond: readonly BeyondSelectorsRule[];
}

/** An egress rule whose named ports resolve against pods beyond its selector peers. */
export interface BeyondSelectorsRule {
  /** `name/PROTOCOL` of each named port. */
  readonly keys: readonly string[];
  readonly anyPeer: boolean;
  readonly blockRanges: AddressRanges;
}

const PROTOCOLS: readonly Protocol[] = ['TCP', 'UDP', 'SCTP'];
const POLICY_TYPES = { Ingress: 'ingress', Egress: 'egress' } as const;

/**
 * Checks a NetworkPolicy and compiles its selectors. Never throws: every problem is collected, an error fails its
 * direction closed (or the whole policy, when the direction cannot be told), and the rest is still compiled. An object
 * that throws while being read (a hostile getter, a proxy) fails closed as a whole.
 */
export function parsePolicy(policy: NetworkPolicyLike): ParsedPolicy {
  try {
    return parseReadablePolicy(policy);
  } catch (error) {
    return unreadablePolicy(policy, error);
  }
}

function unreadablePolicy(policy: NetworkPolicyLike, error: unknown): ParsedPolicy {
  let namespace = '';
  let name = '';
  try {
    if (typeof policy?.metadata?.namespace === 'string') namespace = policy.metadata.namespace;
    if (typeof policy?.metadata?.name === 'string') name = policy.metadata.name;
  } catch {
    // Its identity cannot be read either: it is reported without one.
  }
  const id = `${namespace || '<no namespace>'}/${name || '<no name>'}`;
  const failed = { isolates: true, failed: true, rules: [] };
  return {
    id,
    namespace,
    name,
    identified: namespace !== '' && name !== '',
    // Every pod of its namespace is a target, so that all of them fail closed.
    targetSelector: undefined,
    ingress: failed,
    egress: failed,
    problems: [
      {
        policy: id,
        severity: 'error',
        path: '',
        message: `the object cannot be read: ${error instanceof Error ? error.message : String(error)}`,
      },
    ],
    selectorPeers: [],
    usesNamespaceSelector: false,
    egressNamedPortsBeyond: [],
  };
}

function parseReadablePolicy(policy: NetworkPolicyLike): ParsedPolicy {
  const namespace = typeof policy?.metadata?.namespace === 'string' ? policy.metadata.namespace : '';
  const name = typeof policy?.metadata?.name === 'string' ? policy.metadata.name : '';
  const id = `${namespace || '<no namespace>'}/${name || '<no name>'}`;
  const problems: PolicyProblem[] = [];
  const report = (severity: PolicyProblem['severity'], path: string, message: string, direction?: Direction) =>
    problems.push(
      direction ? { policy: id, severity, direction, path, message } : { policy: id, severity, path, message },
    );

  const failedEverywhere = (targetSelector: CompiledSelector | undefined): ParsedPolicy => ({
    id,
    namespace,
    name,
    identified: namespace !== '' && name !== '',
    targetSelector,
    ingress: { isolates: true, failed: true, rules: [] },
    egress: { isolates: true, failed: true, rules: [] },
    problems,
    selectorPeers: [],
    usesNamespaceSelector: false,
    egressNamedPortsBeyond: [],
  });

  if (namespace === '' || name === '') {
    report('error', 'metadata', 'a NetworkPolicy needs metadata.namespace and metadata.name; it selects nothing');
    return { ...failedEverywhere(undefined), identified: false };
  }
  const spec: unknown = policy.spec;
  if (!isPlainObject(spec)) {
    report('error', 'spec', `expected an object, got ${describeValue(spec)}`);
    return failedEverywhere(undefined);
  }

  let targetSelector: CompiledSelector | undefined;
  try {
    // A missing podSelector is the empty selector: the API server requires the field, and Go's zero value selects all.
    targetSelector = compileLabelSelector(spec.podSelector ?? {}, 'spec.podSelector');
  } catch (error) {
    reportError(error, 'spec.podSelector', report);
  }

  try {
    assertKnownFields(spec, ['podSelector', 'policyTypes', 'ingress', 'egress'], 'spec');
  } catch (error) {
    reportError(error, 'spec', report);
    return failedEverywhere(targetSelector);
  }

  let types: { ingress: boolean; egress: boolean };
  try {
    types = policyTypes(spec.policyTypes, spec.egress);
  } catch (error) {
    reportError(error, 'spec.policyTypes', report);
    return failedEverywhere(targetSelector);
  }

  const context: ParseContext = {
    namespace,
    report,
    usesNamespaceSelector: false,
  };
  const ingress = parseDirection('ingress', types.ingress, spec.ingress, context);
  const egress = parseDirection('egress', types.egress, spec.egress, context);
  const targetsFailed = targetSelector === undefined;
  const finalIngress = targetsFailed && ingress.isolates ? { ...ingress, failed: true, rules: [] } : ingress;
  const finalEgress = targetsFailed && egress.isolates ? { ...egress, failed: true, rules: [] } : egress;
  return {
    id,
    namespace,
    name,
    identified: true,
    targetSelector,
    ingress: finalIngress,
    egress: finalEgress,
    problems,
    selectorPeers: [...finalIngress.rules, ...finalEgress.rules].flatMap((rule) => rule.selectorPeers),
    usesNamespaceSelector: context.usesNamespaceSelector,
    egressNamedPortsBeyond: finalEgress.rules
      .filter((rule) => rule.namedPorts.length > 0 && (rule.anyPeer || rule.blocks.length > 0))
      .map((rule) => ({
        keys: [...new Set(rule.namedPorts.map((ref) => namedPortKey(ref.name, ref.protocol)))],
        anyPeer: rule.anyPeer,
        blockRanges: rule.blockRanges,
      })),
  };
}

type Report = (severity: PolicyProblem['severity'], path: string, message: string, direction?: Direction) => void;

interface ParseContext {
  readonly namespace: string;
  readonly report: Report;
  usesNamespaceSelector: boolean;
}

function reportError(error: unknown, fallbackPath: string, report: Report, direction?: Direction): void {
  if (error instanceof PolicyInputError) report('error', error.path, error.message, direction);
  else report('error', fallbackPath, error instanceof Error ? error.message : String(error), direction);
}

/** Kubernetes' defaulting: Ingress always; Egress when egress rules exist — unless policyTypes says otherwise. */
function policyTypes(value: unknown, egressRules: unknown): { ingress: boolean; egress: boolean } {
  if (value === undefined || value === null || (Array.isArray(value) && value.length === 0)) {
    // A malformed `egress` counts as present, so that it is reported and fails egress closed instead of vanishing.
    const hasEgress = Array.isArray(egressRules)
      ? egressRules.length > 0
      : egressRules !== undefined && egressRules !== null;
    return { ingress: true, egress: hasEgress };
  }
  if (!Array.isArray(value))
    throw new PolicyInputError('spec.policyTypes', `expected a list, got ${describeValue(value)}`);
  const types = { ingress: false, egress: false };
  value.forEach((type: unknown, index) => {
    if (type !== 'Ingress' && type !== 'Egress') {
      throw new PolicyInputError(
        `spec.policyTypes[${index}]`,
        `unsupported policy type ${describeValue(type)}; expected Ingress or Egress`,
      );
    }
    types[POLICY_TYPES[type]] = true;
  });
  return types;
}

function parseDirection(
  direction: Direction,
  isolates: boolean,
  rules: unknown,
  context: ParseContext,
): ParsedDirection {
  const path = `spec.${direction}`;
  if (!isolates) {
    if (Array.isArray(rules) && rules.length > 0) {
      const type = direction === 'ingress' ? 'Ingress' : 'Egress';
      context.report(
        'warning',
        path,
        `${direction} rules are ignored because policyTypes does not include ${type}`,
        direction,
      );
    }
    return { isolates: false, failed: false, rules: [] };
  }
  if (rules === undefined || rules === null) return { isolates: true, failed: false, rules: [] };
  if (!Array.isArray(rules)) {
    context.report('error', path, `expected a list of rules, got ${describeValue(rules)}`, direction);
    return { isolates: true, failed: true, rules: [] };
  }
  let failed = false;
  const parsed: ParsedRule[] = [];
  rules.forEach((rule: unknown, index) => {
    const rulePath = `${path}[${index}]`;
    const errors: unknown[] = [];
    const result = parseRule(direction, rule, index, rulePath, context, errors);
    for (const error of errors) reportError(error, rulePath, context.report, direction);
    if (errors.length > 0 || !result) failed = true;
    else parsed.push(result);
  });
  return failed ? { isolates: true, failed: true, rules: [] } : { isolates: true, failed: false, rules: parsed };
}

/** Parses one rule, pushing every error it finds (not just the first) into `errors`. */
function parseRule(
  direction: Direction,
  rule: unknown,
  index: number,
  path: string,
  context: ParseContext,
  errors: unknown[],
): ParsedRule | undefined {
  if (!isPlainObject(rule)) {
    errors.push(new PolicyInputError(path, `expected a rule, got ${describeValue(rule)}`));
    return undefined;
  }
  const peerField = direction === 'ingress' ? 'from' : 'to';
  try {
    assertKnownFields(rule, direction === 'ingress' ? ['from', '_from', 'ports'] : ['to', 'ports'], path);
  } catch (error) {
    errors.push(error);
  }
  const peers: unknown = direction === 'ingress' ? rule.from ?? rule._from : rule.to;
  const selectorPeers: SelectorPeer[] = [];
  const blocks: BlockPeer[] = [];
  let anyPeer = false;
  if (peers === undefined || peers === null || (Array.isArray(peers) && peers.length === 0)) anyPeer = true;
  else if (!Array.isArray(peers))
    errors.push(new PolicyInputError(`${path}.${peerField}`, `expected a list of peers, got ${describeValue(peers)}`));
  else {
    peers.forEach((peer: unknown, peerIndex) => {
      try {
        const parsed = parsePeer(peer, `${path}.${peerField}[${peerIndex}]`, context);
        if ('cidr' in parsed) blocks.push(parsed);
        else selectorPeers.push(parsed);
      } catch (error) {
        errors.push(error);
      }
    });
  }

  const ports: PortRange[] = [];
  const namedPorts: NamedPortRef[] = [];
  let allPorts = false;
  const portList: unknown = rule.ports;
  if (portList === undefined || portList === null || (Array.isArray(portList) && portList.length === 0))
    allPorts = true;
  else if (!Array.isArray(portList))
    errors.push(new PolicyInputError(`${path}.ports`, `expected a list of ports, got ${describeValue(portList)}`));
  else {
    portList.forEach((port: unknown, portIndex) => {
      try {
        const parsed = parsePort(port, `${path}.ports[${portIndex}]`);
        if ('name' in parsed) namedPorts.push(parsed);
        else ports.push(parsed);
      } catch (error) {
        errors.push(error);
      }
    });
  }
  return {
    index,
    anyPeer,
    selectorPeers,
    blocks,
    ipBlocks: blocks.length === 0 ? NO_IP_BLOCKS : blocksByFamily(blocks),
    blockRanges: blocks.length === 0 ? NO_BLOCK_RANGES : new AddressRanges(blocks),
    allPorts,
    ports,
    namedPorts,
  };
}

/**
 * What a rule without ipBlocks (most rules) holds for them, shared: every parse of every policy version would
 * otherwise build its own empty lists and ranges, and keep them as long as the policy.
 */
const NO_IP_BLOCKS: PerFamily<readonly IpBlock[]> = Object.freeze({ ipv4: Object.freeze([]), ipv6: Object.freeze([]) });
const NO_BLOCK_RANGES = new AddressRanges([]);

function blocksByFamily(blocks: readonly BlockPeer[]): PerFamily<readonly IpBlock[]> {
  const byFamily = { ipv4: new Map<string, IpBlock>(), ipv6: new Map<string, IpBlock>() };
  for (const { cidr, block } of blocks) byFamily[cidr.family].set(`${block.cidr} ${block.except.join(' ')}`, block);
  const sorted = (map: Map<string, IpBlock>) =>
    [...map.entries()].sort(([a], [b]) => compareText(a, b)).map(([, block]) => block);
  return { ipv4: sorted(byFamily.ipv4), ipv6: sorted(byFamily.ipv6) };
}

function parsePeer(peer: unknown, path: string, context: ParseContext): SelectorPeer | BlockPeer {
  if (!isPlainObject(peer)) throw new PolicyInputError(path, `expected a peer, got ${describeValue(peer)}`);
  assertKnownFields(peer, ['podSelector', 'namespaceSelector', 'ipBlock'], path);
  const hasSelector = peer.podSelector != null || peer.namespaceSelector != null;
  if (peer.ipBlock != null) {
    if (hasSelector)
      throw new PolicyInputError(path, 'ipBlock cannot be combined with podSelector or namespaceSelector');
    return parseIpBlock(peer.ipBlock, `${path}.ipBlock`, context);
  }
  if (!hasSelector) throw new PolicyInputError(path, 'a peer needs podSelector, namespaceSelector or ipBlock');
  const podSelector =
    peer.podSelector != null ? compileLabelSelector(peer.podSelector, `${path}.podSelector`) : undefined;
  const namespaceSelector =
    peer.namespaceSelector != null
      ? compileLabelSelector(peer.namespaceSelector, `${path}.namespaceSelector`)
      : undefined;
  if (namespaceSelector) context.usesNamespaceSelector = true;
  const podKey = podSelector?.key ?? '*';
  const key = namespaceSelector
    ? `namespaces${namespaceSelector.key}/pods${podKey}`
    : `namespace ${namespaceInKey(context.namespace)}/pods${podKey}`;
  return { namespaceSelector, podSelector, namespace: context.namespace, key };
}

/**
 * A namespace as peer keys spell it. A namespace the API server accepts (a DNS label) is written as it is, so that
 * the names of sets keyed by it stay as they were; any other is quoted, so that a malformed one (holding a newline, a
 * slash or braces) cannot spell the key of another peer, or of a rule's several peers joined by newlines.
 */
function namespaceInKey(namespace: string): string {
  return DNS_LABEL.test(namespace) ? namespace : JSON.stringify(namespace);
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function parseIpBlock(block: unknown, path: string, context: ParseContext): BlockPeer {
  if (!isPlainObject(block)) throw new PolicyInputError(path, `expected an ipBlock, got ${describeValue(block)}`);
  assertKnownFields(block, ['cidr', 'except'], path);
  const cidr = parseCidrAt(block.cidr, `${path}.cidr`, context);
  const exceptList: unknown = block.except ?? [];
  if (!Array.isArray(exceptList))
    throw new PolicyInputError(`${path}.except`, `expected a list of CIDRs, got ${describeValue(exceptList)}`);
  const except = exceptList.map((text: unknown, index) => {
    const at = `${path}.except[${index}]`;
    const parsed = parseCidrAt(text, at, context);
    if (parsed.family !== cidr.family)
      throw new PolicyInputError(at, `${parsed.text} is not of the same IP family as ${cidr.text}`);
    if (!cidrStrictlyContains(cidr, parsed))
      throw new PolicyInputError(at, `${parsed.text} is not strictly inside ${cidr.text}`);
    return parsed;
  });
  const exceptTexts = [...new Set(except.map((entry) => entry.text))].sort();
  return { cidr, except, block: { cidr: cidr.text, except: exceptTexts } };
}

function parseCidrAt(text: unknown, path: string, context: ParseContext): ParsedCidr {
  if (typeof text !== 'string') throw new PolicyInputError(path, `expected a CIDR string, got ${describeValue(text)}`);
  let parsed: ParsedCidr;
  try {
    parsed = parseCidr(text);
  } catch (error) {
    throw new PolicyInputError(path, (error as Error).message);
  }
  if (parsed.hadHostBits) context.report('warning', path, `${text} has host bits set; using ${parsed.text}`);
  return parsed;
}

/** IANA_SVC_NAME, what Kubernetes requires of a named port: 1-15 of [a-z0-9-], a letter, no leading, trailing or double '-'. */
const SERVICE_NAME = /^(?=.*[a-z])(?!.*--)[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$/;

function parsePort(port: unknown, path: string): PortRange | NamedPortRef {
  if (!isPlainObject(port)) throw new PolicyInputError(path, `expected a port, got ${describeValue(port)}`);
  assertKnownFields(port, ['protocol', 'port', 'endPort'], path);
  const protocolValue = port.protocol ?? 'TCP';
  if (!PROTOCOLS.includes(protocolValue as Protocol)) {
    throw new PolicyInputError(
      `${path}.protocol`,
      `unsupported protocol ${describeValue(protocolValue)}; expected TCP, UDP or SCTP`,
    );
  }
  const protocol = protocolValue as Protocol;
  const { port: value, endPort } = port;
  if (endPort != null && typeof value !== 'number') {
    throw new PolicyInputError(`${path}.endPort`, 'endPort needs a numeric port');
  }
  if (value === undefined || value === null) return { protocol };
  if (typeof value === 'string') {
    if (!SERVICE_NAME.test(value)) {
      throw new PolicyInputError(
        `${path}.port`,
        `${JSON.stringify(
          value,
        )} is neither a port number nor a valid port name (1-15 lower-case letters, digits and '-', with a letter)`,
      );
    }
    return { name: value, protocol, path };
  }
  if (!isPortNumber(value))
    throw new PolicyInputError(`${path}.port`, `port must be 1..65535, got ${describeValue(value)}`);
  if (endPort === undefined || endPort === null) return { protocol, port: value };
  if (!isPortNumber(endPort))
    throw new PolicyInputError(`${path}.endPort`, `endPort must be 1..65535, got ${describeValue(endPort)}`);
  if (endPort < value) throw new PolicyInputError(`${path}.endPort`, `endPort ${endPort} is below port ${value}`);
  return endPort === value ? { protocol, port: value } : { protocol, port: value, endPort };
}

function isPortNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 65535;
}
