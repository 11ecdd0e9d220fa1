import { trackNetns, untrackNetns } from './exit-cleanup.js';
import { hostAddress, parsePodCidrs, type PodCidr } from './ip-allocator.js';
import { runPrefix } from './names.js';
import { addNetns, deleteNetns, ipBatch, setSysctls } from './netns.js';
import { runCommand } from './run-command.js';

/** The underlay's default subnets: the lab nodes' own network, as a node subnet in a data centre. */
export const DEFAULT_UNDERLAY_CIDRS: readonly string[] = ['10.250.0.0/24', 'fd00:10:250::/64'];
/** Node k (1-based) gets this offset plus k in every underlay subnet: 10.250.0.11, 10.250.0.12, ... */
const NODE_ADDRESS_OFFSET = 10;
/** The bridge inside the underlay namespace that every node and the host are plugged into. */
const UNDERLAY_BRIDGE = 'br0';

export interface LabUnderlayOptions {
  /** 1-6 lowercase letters or digits, as the lab's (`krt-<runId>-underlay`). */
  runId: string;
  /** One subnet per family; default 10.250.0.0/24 and fd00:10:250::/64. The host takes the first address of each. */
  cidrs?: readonly string[];
}

/**
 * The link between lab nodes: a bridge in its own network namespace, with a veth from the host's namespace, so that
 * the host (the shell that ran the lab, the embedded API server) reaches every node's address and each node reaches
 * the API server on the host's address, as machines on one subnet do.
 */
export interface LabUnderlay {
  readonly netns: string;
  readonly bridge: string;
  readonly cidrs: readonly PodCidr[];
  /** The host end of the veth into the underlay, in the host's namespace. */
  readonly hostInterface: string;
  /** The host's addresses on the underlay, one per subnet: where the nodes reach the API server. */
  readonly hostIps: readonly string[];
  /** Node k's (1-based) addresses on the underlay, one per subnet. */
  nodeIps(index: number): string[];
  /** Removes the host's veth and the namespace, which takes the bridge and every veth end in it with it. */
  remove(): Promise<void>;
}

export async function createLabUnderlay(options: LabUnderlayOptions): Promise<LabUnderlay> {
  const cidrs = parsePodCidrs(options.cidrs ?? DEFAULT_UNDERLAY_CIDRS);
  await refuseSubnetsInUse(cidrs);
  const prefix = runPrefix(options.runId);
  const netns = `${prefix}underlay`;
  const hostInterface = `${prefix}ul`;
  const hostIps = cidrs.map((cidr) => hostAddress(cidr, 1));
  await addNetns(netns);
  trackNetns(netns);
  try {
    await setSysctls(netns, { 'net.ipv6.conf.all.accept_dad': 0, 'net.ipv6.conf.default.accept_dad': 0 });
    await ipBatch(netns, ['link set lo up', `link add ${UNDERLAY_BRIDGE} type bridge`, `link set ${UNDERLAY_BRIDGE} up`]);
    await runCommand('ip', ['link', 'add', hostInterface, 'type', 'veth', 'peer', 'name', 'host', 'netns', netns]);
    await ipBatch(netns, [`link set host master ${UNDERLAY_BRIDGE}`, 'link set host up']);
    await runCommand('ip', ['-batch', '-'], {
      input: [
        ...cidrs.map((cidr, index) => `addr add ${hostIps[index]}/${cidr.prefixLength} dev ${hostInterface} nodad`),
        `link set ${hostInterface} up`,
      ].join('\n'),
    });
  } catch (error) {
    await deleteNetns(netns).catch(() => undefined);
    untrackNetns(netns);
    throw error;
  }
  return {
    netns,
    bridge: UNDERLAY_BRIDGE,
    cidrs,
    hostInterface,
    hostIps,
    nodeIps: (index) => cidrs.map((cidr) => hostAddress(cidr, NODE_ADDRESS_OFFSET + index)),
    async remove() {
      // The host end first: a deleted namespace lets go of its interfaces (and so their peers) only later, in the
      // background, and the host's subnet route would linger until then.
      await runCommand('ip', ['link', 'del', hostInterface]).catch(async (error: unknown) => {
        if ((await runCommand('ip', ['-o', 'link', 'show'])).includes(` ${hostInterface}@`)) throw error;
      });
      await deleteNetns(netns);
      untrackNetns(netns);
    },
  };
}

/** Two labs on one subnet would fight over the host's routes: the second one is refused with the way out. */
async function refuseSubnetsInUse(cidrs: readonly PodCidr[]): Promise<void> {
  for (const cidr of cidrs) {
    const output = await runCommand('ip', ['-o', `-${cidr.family}`, 'addr', 'show', 'to', cidr.cidr]);
    if (output.trim() !== '') {
      const where = output.trim().split('\n')[0]?.split(/\s+/)[1] ?? 'an interface';
      throw new Error(
        `the underlay subnet ${cidr.cidr} is already in use on this host (${where}; another lab?): choose other subnets`,
      );
    }
  }
}
