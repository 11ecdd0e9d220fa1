/**
 * The lab's external router: BIRD in its own network namespace on the underlay, peered with every lab node over eBGP
 * the way an operator configures the top-of-rack router of a kube-router cluster (its own ASN, every node's address as
 * a neighbor, the nodes pointed at it with --peer-router-ips/--peer-router-asns). It installs what it learns (pod
 * CIDRs, Service addresses) into its namespace's kernel, so a request from there goes to a node by those routes.
 */
import { mkdir } from 'node:fs/promises';
import ipaddr from 'ipaddr.js';
import { addNetns, deleteNetns, ExecRunner } from '@kube-router/netfilter';
import { LAB_PREFIX, type LabUnderlay } from '@kube-router/testkit';
import { startBird, type BgpRouter, type BgpRouterNeighbor } from '@kube-router/testkit/bgp-routers';

/** The router's ASN: a private one that differs from kube-router's default cluster ASN (64512), so the peering is eBGP. */
export const EXTERNAL_ROUTER_ASN = 65000;
/** The router takes this offset in every underlay subnet: the host is .1, node k is .1k. */
export const ROUTER_ADDRESS_OFFSET = 2;
/** Its side of the veth in the underlay namespace, plugged into the bridge. */
const UNDERLAY_PORT = 'router';

const runner = new ExecRunner({ defaultTimeoutMs: 10_000 });

export interface ExternalRouterOptions {
  runId: string;
  underlay: LabUnderlay;
  /** Every lab node's underlay addresses. */
  nodes: readonly { nodeName: string; nodeIps: readonly string[] }[];
  /** The nodes' ASN (--cluster-asn). */
  nodeAsn: number;
  /**
   * The router's own ASN: EXTERNAL_ROUTER_ASN by default; the agents' --peer-router-asns when they were given one (a
   * manifest's peer router, played by this one). Equal to the nodes' ASN, the sessions are iBGP.
   */
  asn?: number;
  /** Where BIRD's configuration, control socket and log go (the lab's work directory removes them). */
  dir: string;
}

export interface ExternalRouter {
  readonly netns: string;
  /** Its underlay addresses, one per family, in the order of the underlay's subnets. */
  readonly addresses: readonly string[];
  readonly asn: number;
  readonly bird: BgpRouter;
  /** The flags that point an agent at this router. */
  readonly agentFlags: readonly string[];
  stop(): Promise<void>;
}

export function externalRouterNetns(runId: string): string {
  return `${LAB_PREFIX}${runId}-router`;
}

/** The address `offset` after the network address of a subnet. */
export function addressInSubnet(cidr: string, offset: number): string {
  const [network, length] = ipaddr.parseCIDR(cidr);
  const bytes = ipaddr.parse(network.toString()).toByteArray();
  let carry = offset;
  for (let i = bytes.length - 1; i >= 0 && carry > 0; i--) {
    const sum = bytes[i]! + carry;
    bytes[i] = sum & 0xff;
    carry = sum >> 8;
  }
  const address = ipaddr.fromByteArray(bytes);
  if (!address.match(network, length)) throw new Error(`${cidr} has no address at offset ${offset}`);
  return address.toString();
}

export async function startExternalRouter(options: ExternalRouterOptions): Promise<ExternalRouter> {
  const netns = externalRouterNetns(options.runId);
  const { underlay } = options;
  const addresses = underlay.cidrs.map((cidr) => addressInSubnet(cidr.cidr, ROUTER_ADDRESS_OFFSET));
  const asn = options.asn ?? EXTERNAL_ROUTER_ASN;
  await addNetns(runner, netns);
  let bird: BgpRouter | undefined;
  const remove = async () => {
    await bird?.stop();
    // Deleting the namespace takes its veth, and so the underlay's end of it, with it.
    await deleteNetns(runner, netns);
  };
  try {
    const ip = (args: string[], inNetns?: string) => runner.run({ command: 'ip', args, ...(inNetns && { netns: inNetns }) });
    await runner.run({ command: 'sysctl', args: ['-q', '-w', 'net.ipv6.conf.all.accept_dad=0', 'net.ipv6.conf.default.accept_dad=0'], netns });
    await ip(['link', 'add', UNDERLAY_PORT, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns], underlay.netns);
    await ip(['link', 'set', UNDERLAY_PORT, 'master', underlay.bridge, 'up'], underlay.netns);
    for (const [index, cidr] of underlay.cidrs.entries()) {
      await ip(['addr', 'add', `${addresses[index]}/${cidr.prefixLength}`, 'dev', 'eth0', 'nodad'], netns);
    }
    await ip(['link', 'set', 'eth0', 'up'], netns);
    await ip(['link', 'set', 'lo', 'up'], netns);
    await mkdir(options.dir, { recursive: true });
    const neighbors: BgpRouterNeighbor[] = options.nodes.flatMap((node) =>
      node.nodeIps.map((address) => ({ address, asn: options.nodeAsn, import: 'all' as const, export: 'none' as const })),
    );
    bird = await startBird({
      netns,
      routerId: addresses.find((address) => !address.includes(':')) ?? '192.0.2.1',
      asn,
      neighbors,
      installRoutes: true,
      workDir: options.dir,
    });
  } catch (error) {
    await remove().catch(() => undefined);
    throw error;
  }
  return {
    netns,
    addresses,
    asn,
    bird,
    agentFlags: [`--peer-router-ips=${addresses.join(',')}`, `--peer-router-asns=${addresses.map(() => asn).join(',')}`],
    stop: remove,
  };
}
