import { parseCidr } from '@kube-router/kube';

/**
 * kube-router's edit of the node's CNI network configuration (its pkg/utils/cni.go and the routing controller's
 * initCNIConfig): the first `bridge` plugin's host-local ipam gets each of the node's pod CIDRs as a range set of
 * its own, a legacy `ipam.subnet` is folded into `ranges` as the CNI IPAM loader does, and with --auto-mtu the
 * bridge gets the node's MTU. Every key this edit does not know stays as it was, so the file keeps what the
 * DaemonSet's ConfigMap (hairpinMode, isDefaultGateway, a portmap plugin, ...) put there.
 */

type Json = Record<string, unknown>;

export interface CniConfigEdit {
  /** The node's pod CIDRs; they are added IPv4 first, then IPv6, as kube-router adds them. */
  readonly podCidrs: readonly string[];
  /** The bridge's `mtu`; undefined leaves the file's value as it is (--auto-mtu=false). */
  readonly mtu?: number | undefined;
}

export interface EditedCniConfig {
  /** The new file content; the old content when nothing changed. */
  readonly text: string;
  /** Whether the content differs from the file's in anything but formatting. */
  readonly changed: boolean;
  /** The pod CIDRs the file now lists, as networks (`10.244.0.0/24`). */
  readonly ranges: readonly string[];
}

/** A configuration list when the file's name ends in `.conflist`, as kube-router and libcni tell them apart. */
export function isConfList(path: string): boolean {
  return path.toLowerCase().endsWith('.conflist');
}

/**
 * Applies the edit to a configuration file's text; throws an Error naming the problem (not JSON, no bridge plugin,
 * no ipam, a range that is not a CIDR), in which case the file must be left as it is.
 */
export function editCniConfig(text: string, path: string, edit: CniConfigEdit): EditedCniConfig {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new Error(`${path} is not JSON: ${(error as Error).message}`, { cause: error });
  }
  if (!isObject(parsed)) throw new Error(`${path} does not hold a JSON object`);
  const before = JSON.stringify(parsed);
  const bridge = bridgePlugin(parsed, path);
  const ipam = bridge.ipam;
  if (!isObject(ipam)) throw new Error(`${path}: the bridge plugin has no ipam section to add the pod CIDRs to`);

  const ranges = rangeNetworks(ipam, path);
  const add = (cidr: string, what: string) => {
    const network = parseCidr(cidr)?.cidr;
    if (network === undefined) throw new Error(`${path}: ${what} ${JSON.stringify(cidr)} is not a CIDR`);
    if (ranges.includes(network)) return;
    ranges.push(network);
    const sets = Array.isArray(ipam.ranges) ? ipam.ranges : (ipam.ranges = []);
    sets.push([{ subnet: cidr }]);
  };
  // Go's json.Unmarshal into a string field: absent, null or "" leave nothing to fold (and "" stays in the file).
  if (ipam.subnet !== undefined && ipam.subnet !== null && typeof ipam.subnet !== 'string') {
    throw new Error(`${path}: ipam.subnet ${JSON.stringify(ipam.subnet)} is not a string`);
  }
  if (typeof ipam.subnet === 'string' && ipam.subnet !== '') {
    add(ipam.subnet, 'ipam.subnet');
    delete ipam.subnet;
  }
  // IPv4 first, then IPv6, as kube-router inserts them: host-local gives a pod its addresses in the ranges' order.
  for (const cidr of [...edit.podCidrs].sort((a, b) => Number(a.includes(':')) - Number(b.includes(':')))) add(cidr, 'pod CIDR');
  if (edit.mtu !== undefined) bridge.mtu = edit.mtu;

  const after = JSON.stringify(parsed);
  const changed = after !== before;
  return { text: changed ? `${JSON.stringify(parsed, null, 2)}\n` : text, changed, ranges };
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The first plugin of type `bridge` of a list, or the configuration itself (kube-router's getBridgePlugin). */
function bridgePlugin(config: Json, path: string): Json {
  if (!isConfList(path)) {
    if (typeof config.type !== 'string' || config.type === '') throw new Error(`${path}: the configuration has no type`);
    return config;
  }
  if (!Array.isArray(config.plugins) || config.plugins.length === 0) throw new Error(`${path}: the configuration list has no plugins`);
  const bridge = config.plugins.find((plugin): plugin is Json => isObject(plugin) && plugin.type === 'bridge');
  if (!bridge) throw new Error(`${path}: the configuration list has no bridge plugin`);
  return bridge;
}

/** The networks of the ipam's range sets; a subnet that is not a CIDR fails the edit, as it fails host-local. */
function rangeNetworks(ipam: Json, path: string): string[] {
  if (ipam.ranges === undefined || ipam.ranges === null) return [];
  if (!Array.isArray(ipam.ranges)) throw new Error(`${path}: ipam.ranges is not a list of range sets`);
  const networks: string[] = [];
  for (const set of ipam.ranges) {
    if (!Array.isArray(set)) throw new Error(`${path}: ipam.ranges holds ${JSON.stringify(set)}, not a range set`);
    for (const range of set) {
      const subnet = isObject(range) ? range.subnet : undefined;
      if (subnet === undefined || subnet === '') continue;
      const parsed = typeof subnet === 'string' ? parseCidr(subnet) : undefined;
      if (parsed === undefined) throw new Error(`${path}: ipam range subnet ${JSON.stringify(subnet)} is not a CIDR`);
      networks.push(parsed.cidr);
    }
  }
  return networks;
}
