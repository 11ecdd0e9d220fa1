import { definePlugin, routeSyncServiceKey } from '@kube-router/controller';
import { KubeServices, strictServiceAddressOptionFields, strictServiceAddressRanges } from '@kube-router/kube';
import { ExecRunner } from '@kube-router/netfilter';
import { z } from 'zod';
import { createRoutingController, ROUTING_BGP_CONTROLLER } from './controller.js';
import { removePodEgress } from './host-networking.js';
import type { RoutingSettings } from './settings.js';
import { asnProblem } from './external-peers.js';
import { clusterAsnProblem } from './nodes.js';
import { canonicalAddress } from './parse.js';
import { DEFAULT_GOBGP_PROTO_DIR } from './gobgp-api.js';
import { killOurGobgpd } from './gobgpd.js';
import { DEFAULT_CNI_CONF_FILE } from './pod-network.js';

const port = z.number().int().min(1).max(65_535);

/** An external peer of every node (--peer-router-ips, -asns, -ports, -passwords by index). */
const peerRouter = z
  .object({
    address: z.union([z.ipv4(), z.ipv6()]),
    asn: z.number().superRefine((asn, check) => {
      const problem = asnProblem(asn);
      if (problem) check.addIssue({ code: 'custom', message: problem });
    }),
    /** Default 179, as kube-router (not --bgp-port). */
    port: port.optional(),
    /** The TCP MD5 password in clear text (the agent decodes --peer-router-passwords from base64). */
    password: z.string().optional(),
  })
  .strict();

/** The plugin's options: kube-router's routing flags under their names, with kube-router's defaults. */
export const routingBgpOptions = z
  .object({
    /** --routes-sync-period (5m). */
    syncPeriodMs: z.number().int().positive().default(300_000),
    minSyncIntervalMs: z.number().int().nonnegative().optional(),
    /** Default: the sync period. */
    syncTimeoutMs: z.number().int().nonnegative().optional(),
    /** --bgp-port (179). */
    bgpPort: port.default(179),
    /** --bgp-holdtime in seconds (90; BGP allows 3 to 65535). */
    holdTimeSeconds: z.number().int().min(3).max(65_535).default(90),
    /** --router-id: an IPv4 address or `generate`; default this node's IPv4 address. */
    routerId: z.union([z.literal('generate'), z.ipv4()]).optional(),
    /** --enable-ipv4 (true) / --enable-ipv6 (false): the node must have an address of each; IPv6 is switched on. */
    enableIpv4: z.boolean().default(true),
    enableIpv6: z.boolean().default(false),
    /** --cluster-asn (64512). */
    clusterAsn: z
      .number()
      .int()
      .default(64_512)
      .superRefine((asn, check) => {
        const problem = clusterAsnProblem(asn);
        if (problem) check.addIssue({ code: 'custom', message: problem });
      }),
    /** --nodes-full-mesh (true). */
    nodesFullMesh: z.boolean().default(true),
    /** --enable-ibgp (true). */
    enableIbgp: z.boolean().default(true),
    /** --advertise-pod-cidr (true): this node's pod CIDRs go to external peers too; the mesh always gets them. */
    advertisePodCidr: z.boolean().default(true),
    /** --advertise-cluster-ip (false): announce Service cluster IPs to external peers. */
    advertiseClusterIp: z.boolean().default(false),
    /** --advertise-external-ip (false): announce Service externalIPs to external peers. */
    advertiseExternalIp: z.boolean().default(false),
    /** --advertise-loadbalancer-ip (false): announce Service LoadBalancer ingress IPs to external peers. */
    advertiseLoadBalancerIp: z.boolean().default(false),
    /** --override-nexthop (false): paths sent to external peers carry this node's session address as next hop. */
    overrideNextHop: z.boolean().default(false),
    /** --enable-pod-egress (true): kube-router's MASQUERADE rule for pod traffic leaving the cluster. */
    enablePodEgress: z.boolean().default(true),
    /** --enable-cni (true): every sync adds this node's pod CIDRs to the CNI file's host-local ranges. */
    enableCni: z.boolean().default(true),
    /** KUBE_ROUTER_CNI_CONF_FILE: the CNI file --enable-cni keeps (`.conflist` names a configuration list). */
    cniConfFile: z.string().startsWith('/').default(DEFAULT_CNI_CONF_FILE),
    /** --auto-mtu (true): kube-bridge and the CNI file's bridge take the MTU of the node's interface. */
    autoMtu: z.boolean().default(true),
    /** --gobgp-admin-address (127.0.0.1). */
    gobgpAdminAddress: z.string().min(1).default('127.0.0.1'),
    /**
     * --gobgp-admin-port (50051). 0 means no TCP admin server, as in kube-router: gobgpd's API then listens only on
     * a Unix socket (`gobgpApiSocket`, default DEFAULT_GOBGP_API_SOCKET), which the plugin needs to drive it.
     */
    gobgpAdminPort: z.number().int().min(0).max(65_535).default(50_051),
    /**
     * gobgpd's API on a Unix socket instead of the admin address: reachable from any network namespace, so an
     * agent can drive a gobgpd that runs in another one (`netns`).
     */
    gobgpApiSocket: z.string().startsWith('/').optional(),
    /** Run and supervise gobgpd (true), or drive one that runs already at the API address. */
    manageGobgpd: z.boolean().default(true),
    gobgpdBinary: z.string().min(1).default('gobgpd'),
    /** Where gobgp.proto, attribute.proto and capability.proto are. */
    protoDir: z.string().min(1).default(DEFAULT_GOBGP_PROTO_DIR),
    /** Runs gobgpd, `ip`, iptables and ipset in this network namespace. */
    netns: z.string().regex(/^[A-Za-z0-9_.-]+$/).optional(),
    /** Deadline of each gobgp API call (10 s). */
    apiTimeoutMs: z.number().int().positive().default(10_000),
    /**
     * How long the routes learned before a gobgpd restart stay while the new gobgpd relearns them. Default the
     * graceful restart time (90 s, --bgp-graceful-restart-time): gobgpd waits 5-10 s before it dials a peer, then the
     * peer resends.
     */
    restartGraceMs: z.number().int().nonnegative().optional(),
    /** --strict-external-ip-validation and its ranges: only the Service addresses they allow are announced. */
    ...strictServiceAddressOptionFields,
    /** --peer-router-ips with -asns, -ports, -passwords: when any, the Nodes' peer annotations are not read. */
    peerRouters: z.array(peerRouter).default([]),
    /** --peer-router-multihop-ttl (0): eBGP multihop with this TTL for the external peers when above 1. */
    peerMultihopTtl: z.number().int().min(0).max(255).default(0),
    /** --bgp-graceful-restart (false). */
    gracefulRestart: z.boolean().default(false),
    /** --bgp-graceful-restart-time in seconds (90, at most 4095): how long peers keep our routes while we restart. */
    gracefulRestartTimeSeconds: z.number().int().min(0).max(4_095).default(90),
    /** --bgp-graceful-restart-deferral-time in seconds (360, at most 18 h): how long a restart waits for End-of-RIB. */
    gracefulRestartDeferralTimeSeconds: z.number().int().min(0).max(64_800).default(360),
  })
  .strict();
export type RoutingBgpOptions = z.input<typeof routingBgpOptions>;
type ParsedOptions = z.output<typeof routingBgpOptions>;

/** Where gobgpd's API listens with --gobgp-admin-port=0. */
export const DEFAULT_GOBGP_API_SOCKET = '/run/kube-router/gobgpd.sock';

/** The gRPC target of gobgpd's API that these options describe. */
export function gobgpApiTarget(options: Pick<ParsedOptions, 'gobgpApiSocket' | 'gobgpAdminAddress' | 'gobgpAdminPort'>): string {
  if (options.gobgpApiSocket) return `unix://${options.gobgpApiSocket}`;
  if (options.gobgpAdminPort === 0) return `unix://${DEFAULT_GOBGP_API_SOCKET}`;
  const host = options.gobgpAdminAddress.includes(':') ? `[${options.gobgpAdminAddress}]` : options.gobgpAdminAddress;
  return `${host}:${options.gobgpAdminPort}`;
}

function settingsOf(options: ParsedOptions): RoutingSettings {
  const vipValidation = strictServiceAddressRanges(options);
  return {
    syncPeriodMs: options.syncPeriodMs,
    ...(options.minSyncIntervalMs !== undefined && { minSyncIntervalMs: options.minSyncIntervalMs }),
    ...(options.syncTimeoutMs !== undefined && { syncTimeoutMs: options.syncTimeoutMs }),
    bgpPort: options.bgpPort,
    holdTimeSeconds: options.holdTimeSeconds,
    ...(options.routerId !== undefined && { routerId: options.routerId }),
    clusterAsn: options.clusterAsn,
    enabledFamilies: { ipv4: options.enableIpv4, ipv6: options.enableIpv6 },
    nodesFullMesh: options.nodesFullMesh,
    enableIbgp: options.enableIbgp,
    advertisePodCidr: options.advertisePodCidr,
    vipFlags: {
      advertiseClusterIp: options.advertiseClusterIp,
      advertiseExternalIp: options.advertiseExternalIp,
      advertiseLoadBalancerIp: options.advertiseLoadBalancerIp,
    },
    ...(vipValidation && { vipValidation }),
    overrideNextHop: options.overrideNextHop,
    enablePodEgress: options.enablePodEgress,
    podNetwork: { autoMtu: options.autoMtu, ...(options.enableCni && { cniConfFile: options.cniConfFile }) },
    apiTarget: gobgpApiTarget(options),
    manageGobgpd: options.manageGobgpd,
    gobgpdBinary: options.gobgpdBinary,
    protoDir: options.protoDir,
    ...(options.netns !== undefined && { netns: options.netns }),
    apiTimeoutMs: options.apiTimeoutMs,
    restartGraceMs: options.restartGraceMs ?? options.gracefulRestartTimeSeconds * 1_000,
    peerRouters: options.peerRouters.map((peer) => ({ ...peer, address: canonicalAddress(peer.address) })),
    peerMultihopTtl: options.peerMultihopTtl,
    ...(options.gracefulRestart && {
      gracefulRestart: {
        restartTimeSeconds: options.gracefulRestartTimeSeconds,
        deferralTimeSeconds: options.gracefulRestartDeferralTimeSeconds,
      },
    }),
  };
}

/**
 * kube-router's routing controller (--run-router): iBGP pod routing with a supervised gobgpd. It requires route-sync,
 * to which it hands the routes it learns, and the agent's Kubernetes context for Nodes and events.
 */
export const routingBgpPlugin = definePlugin({
  name: ROUTING_BGP_CONTROLLER,
  host: '^1.0.0',
  requires: ['route-sync'],
  options: routingBgpOptions,
  // gobgpd only where this agent runs it: with --manage-gobgpd=false (the option) it drives one that runs already.
  // iptables and sysctl for the pod forwarding rules and br_netfilter, ipset for the pod egress sets.
  tools: (options) => [...(options.manageGobgpd ? [options.gobgpdBinary] : []), 'ip', 'iptables', 'sysctl', ...(options.enablePodEgress ? ['ipset'] : [])],
  create(ctx, options) {
    const kube = ctx.services.get(KubeServices);
    const routes = ctx.services.get(routeSyncServiceKey);
    const nodes = kube.informers.nodes();
    const services = kube.informers.services();
    const slices = kube.informers.endpointSlices();
    return createRoutingController(
      ctx,
      {
        nodes,
        onNodesChanged: (handler) => kube.informers.onChange('nodes', handler),
        warn: (node, reason, message) => void kube.events.warning({ ...node, apiVersion: 'v1', kind: 'Node' }, reason, message),
        services,
        endpointSlices: slices,
        onServicesChanged(handler) {
          const removers = (['services', 'endpointslices'] as const).map((resource) => kube.informers.onChange(resource, handler));
          return () => removers.forEach((remove) => remove());
        },
        warnService: (service, reason, message) =>
          void kube.events.warning({ ...service, apiVersion: 'v1', kind: 'Service' }, reason, message),
      },
      settingsOf(options),
      { routes, runner: new ExecRunner({ logger: ctx.logger }) },
    );
  },
  async cleanup(ctx, options) {
    const killed = await killOurGobgpd({
      apiHosts: [gobgpApiTarget(options)],
      ...(options.netns !== undefined && { netns: options.netns }),
    });
    if (killed.length > 0) ctx.logger.info({ pids: killed }, 'stopped gobgpd');
    await removePodEgress(new ExecRunner({ logger: ctx.logger }), options.netns);
  },
});
