import { parseIp } from './cidr.js';
import type { ParsedIp } from './cidr.js';
import type { IpFamily, PerFamily, PodProblem, Protocol } from './model.js';
import { compareText } from './sort.js';
import type { ContainerLike, Labels, PodLike } from './types.js';

/** What the compiler knows about one actionable pod. */
export interface PodView {
  /** `namespace/name`. */
  readonly id: string;
  readonly namespace: string;
  readonly name: string;
  readonly labels: Labels;
  readonly ips: PerFamily<readonly string[]>;
  /** The same addresses parsed, for range lookups. */
  readonly parsedIps: readonly ParsedIp[];
  /** Runs on this node. */
  readonly local: boolean;
  /** Named container ports, keyed `name/PROTOCOL`. */
  readonly namedPorts: ReadonlyMap<string, number>;
  /** What is wrong with the pod (a container port the kernel cannot match); it never reaches rules. */
  readonly problems: readonly PodProblem[];
}

const FINISHED_PHASES = new Set(['Succeeded', 'Failed', 'Completed']);

/**
 * Whether network policy applies to a pod, as kube-router decides it: it has an IP, does not use the host's network
 * and has not finished. A pod being deleted still counts: it runs through its grace period, and dropping it early
 * would open its isolation (as a target) or cut its draining connections (as a peer).
 */
export function isPodActionable(pod: PodLike): boolean {
  return isRunnable(pod) && podIps(pod).length > 0;
}

function isRunnable(pod: PodLike): boolean {
  return (
    pod?.spec?.hostNetwork !== true &&
    !FINISHED_PHASES.has(pod?.status?.phase ?? '') &&
    typeof pod?.metadata?.name === 'string' &&
    typeof pod.metadata.namespace === 'string'
  );
}

/**
 * The pods that hold each address now, by address text: only actionable pods, since a Succeeded or Failed pod keeps
 * its IP in status after the IP has gone to another pod. For naming the pods of a packet or a flow.
 */
export function actionablePodsByIp<Pod extends PodLike>(pods: Iterable<Pod>): Map<string, Pod> {
  const byIp = new Map<string, Pod>();
  for (const pod of pods) {
    if (!isPodActionable(pod)) continue;
    for (const ip of podIps(pod)) byIp.set(ip.text, pod);
  }
  return byIp;
}

/** The pod's valid IPs from status.podIPs (or status.podIP), deduplicated. */
export function podIps(pod: PodLike): ParsedIp[] {
  // Plain loops: every pod of the cluster is read here on a first compile.
  const entries = pod?.status?.podIPs;
  if (!Array.isArray(entries) || entries.length === 0) {
    const ip = parsedText(pod?.status?.podIP);
    return ip ? [ip] : [];
  }
  // One address per family, the usual pod: arrays of their exact length, as every view keeps them for the agent's
  // lifetime (an array grown by push from empty reserves room for 17).
  if (entries.length <= 2) {
    const first = parsedText((entries[0] as { ip?: unknown } | undefined)?.ip);
    const second = entries.length === 2 ? parsedText((entries[1] as { ip?: unknown } | undefined)?.ip) : undefined;
    if (first && second) return first.text === second.text ? [first] : [first, second];
    if (first) return [first];
    return second ? [second] : [];
  }
  // A longer list (malformed) is deduplicated through a set, not pairwise.
  const seen = new Set<string>();
  const ips: ParsedIp[] = [];
  for (let index = 0; index < entries.length; index++) {
    const ip = parsedText((entries[index] as { ip?: unknown } | undefined)?.ip);
    if (!ip || seen.has(ip.text)) continue;
    seen.add(ip.text);
    ips.push(ip);
  }
  return ips;
}

function parsedText(text: unknown): ParsedIp | undefined {
  return typeof text === 'string' ? parseIp(text) : undefined;
}

export function podView(pod: PodLike, nodeName: string): PodView | undefined {
  if (!isRunnable(pod)) return undefined;
  const parsedIps = podIps(pod);
  if (parsedIps.length === 0) return undefined;
  const namespace = pod.metadata?.namespace as string;
  const name = pod.metadata?.name as string;
  const labels = stringLabels(pod.metadata?.labels);
  const local = pod.spec?.nodeName === nodeName;
  const id = `${namespace}/${name}`;
  const problems: PodProblem[] = [];
  const namedPorts = namedContainerPorts(pod, id, problems);
  return {
    id,
    namespace,
    name,
    labels,
    ips: { ipv4: familyTexts(parsedIps, 'ipv4'), ipv6: familyTexts(parsedIps, 'ipv6') },
    parsedIps,
    local,
    namedPorts,
    problems: problems.length === 0 ? NO_PROBLEMS : problems,
  };
}

/** Views are kept for as long as their pods: those without problems share one empty list. */
const NO_PROBLEMS: readonly PodProblem[] = Object.freeze([]);

/** The addresses of one family, sorted, in an array of their exact length. */
function familyTexts(ips: readonly ParsedIp[], family: IpFamily): string[] {
  let count = 0;
  for (const ip of ips) if (ip.family === family) count++;
  const texts = new Array<string>(count);
  let index = 0;
  for (const ip of ips) if (ip.family === family) texts[index++] = ip.text;
  // Most pods have one address of each family: nothing to sort.
  if (count > 1) texts.sort();
  return texts;
}

/**
 * Whether two views of a pod differ in anything the compiler reads. The signatures behind it are built only when a
 * pod is replaced by a new object, and once per view: the first compile of a large cluster, where every pod is new,
 * builds none.
 */
export function samePodView(a: PodView | undefined, b: PodView | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return signatureOf(a) === signatureOf(b);
}

const signatures = new WeakMap<PodView, string>();

function signatureOf(view: PodView): string {
  let signature = signatures.get(view);
  if (signature === undefined) {
    signature = podSignature(view.local, view.labels, view.ips, view.namedPorts, view.problems);
    signatures.set(view, signature);
  }
  return signature;
}

/**
 * Named ports of the pod's containers and sidecars (init containers that keep running), keyed `name/PROTOCOL`.
 * Kubernetes keeps port names unique within a pod; should two collide anyway, the first wins. A named port whose
 * number no kernel can match (outside 1..65535) is left out and reported as the pod's problem: a rule naming it
 * would make the whole restore fail, taking every other policy's rules with it.
 */
function namedContainerPorts(pod: PodLike, id: string, problems: PodProblem[]): Map<string, number> {
  const ports = new Map<string, number>();
  addNamedPorts(ports, 'containers', pod.spec?.containers, id, problems);
  addNamedPorts(ports, 'initContainers', pod.spec?.initContainers, id, problems);
  return ports;
}

function addNamedPorts(
  ports: Map<string, number>,
  field: 'containers' | 'initContainers',
  list: unknown,
  id: string,
  problems: PodProblem[],
): void {
  if (!Array.isArray(list)) return;
  for (let containerIndex = 0; containerIndex < list.length; containerIndex++) {
    const container = list[containerIndex] as ContainerLike | undefined;
    if (field === 'initContainers' && container?.restartPolicy !== 'Always') continue;
    const containerPorts = Array.isArray(container?.ports) ? container.ports : [];
    for (let portIndex = 0; portIndex < containerPorts.length; portIndex++) {
      const port = containerPorts[portIndex];
      if (typeof port?.name !== 'string' || port.name === '' || !Number.isInteger(port.containerPort)) continue;
      if (port.containerPort < 1 || port.containerPort > 65535) {
        problems.push({
          pod: id,
          path: `spec.${field}[${containerIndex}].ports[${portIndex}].containerPort`,
          message:
            `named port ${JSON.stringify(port.name)} has containerPort ${port.containerPort}, outside 1..65535; ` +
            'policies naming it do not match it',
        });
        continue;
      }
      const protocol = (port.protocol ?? 'TCP') as Protocol;
      const key = namedPortKey(port.name, protocol);
      if (!ports.has(key)) ports.set(key, port.containerPort);
    }
  }
}

/** JSON keeps fields apart whatever they contain (a label value may hold any character, NUL included). */
function podSignature(
  local: boolean,
  labels: Labels,
  ips: PerFamily<readonly string[]>,
  ports: ReadonlyMap<string, number>,
  problems: readonly PodProblem[],
): string {
  const labelEntries = Object.keys(labels)
    .sort()
    .map((key) => [key, labels[key]]);
  const portEntries = [...ports].sort(compareEntries);
  return JSON.stringify([local, labelEntries, ips.ipv4, ips.ipv6, portEntries, problems.map((p) => [p.path, p.message])]);
}

function compareEntries(a: readonly [string, unknown], b: readonly [string, unknown]): number {
  return compareText(a[0], b[0]);
}

export function namedPortKey(name: string, protocol: Protocol): string {
  return `${name}/${protocol}`;
}

function stringLabels(labels: unknown): Labels {
  if (typeof labels !== 'object' || labels === null) return {};
  let allStrings = true;
  for (const key in labels) {
    if (Object.hasOwn(labels, key) && typeof (labels as Record<string, unknown>)[key] !== 'string') {
      allStrings = false;
      break;
    }
  }
  if (allStrings) return labels as Labels;
  const result: Record<string, string> = {};
  for (const [key, value] of Object.entries(labels)) if (typeof value === 'string') result[key] = value;
  return result;
}

export function namespaceLabels(labels: unknown): Labels {
  return stringLabels(labels);
}
