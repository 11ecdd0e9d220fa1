import type { LballocOptions } from '@kube-router/lballoc';
import type { NetpolIptablesOptions } from '@kube-router/netpol-iptables';
import type { NetpolNftablesOptions } from '@kube-router/netpol-nftables';
import type { ProxyIpvsOptions } from '@kube-router/proxy-ipvs';
import type { ProxyNftablesOptions } from '@kube-router/proxy-nftables';
import type { RouteSyncOptions } from '@kube-router/route-sync';
import type { RoutingBgpOptions } from '@kube-router/routing-bgp';
import { DEFAULT_HEALTH_PORT } from '@kube-router/healthcheck';
import { DEFAULT_METRICS_PATH } from '@kube-router/metrics';
import {
  boolSyntax,
  durationSyntax,
  ipListSyntax,
  stringListSyntax,
  stringSyntax,
  uintListSyntax,
  uintSyntax,
  type FlagSyntax,
} from './pflag.js';

/** The features kube-router switches with --run-*; each maps to plugins through the catalog. */
export const FEATURES = ['firewall', 'service-proxy', 'router', 'loadbalancer'] as const;
export type Feature = (typeof FEATURES)[number];

export type LogFormat = 'json' | 'text';

/**
 * The plugin options the catalog builds from flags, by target: `netpol` goes to either firewall backend,
 * `netpol-nftables` to the nftables one alone.
 */
export interface FlagOptionTargets {
  netpol: NetpolIptablesOptions;
  'netpol-nftables': NetpolNftablesOptions;
  'proxy-ipvs': ProxyIpvsOptions;
  'proxy-nftables': ProxyNftablesOptions;
  'route-sync': RouteSyncOptions;
  'routing-bgp': RoutingBgpOptions;
  lballoc: LballocOptions;
}
export type OptionTarget = keyof FlagOptionTargets;

/** A plugin option converted from the flag's value; `undefined` leaves the option out (the plugin's default). */
export interface ConvertedOption<K extends string = string, T = never, V = unknown> {
  option: K;
  convert: (value: T) => V | undefined;
}

/**
 * Where a flag's value goes in AgentConfig: a dotted path (`firewall.syncPeriodMs`), or a path with a conversion
 * (`['kubeconfig', emptyIsUnset]`).
 */
export type ConfigTarget<T = never> = string | readonly [path: string, convert: (value: T) => unknown];

/**
 * One command-line flag, declared once: kube-router's name (its key in FLAGS), syntax, default and help, where its
 * value goes in AgentConfig and which plugin options it becomes, and what this build does with it.
 *
 * `implemented` is the one place that says whether this build acts on the flag. A flag that is not implemented is
 * still accepted at its default value (kube-router's manifests spell defaults out); set to anything else while one
 * of its `features` is enabled, it refuses the start, naming the flag. A plugin author who maps a flag onto plugin
 * options (`options`) flips its `implemented` to true.
 */
export interface FlagDefinition<T = unknown, C extends ConfigTarget | undefined = ConfigTarget | undefined>
  extends FlagSyntax<T> {
  usage: string;
  shorthand?: string;
  /**
   * The --run-* features whose plugins read the flag; it matters only while one of them is enabled. Empty for the
   * agent's own flags (servers, logging, Kubernetes access), which always matter.
   */
  features: readonly Feature[];
  implemented: boolean;
  /**
   * Of a flag that is not implemented: the value that says what this build does (`--enable-overlay=false`: no tunnels
   * are built). It is accepted beside the default, since refusing the truth about the build helps nobody.
   */
  builtValue?: T;
  /** Flags that kube-router does not have: this agent's own additions. */
  agentOnly?: true;
  /** Its field of AgentConfig, whose type follows from this (see config.ts). Absent: read by parseFlags alone. */
  config?: C;
  /**
   * The plugin options it becomes as it is (`'syncPeriodMs'`) or converted (`inSeconds('holdTimeSeconds')`), by
   * target; the catalog builds them (flagOptions). Lists that combine into one option (the --peer-router-* lists into
   * routing-bgp's peerRouters) are combined there.
   */
  options?: { readonly [P in OptionTarget]?: string | ConvertedOption };
}

/** The options of a target that take a T as it is, or converted by a function of T. */
type OptionOf<O, T> =
  | { [K in keyof O & string]-?: [T] extends [NonNullable<O[K]>] ? K : never }[keyof O & string]
  | { [K in keyof O & string]-?: ConvertedOption<K, T, O[K]> }[keyof O & string];

interface Declaration<T, C> {
  features?: readonly Feature[];
  implemented: boolean;
  builtValue?: T;
  shorthand?: string;
  agentOnly?: true;
  config?: C;
  options?: { readonly [P in OptionTarget]?: OptionOf<FlagOptionTargets[P], T> };
}

const flag = <T, const C extends ConfigTarget<T> | undefined = undefined>(
  syntax: FlagSyntax<T>,
  usage: string,
  declared: Declaration<NoInfer<T>, C>,
): FlagDefinition<T, C> => ({
  ...syntax,
  usage,
  features: declared.features ?? [],
  implemented: declared.implemented,
  ...(declared.builtValue !== undefined && { builtValue: declared.builtValue }),
  ...(declared.shorthand !== undefined && { shorthand: declared.shorthand }),
  ...(declared.agentOnly && { agentOnly: true }),
  ...(declared.config !== undefined && { config: declared.config }),
  ...(declared.options !== undefined && { options: declared.options as FlagDefinition['options'] }),
});
const bool = <const C extends ConfigTarget<boolean> | undefined = undefined>(defaultValue: boolean, usage: string, declared: Declaration<boolean, C>) =>
  flag(boolSyntax(defaultValue), usage, declared);
const text = <const C extends ConfigTarget<string> | undefined = undefined>(defaultValue: string, usage: string, declared: Declaration<string, C>) =>
  flag(stringSyntax(defaultValue), usage, declared);
const duration = <const C extends ConfigTarget<number> | undefined = undefined>(defaultText: string, usage: string, declared: Declaration<number, C>) =>
  flag(durationSyntax(defaultText), usage, declared);
const uint = <const C extends ConfigTarget<number> | undefined = undefined>(bits: 8 | 16 | 32 | 64, defaultValue: number, usage: string, declared: Declaration<number, C>) =>
  flag(uintSyntax(bits, defaultValue), usage, declared);
const list = <const C extends ConfigTarget<string[]> | undefined = undefined>(defaultValue: readonly string[], usage: string, declared: Declaration<string[], C>) =>
  flag(stringListSyntax(defaultValue), usage, declared);

/** A duration flag (ms) as an option in whole seconds. */
const inSeconds = <const K extends string>(option: K) => ({ option, convert: (ms: number) => Math.round(ms / 1000) });
/** kube-router's "unset" value (0, "") leaves the option out, so that the plugin's own default applies. */
const unlessUnset = <const K extends string, T>(option: K, unset: T) => ({
  option,
  convert: (value: T) => (value === unset ? undefined : value),
});
const emptyIsUnset = (value: string): string | undefined => (value === '' ? undefined : value);

const FIREWALL = { features: ['firewall'] } as const;
const PROXY = { features: ['service-proxy'] } as const;
const ROUTER = { features: ['router'] } as const;
const LOADBALANCER = { features: ['loadbalancer'] } as const;
const ALWAYS = { features: [] } as const;

/**
 * Every kube-router flag (pkg/options/options.go), with its name, syntax, default and help text, and this agent's own
 * additions (marked agentOnly), in alphabetical order as kube-router's help lists them. The second line of each says
 * what this build does with it: feature, implemented, AgentConfig field, plugin options.
 */
export const FLAGS = {
  'advertise-cluster-ip': bool(false, 'Add Cluster IP of the service to the RIB so that it gets advertises to the BGP peers.',
    { ...ROUTER, implemented: true, config: 'routing.advertiseClusterIp', options: { 'routing-bgp': 'advertiseClusterIp' } }),
  'advertise-external-ip': bool(false, 'Add External IP of service to the RIB so that it gets advertised to the BGP peers.',
    { ...ROUTER, implemented: true, config: 'routing.advertiseExternalIp', options: { 'routing-bgp': 'advertiseExternalIp' } }),
  'advertise-loadbalancer-ip': bool(false, 'Add LoadBalancer IP of service status as set by the LB provider to the RIB so that it gets advertised to the BGP peers.',
    { ...ROUTER, implemented: true, config: 'routing.advertiseLoadBalancerIp', options: { 'routing-bgp': 'advertiseLoadBalancerIp' } }),
  'advertise-pod-cidr': bool(true, "Add Node's POD cidr to the RIB so that it gets advertised to the BGP peers.",
    { ...ROUTER, implemented: true, config: 'routing.advertisePodCidr', options: { 'routing-bgp': 'advertisePodCidr' } }),
  'auto-mtu': bool(true, 'Auto detect and set the largest possible MTU for kube-bridge and pod interfaces (also accounts for IPIP overlay network when enabled).',
    { ...ROUTER, implemented: true, config: 'routing.autoMtu', options: { 'routing-bgp': 'autoMtu' } }),
  'bfd-desired-min-tx-interval': uint(32, 1000, 'The desired min interval in milliseconds for GoBGP to transmit BFD control packets.',
    { ...ROUTER, implemented: false, config: 'routing.bfd.desiredMinTxIntervalMs' }),
  'bfd-detection-multiplier': uint(32, 3, 'BFD failure detection multiplier. Must be between 1-255.',
    { ...ROUTER, implemented: false, config: 'routing.bfd.detectionMultiplier' }),
  'bfd-port': uint(32, 3784, 'UDP port for BFD control packets',
    { ...ROUTER, implemented: false, config: 'routing.bfd.port' }),
  'bfd-required-min-rx-interval': uint(32, 1000, 'Min interval in milliseconds for GoBGP to receive BFD control packets.',
    { ...ROUTER, implemented: false, config: 'routing.bfd.requiredMinRxIntervalMs' }),
  'bgp-graceful-restart': bool(false, 'Enables the BGP Graceful Restart capability so that routes are preserved on unexpected restarts',
    { ...ROUTER, implemented: true, config: 'routing.bgp.gracefulRestart', options: { 'routing-bgp': 'gracefulRestart' } }),
  'bgp-graceful-restart-deferral-time': duration('6m0s', 'BGP Graceful restart deferral time according to RFC4724 4.1, maximum 18h.',
    { ...ROUTER, implemented: true, config: 'routing.bgp.gracefulRestartDeferralTimeMs', options: { 'routing-bgp': inSeconds('gracefulRestartDeferralTimeSeconds') } }),
  'bgp-graceful-restart-time': duration('1m30s', 'BGP Graceful restart time according to RFC4724 3, maximum 4095s.',
    { ...ROUTER, implemented: true, config: 'routing.bgp.gracefulRestartTimeMs', options: { 'routing-bgp': inSeconds('gracefulRestartTimeSeconds'), 'route-sync': 'adoptionGraceMs' } }),
  'bgp-holdtime': duration('1m30s', 'This parameter is mainly used to modify the holdtime declared to BGP peer. When kube-router goes down abnormally, the local saving time of BGP route will be affected. Holdtime must be in the range 3s to 18h12m16s.',
    { ...ROUTER, implemented: true, config: 'routing.bgp.holdTimeMs', options: { 'routing-bgp': inSeconds('holdTimeSeconds') } }),
  'bgp-port': uint(32, 179, 'The port open for incoming BGP connections and to use for connecting with other BGP peers.',
    { ...ROUTER, implemented: true, config: 'routing.bgp.port', options: { 'routing-bgp': 'bgpPort' } }),
  'cache-sync-timeout': duration('1m0s', "The timeout for cache synchronization (e.g. '5s', '1m'). Must be greater than 0.",
    { ...ALWAYS, implemented: true, config: 'cacheSyncTimeoutMs' }),
  'cleanup-config': bool(false, 'Cleanup iptables rules, ipvs, ipset configuration and exit.',
    { ...ALWAYS, implemented: true, config: 'cleanupConfig' }),
  'cluster-asn': uint(64, 0, 'ASN number under which cluster nodes will run iBGP.',
    { ...ROUTER, implemented: true, config: 'routing.clusterAsn', options: { 'routing-bgp': unlessUnset('clusterAsn', 0) } }),
  'disable-source-dest-check': bool(true, 'Disable the source-dest-check attribute for AWS EC2 instances. When this option is false, it must be set some other way.',
    { ...ROUTER, implemented: false, config: 'routing.disableSourceDestCheck' }),
  'enable-bfd': bool(false, 'Enable BFD for GoBGP',
    { ...ROUTER, implemented: false, config: 'routing.bfd.enabled' }),
  'enable-cni': bool(true, 'Enable CNI plugin. Disable if you want to use kube-router features alongside another CNI plugin.',
    { ...ROUTER, implemented: true, config: 'routing.enableCni', options: { 'routing-bgp': 'enableCni' } }),
  'enable-explain': bool(false, 'Serve GET /explain on the metrics server: the network policy verdict on a flow, with the policies and rule behind it, for kube-router explain.',
    { ...FIREWALL, implemented: true, agentOnly: true, config: 'metrics.explain' }),
  'enable-ibgp': bool(true, 'Enables peering with nodes with the same ASN, if disabled will only peer with external BGP peers',
    { ...ROUTER, implemented: true, config: 'routing.enableIbgp', options: { 'routing-bgp': 'enableIbgp' } }),
  'enable-ipv4': bool(true, 'Enables IPv4 support',
    { ...ALWAYS, implemented: true, config: 'ipFamilies.ipv4', options: { netpol: 'enableIpv4', 'proxy-ipvs': 'enableIpv4', 'proxy-nftables': 'enableIpv4', 'route-sync': 'enableIpv4', 'routing-bgp': 'enableIpv4' } }),
  'enable-ipv6': bool(false, 'Enables IPv6 support',
    { ...ALWAYS, implemented: true, config: 'ipFamilies.ipv6', options: { netpol: 'enableIpv6', 'proxy-ipvs': 'enableIpv6', 'proxy-nftables': 'enableIpv6', 'route-sync': 'enableIpv6', 'routing-bgp': 'enableIpv6' } }),
  'enable-overlay': bool(true, 'When enable-overlay is set to true, IP-in-IP tunneling is used for pod-to-pod networking across nodes in different subnets. When set to false no tunneling is used and routing infrastructure is expected to route traffic for pod-to-pod networking across nodes in different subnets',
    { ...ROUTER, implemented: false, builtValue: false, config: 'routing.enableOverlay' }),
  'enable-pod-egress': bool(true, 'SNAT traffic from Pods to destinations outside the cluster.',
    { ...ROUTER, implemented: true, config: 'routing.enablePodEgress', options: { 'routing-bgp': 'enablePodEgress' } }),
  'enable-pprof': bool(false, 'Enables pprof for debugging performance and memory leak issues.',
    { ...ALWAYS, implemented: false, config: 'enablePprof' }),
  'excluded-cidrs': list([], 'Excluded CIDRs are used to exclude IPVS rules from deletion.',
    { ...PROXY, implemented: true, config: 'proxy.excludedCidrs', options: { 'proxy-ipvs': 'excludedCidrs' } }),
  'gobgp-admin-address': text('127.0.0.1', 'Address for GoBGP server. Used in combination with gobgp-admin-port to expose GoBGP for administrative purposes. Setting this to empty string will default the address to 127.0.0.1.',
    { ...ROUTER, implemented: true, config: 'routing.gobgpAdmin.address', options: { 'routing-bgp': unlessUnset('gobgpAdminAddress', '') } }),
  'gobgp-admin-port': uint(16, 50051, 'Port to connect to GoBGP for administrative purposes. Setting this to 0 will disable the GoBGP gRPC server.',
    { ...ROUTER, implemented: true, config: 'routing.gobgpAdmin.port', options: { 'routing-bgp': 'gobgpAdminPort' } }),
  'hairpin-mode': bool(false, 'Add iptables rules for every Service Endpoint to support hairpin traffic.',
    { ...PROXY, implemented: true, config: 'proxy.hairpinMode', options: { 'proxy-ipvs': 'hairpinMode' } }),
  'health-addr': text('', "Health check address to listen on (Default: all interfaces; ensure to configure the 'livenessProbe' to use the same IP address)",
    { ...ALWAYS, implemented: true, config: 'health.addr' }),
  'health-grace': duration('30s', "Added to each controller's sync period to form its health window.",
    { ...ALWAYS, implemented: true, agentOnly: true, config: 'health.graceMs' }),
  'health-port': uint(16, DEFAULT_HEALTH_PORT, 'Health check port, 0 = Disabled',
    { ...ALWAYS, implemented: true, config: 'health.port' }),
  'health-window': flag(windowSyntax(), 'Health window of one controller (netpol, proxy, routing-bgp, route-sync, lballoc), overriding its sync period + grace; repeatable.',
    { ...ALWAYS, implemented: true, agentOnly: true, config: 'health.windowsMs' }),
  help: bool(false, 'Print usage information.',
    { ...ALWAYS, implemented: true, shorthand: 'h' }),
  'hostname-override': text('', 'Overrides the NodeName of the node. Set this if kube-router is unable to determine your NodeName automatically.',
    { ...ALWAYS, implemented: true }),
  'injected-routes-sync-period': duration('1m0s', "The delay between route table synchronizations  (e.g. '5s', '1m', '2h22m'). Must be greater than 0.",
    { ...ROUTER, implemented: true, config: 'routing.injectedRoutesSyncPeriodMs', options: { 'route-sync': 'syncPeriodMs' } }),
  'iptables-sync-period': duration('5m0s', "The delay between iptables rule synchronizations (e.g. '5s', '1m'). Must be greater than 0.",
    { ...FIREWALL, implemented: true, config: 'firewall.syncPeriodMs', options: { netpol: 'syncPeriodMs' } }),
  'ipvs-graceful-period': duration('30s', "The graceful period before removing destinations from IPVS services (e.g. '5s', '1m', '2h22m'). Must be greater than 0.",
    { ...PROXY, implemented: true, config: 'proxy.gracefulPeriodMs', options: { 'proxy-ipvs': 'gracefulPeriodMs' } }),
  'ipvs-graceful-termination': bool(false, 'Enables the experimental IPVS graceful termination capability',
    { ...PROXY, implemented: true, config: 'proxy.gracefulTermination', options: { 'proxy-ipvs': 'gracefulTermination' } }),
  'ipvs-permit-all': bool(true, "Enables rule to accept all incoming traffic to service VIP's on the node.",
    { ...PROXY, implemented: true, config: 'proxy.permitAll', options: { 'proxy-ipvs': 'ipvsPermitAll' } }),
  'ipvs-sync-period': duration('5m0s', "The delay between ipvs config synchronizations (e.g. '5s', '1m', '2h22m'). Must be greater than 0.",
    { ...PROXY, implemented: true, config: 'proxy.syncPeriodMs', options: { 'proxy-ipvs': 'syncPeriodMs', 'proxy-nftables': 'syncPeriodMs' } }),
  kubeconfig: text('', 'Path to kubeconfig file with authorization information (the master location is set by the master flag).',
    { ...ALWAYS, implemented: true, config: ['kubeconfig', emptyIsUnset] }),
  'loadbalancer-default-class': bool(true, 'Handle loadbalancer services without a class',
    { ...LOADBALANCER, implemented: true, config: 'loadbalancer.defaultClass', options: { lballoc: 'defaultClass' } }),
  'loadbalancer-ip-range': list([], 'CIDR values from which loadbalancer services addresses are assigned (can be specified multiple times). Also used by the proxy module to validate loadBalancerIPs when --strict-external-ip-validation is enabled.',
    { features: ['loadbalancer', 'service-proxy', 'router'], implemented: true, config: 'loadbalancer.ipRanges', options: { lballoc: 'ranges', 'netpol-nftables': 'serviceLoadBalancerIpRanges', 'proxy-ipvs': 'loadBalancerIpRanges', 'proxy-nftables': 'loadBalancerIpRanges', 'routing-bgp': 'loadBalancerIpRanges' } }),
  'loadbalancer-sync-period': duration('1m0s', "The delay between checking for missed services (e.g. '5s', '1m'). Must be greater than 0.",
    { ...LOADBALANCER, implemented: true, config: 'loadbalancer.syncPeriodMs', options: { lballoc: 'syncPeriodMs' } }),
  'log-format': flag(logFormatSyntax(), 'Log line format: json (one JSON object per line) or text (readable, for people).',
    { ...ALWAYS, implemented: true, agentOnly: true, config: 'logging.format' }),
  'masquerade-all': bool(false, 'SNAT all traffic to cluster IP/node port.',
    { ...PROXY, implemented: true, config: 'proxy.masqueradeAll', options: { 'proxy-ipvs': 'masqueradeAll', 'proxy-nftables': 'masqueradeAll' } }),
  master: text('', 'The address of the Kubernetes API server (overrides any value in kubeconfig).',
    { ...ALWAYS, implemented: true, config: ['master', emptyIsUnset] }),
  'metrics-addr': text('', 'Prometheus metrics address to listen on, (Default: all interfaces)',
    { ...ALWAYS, implemented: true, config: 'metrics.addr' }),
  'metrics-path': text(DEFAULT_METRICS_PATH, 'Prometheus metrics path',
    { ...ALWAYS, implemented: true, config: 'metrics.path' }),
  'metrics-port': uint(16, 0, 'Prometheus metrics port, (Default 0, Disabled)',
    { ...ALWAYS, implemented: true, config: 'metrics.port' }),
  'netpol-default-deny': bool(false, 'Default policy to use for pods to have before NetworkPolicy is applied',
    { ...FIREWALL, implemented: true, config: 'firewall.defaultDeny', options: { netpol: 'defaultDeny' } }),
  'netpol-drop-log': bool(false, 'Log each packet that network policy rejects (read from NFLOG group 100 through tcpdump) with the pods on either side, rate-limited per source, destination, port and protocol.',
    { ...FIREWALL, implemented: true, agentOnly: true, config: 'firewall.dropLog', options: { netpol: 'dropLog' } }),
  'netpol-drop-log-events': bool(false, 'With --netpol-drop-log, also record a Warning Event (reason PolicyDrop) on the pod each logged drop was meant for.',
    { ...FIREWALL, implemented: true, agentOnly: true, config: 'firewall.dropLogEvents', options: { netpol: 'dropLogEvents' } }),
  'nodeport-bindon-all-ip': bool(false, "For service of NodePort type create IPVS service that listens on all IP's of the node.",
    { ...PROXY, implemented: true, config: 'proxy.nodePortBindOnAllIp', options: { 'proxy-ipvs': 'nodePortBindOnAllIp', 'proxy-nftables': 'nodePortBindOnAllIp' } }),
  'nodes-full-mesh': bool(true, 'Each node in the cluster will setup BGP peering with rest of the nodes.',
    { ...ROUTER, implemented: true, config: 'routing.nodesFullMesh', options: { 'routing-bgp': 'nodesFullMesh' } }),
  'overlay-encap': text('ipip', 'Valid encapsulation types are "ipip" or "fou" (if set to "fou", the udp port can be specified via "overlay-encap-port")',
    { ...ROUTER, implemented: false, config: 'routing.overlayEncap' }),
  'overlay-encap-port': uint(16, 5555, 'Overlay tunnel encapsulation port (only used for "fou" encapsulation)',
    { ...ROUTER, implemented: false, config: 'routing.overlayEncapPort' }),
  'overlay-type': text('subnet', 'Possible values: subnet,full - When set to "subnet", the default, default "--enable-overlay=true" behavior is used. When set to "full", it changes "--enable-overlay=true" default behavior so that IP-in-IP tunneling is used for pod-to-pod networking across nodes regardless of the subnet the nodes are in.',
    { ...ROUTER, implemented: false, config: 'routing.overlayType' }),
  'override-nexthop': bool(false, 'Override the next-hop in bgp routes sent to peers with the local ip.',
    { ...ROUTER, implemented: true, config: 'routing.overrideNextHop', options: { 'routing-bgp': 'overrideNextHop' } }),
  // The --peer-router-* lists combine, by index, into routing-bgp's peerRouters (the catalog, peer-routers.ts).
  'peer-router-asns': flag(uintListSyntax(), 'ASN numbers of the BGP peer to which cluster nodes will advertise cluster ip and node\'s pod cidr.',
    { ...ROUTER, implemented: true, config: 'routing.peers.asns' }),
  'peer-router-ips': flag(ipListSyntax(), "The ip address of the external router to which all nodes will peer and advertise the cluster ip and pod cidr's.",
    { ...ROUTER, implemented: true, config: 'routing.peers.ips' }),
  'peer-router-multihop-ttl': uint(8, 0, 'Enable eBGP multihop supports -- sets multihop-ttl. (Relevant only if ttl >= 2)',
    { ...ROUTER, implemented: true, config: 'routing.peers.multihopTtl', options: { 'routing-bgp': 'peerMultihopTtl' } }),
  'peer-router-passwords': list([], 'Password for authenticating against the BGP peer defined with "--peer-router-ips".',
    { ...ROUTER, implemented: true, config: 'routing.peers.passwords' }),
  'peer-router-passwords-file': text('', 'Path to file containing password for authenticating against the BGP peer defined with "--peer-router-ips". --peer-router-passwords will be preferred if both are set.',
    { ...ROUTER, implemented: true, config: 'routing.peers.passwordsFile' }),
  'peer-router-ports': flag(uintListSyntax(), 'The remote port of the external BGP to which all nodes will peer. If not set, default BGP port (179) will be used.',
    { ...ROUTER, implemented: true, config: 'routing.peers.ports' }),
  'router-id': text('', 'BGP router-id. Must be specified in a ipv6 only cluster, "generate" can be specified to generate the router id.',
    { ...ROUTER, implemented: true, config: 'routing.routerId', options: { 'routing-bgp': unlessUnset('routerId', '') } }),
  'routes-sync-period': duration('5m0s', "The delay between route updates and advertisements (e.g. '5s', '1m', '2h22m'). Must be greater than 0.",
    { ...ROUTER, implemented: true, config: 'routing.syncPeriodMs', options: { 'routing-bgp': 'syncPeriodMs' } }),
  'run-firewall': bool(true, 'Enables Network Policy -- sets up iptables to provide ingress firewall for pods.',
    { ...ALWAYS, implemented: true, config: 'features.firewall' }),
  'run-loadbalancer': bool(false, 'Enable loadbalancer address allocator',
    { ...ALWAYS, implemented: true, config: 'features.loadbalancer' }),
  'run-router': bool(true, 'Enables Pod Networking -- Advertises and learns the routes to Pods via iBGP.',
    { ...ALWAYS, implemented: true, config: 'features.router' }),
  'run-service-proxy': bool(true, 'Enables Service Proxy -- sets up IPVS for Kubernetes Services.',
    { ...ALWAYS, implemented: true, config: 'features.service-proxy' }),
  'runtime-endpoint': text('', 'Path to CRI compatible container runtime socket (used for DSR mode). Currently known working with containerd.',
    { ...PROXY, implemented: false, config: 'proxy.runtimeEndpoint' }),
  'service-cluster-ip-range': list(['10.96.0.0/12'], 'CIDR values from which service cluster IPs are assigned (can be specified up to 2 times)',
    { features: ['firewall', 'service-proxy', 'router'], implemented: true, config: 'services.clusterIpRanges', options: { netpol: 'serviceClusterIpRanges', 'proxy-ipvs': 'serviceClusterIpRanges', 'proxy-nftables': 'serviceClusterIpRanges', 'routing-bgp': 'serviceClusterIpRanges' } }),
  'service-external-ip-range': list([], 'Specify external IP CIDRs that are used for inter-cluster communication (can be specified multiple times). Also used by the proxy module to validate externalIPs when --strict-external-ip-validation is enabled.',
    { features: ['firewall', 'service-proxy', 'router'], implemented: true, config: 'services.externalIpRanges', options: { netpol: 'serviceExternalIpRanges', 'proxy-ipvs': 'serviceExternalIpRanges', 'proxy-nftables': 'serviceExternalIpRanges', 'routing-bgp': 'serviceExternalIpRanges' } }),
  'service-node-port-range': text('30000-32767', 'NodePort range specified with either a hyphen or colon',
    { features: ['firewall', 'service-proxy'], implemented: true, config: 'services.nodePortRange', options: { netpol: 'nodePortRange' } }),
  'service-tcp-timeout': duration('0s', "Specify TCP timeout for IPVS services in standard duration syntax (e.g. '5s', '1m'), default 0s preserves default system value (default: 0s)",
    { ...PROXY, implemented: true, config: 'proxy.tcpTimeoutMs', options: { 'proxy-ipvs': inSeconds('tcpTimeoutSeconds') } }),
  'service-tcpfin-timeout': duration('0s', "Specify TCP FIN timeout for IPVS services in standard duration syntax (e.g. '5s', '1m'), default 0s preserves default system value (default: 0s)",
    { ...PROXY, implemented: true, config: 'proxy.tcpFinTimeoutMs', options: { 'proxy-ipvs': inSeconds('tcpFinTimeoutSeconds') } }),
  'service-udp-timeout': duration('0s', "Specify UDP timeout for IPVS services in standard duration syntax (e.g. '5s', '1m'), default 0s preserves default system value (default: 0s)",
    { ...PROXY, implemented: true, config: 'proxy.udpTimeoutMs', options: { 'proxy-ipvs': inSeconds('udpTimeoutSeconds') } }),
  'strict-external-ip-validation': bool(true, 'When enabled, the proxy module validates externalIPs and loadBalancerIPs against configured CIDR ranges (--service-external-ip-range and --loadbalancer-ip-range). When strict mode is enabled and no range is configured, all externalIPs / loadBalancerIPs are rejected (default-deny). Disable this flag to restore previous behavior of accepting all IPs without validation.',
    { features: ['service-proxy', 'router'], implemented: true, config: 'proxy.strictExternalIpValidation', options: { 'proxy-ipvs': 'strictExternalIpValidation', 'proxy-nftables': 'strictExternalIpValidation', 'routing-bgp': 'strictExternalIpValidation' } }),
  'use-nftables-for-netpol': bool(false, '[Experimental] Use nftables instead of iptables for the network policy controller. Requires nft >= 1.0.1 and kernel nftables support.',
    { ...FIREWALL, implemented: true, config: 'firewall.useNftables' }),
  'use-nftables-for-service-proxy': bool(false, '[Experimental] Use nftables instead of IPVS for the service proxy (Kubernetes\' nftables Service semantics), for kernels without IPVS. Requires nft >= 1.0.1 and kernel nftables support.',
    { ...PROXY, implemented: true, agentOnly: true, config: 'proxy.useNftables' }),
  v: flag(verbositySyntax(), 'log level for V logs',
    { ...ALWAYS, implemented: true, shorthand: 'v', config: 'logging.verbosity' }),
  version: bool(false, 'Print version information.',
    { ...ALWAYS, implemented: true, shorthand: 'V' }),
};

export type FlagName = keyof typeof FLAGS;
type ValueOf<D> = D extends FlagDefinition<infer T> ? T : never;
/** Every flag's parsed value, by flag name. */
export type FlagValues = { [Name in FlagName]: ValueOf<(typeof FLAGS)[Name]> };

// ---- the agent's own value syntaxes ----

function verbositySyntax(): FlagSyntax<number> {
  // A string in kube-router ("0") that klog reads as a level: a non-negative integer.
  return {
    type: 'string',
    default: 0,
    defaultText: '"0"',
    set(value) {
      if (!/^\d+$/.test(value) || Number(value) > 2 ** 31 - 1) throw new Error('expected a log level such as 0, 2 or 5');
      return Number(value);
    },
  };
}

function logFormatSyntax(): FlagSyntax<LogFormat> {
  return {
    type: 'string',
    default: 'json',
    defaultText: '"json"',
    set(value) {
      if (value !== 'json' && value !== 'text') throw new Error('expected json or text');
      return value;
    },
  };
}

function windowSyntax(): FlagSyntax<Record<string, number>> {
  const duration = durationSyntax('0s');
  return {
    type: 'controller=duration',
    default: {},
    defaultText: '',
    set(value, previous) {
      const separator = value.indexOf('=');
      if (separator <= 0) throw new Error('expected controller=duration, e.g. netpol=10m');
      return { ...previous, [value.slice(0, separator)]: duration.set(value.slice(separator + 1), undefined) };
    },
  };
}
