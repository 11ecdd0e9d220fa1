import { hostname } from 'node:os';
import { readFileSync } from 'node:fs';
import type { Level } from 'pino';
import { DEFAULT_HEALTH_PORT } from '@kube-router/healthcheck';
import { DEFAULT_METRICS_PATH } from '@kube-router/metrics';
import {
  boolSyntax,
  durationSyntax,
  FlagSyntaxError,
  formatFlagUsages,
  ipListSyntax,
  parseCommandLine,
  stringListSyntax,
  stringSyntax,
  uintListSyntax,
  uintSyntax,
  type FlagSyntax,
} from './pflag.js';
import { validateFlags } from './flag-validation.js';

/** The features kube-router switches with --run-*; each maps to plugins through the catalog. */
export const FEATURES = ['firewall', 'service-proxy', 'router', 'loadbalancer'] as const;
export type Feature = (typeof FEATURES)[number];

/**
 * One command-line flag: kube-router's name, syntax, default and help, plus what this build does with it.
 *
 * `implemented` is the one place that says whether this build acts on the flag. A flag that is not implemented is
 * still accepted at its default value (kube-router's manifests spell defaults out); set to anything else while one
 * of its `features` is enabled, it refuses the start, naming the flag. A plugin author who wires a flag into the
 * catalog flips its `implemented` to true.
 */
export interface FlagDefinition<T = unknown> extends FlagSyntax<T> {
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
}

type Options<T = never> = { features?: readonly Feature[]; implemented: boolean; builtValue?: T; shorthand?: string; agentOnly?: true };
const flag = <T>(syntax: FlagSyntax<T>, usage: string, options: Options<NoInfer<T>>): FlagDefinition<T> => ({
  ...syntax,
  usage,
  features: options.features ?? [],
  implemented: options.implemented,
  ...(options.builtValue !== undefined && { builtValue: options.builtValue }),
  ...(options.shorthand !== undefined && { shorthand: options.shorthand }),
  ...(options.agentOnly && { agentOnly: true }),
});
const bool = (defaultValue: boolean, usage: string, options: Options<boolean>) => flag(boolSyntax(defaultValue), usage, options);
const text = (defaultValue: string, usage: string, options: Options) => flag(stringSyntax(defaultValue), usage, options);
const duration = (defaultText: string, usage: string, options: Options) =>
  flag(durationSyntax(defaultText), usage, options);
const uint = (bits: 8 | 16 | 32 | 64, defaultValue: number, usage: string, options: Options) =>
  flag(uintSyntax(bits, defaultValue), usage, options);
const list = (defaultValue: readonly string[], usage: string, options: Options) =>
  flag(stringListSyntax(defaultValue), usage, options);

const FIREWALL = { features: ['firewall'] } as const;
const PROXY = { features: ['service-proxy'] } as const;
const ROUTER = { features: ['router'] } as const;
const LOADBALANCER = { features: ['loadbalancer'] } as const;
const ALWAYS = { features: [] } as const;

/**
 * Every kube-router flag (pkg/options/options.go), with its name, syntax, default and help text, and this agent's own
 * additions (marked agentOnly), in alphabetical order as kube-router's help lists them.
 */
export const FLAGS = {
  'advertise-cluster-ip': bool(false, 'Add Cluster IP of the service to the RIB so that it gets advertises to the BGP peers.', { ...ROUTER, implemented: true }),
  'advertise-external-ip': bool(false, 'Add External IP of service to the RIB so that it gets advertised to the BGP peers.', { ...ROUTER, implemented: true }),
  'advertise-loadbalancer-ip': bool(false, 'Add LoadBalancer IP of service status as set by the LB provider to the RIB so that it gets advertised to the BGP peers.', { ...ROUTER, implemented: true }),
  'advertise-pod-cidr': bool(true, "Add Node's POD cidr to the RIB so that it gets advertised to the BGP peers.", { ...ROUTER, implemented: true }),
  'auto-mtu': bool(true, 'Auto detect and set the largest possible MTU for kube-bridge and pod interfaces (also accounts for IPIP overlay network when enabled).', { ...ROUTER, implemented: true }),
  'bfd-desired-min-tx-interval': uint(32, 1000, 'The desired min interval in milliseconds for GoBGP to transmit BFD control packets.', { ...ROUTER, implemented: false }),
  'bfd-detection-multiplier': uint(32, 3, 'BFD failure detection multiplier. Must be between 1-255.', { ...ROUTER, implemented: false }),
  'bfd-port': uint(32, 3784, 'UDP port for BFD control packets', { ...ROUTER, implemented: false }),
  'bfd-required-min-rx-interval': uint(32, 1000, 'Min interval in milliseconds for GoBGP to receive BFD control packets.', { ...ROUTER, implemented: false }),
  'bgp-graceful-restart': bool(false, 'Enables the BGP Graceful Restart capability so that routes are preserved on unexpected restarts', { ...ROUTER, implemented: true }),
  'bgp-graceful-restart-deferral-time': duration('6m0s', 'BGP Graceful restart deferral time according to RFC4724 4.1, maximum 18h.', { ...ROUTER, implemented: true }),
  'bgp-graceful-restart-time': duration('1m30s', 'BGP Graceful restart time according to RFC4724 3, maximum 4095s.', { ...ROUTER, implemented: true }),
  'bgp-holdtime': duration('1m30s', 'This parameter is mainly used to modify the holdtime declared to BGP peer. When kube-router goes down abnormally, the local saving time of BGP route will be affected. Holdtime must be in the range 3s to 18h12m16s.', { ...ROUTER, implemented: true }),
  'bgp-port': uint(32, 179, 'The port open for incoming BGP connections and to use for connecting with other BGP peers.', { ...ROUTER, implemented: true }),
  'cache-sync-timeout': duration('1m0s', "The timeout for cache synchronization (e.g. '5s', '1m'). Must be greater than 0.", { ...ALWAYS, implemented: true }),
  'cleanup-config': bool(false, 'Cleanup iptables rules, ipvs, ipset configuration and exit.', { ...ALWAYS, implemented: true }),
  'cluster-asn': uint(64, 0, 'ASN number under which cluster nodes will run iBGP.', { ...ROUTER, implemented: true }),
  'disable-source-dest-check': bool(true, 'Disable the source-dest-check attribute for AWS EC2 instances. When this option is false, it must be set some other way.', { ...ROUTER, implemented: false }),
  'enable-bfd': bool(false, 'Enable BFD for GoBGP', { ...ROUTER, implemented: false }),
  'enable-cni': bool(true, 'Enable CNI plugin. Disable if you want to use kube-router features alongside another CNI plugin.', { ...ROUTER, implemented: true }),
  'enable-ibgp': bool(true, 'Enables peering with nodes with the same ASN, if disabled will only peer with external BGP peers', { ...ROUTER, implemented: true }),
  'enable-ipv4': bool(true, 'Enables IPv4 support', { ...ALWAYS, implemented: true }),
  'enable-ipv6': bool(false, 'Enables IPv6 support', { ...ALWAYS, implemented: true }),
  'enable-overlay': bool(true, 'When enable-overlay is set to true, IP-in-IP tunneling is used for pod-to-pod networking across nodes in different subnets. When set to false no tunneling is used and routing infrastructure is expected to route traffic for pod-to-pod networking across nodes in different subnets', { ...ROUTER, implemented: false, builtValue: false }),
  'enable-pod-egress': bool(true, 'SNAT traffic from Pods to destinations outside the cluster.', { ...ROUTER, implemented: true }),
  'enable-pprof': bool(false, 'Enables pprof for debugging performance and memory leak issues.', { ...ALWAYS, implemented: false }),
  'excluded-cidrs': list([], 'Excluded CIDRs are used to exclude IPVS rules from deletion.', { ...PROXY, implemented: true }),
  'gobgp-admin-address': text('127.0.0.1', 'Address for GoBGP server. Used in combination with gobgp-admin-port to expose GoBGP for administrative purposes. Setting this to empty string will default the address to 127.0.0.1.', { ...ROUTER, implemented: true }),
  'gobgp-admin-port': uint(16, 50051, 'Port to connect to GoBGP for administrative purposes. Setting this to 0 will disable the GoBGP gRPC server.', { ...ROUTER, implemented: true }),
  'hairpin-mode': bool(false, 'Add iptables rules for every Service Endpoint to support hairpin traffic.', { ...PROXY, implemented: true }),
  'health-addr': text('', "Health check address to listen on (Default: all interfaces; ensure to configure the 'livenessProbe' to use the same IP address)", { ...ALWAYS, implemented: true }),
  'health-grace': duration('30s', "Added to each controller's sync period to form its health window.", { ...ALWAYS, implemented: true, agentOnly: true }),
  'health-port': uint(16, DEFAULT_HEALTH_PORT, 'Health check port, 0 = Disabled', { ...ALWAYS, implemented: true }),
  'health-window': flag(windowSyntax(), 'Health window of one controller (netpol, proxy, routing-bgp, route-sync, lballoc), overriding its sync period + grace; repeatable.', { ...ALWAYS, implemented: true, agentOnly: true }),
  help: bool(false, 'Print usage information.', { ...ALWAYS, implemented: true, shorthand: 'h' }),
  'hostname-override': text('', 'Overrides the NodeName of the node. Set this if kube-router is unable to determine your NodeName automatically.', { ...ALWAYS, implemented: true }),
  'injected-routes-sync-period': duration('1m0s', "The delay between route table synchronizations  (e.g. '5s', '1m', '2h22m'). Must be greater than 0.", { ...ROUTER, implemented: true }),
  'iptables-sync-period': duration('5m0s', "The delay between iptables rule synchronizations (e.g. '5s', '1m'). Must be greater than 0.", { ...FIREWALL, implemented: true }),
  'ipvs-graceful-period': duration('30s', "The graceful period before removing destinations from IPVS services (e.g. '5s', '1m', '2h22m'). Must be greater than 0.", { ...PROXY, implemented: true }),
  'ipvs-graceful-termination': bool(false, 'Enables the experimental IPVS graceful termination capability', { ...PROXY, implemented: true }),
  'ipvs-permit-all': bool(true, "Enables rule to accept all incoming traffic to service VIP's on the node.", { ...PROXY, implemented: true }),
  'ipvs-sync-period': duration('5m0s', "The delay between ipvs config synchronizations (e.g. '5s', '1m', '2h22m'). Must be greater than 0.", { ...PROXY, implemented: true }),
  kubeconfig: text('', 'Path to kubeconfig file with authorization information (the master location is set by the master flag).', { ...ALWAYS, implemented: true }),
  'loadbalancer-default-class': bool(true, 'Handle loadbalancer services without a class', { ...LOADBALANCER, implemented: true }),
  'loadbalancer-ip-range': list([], 'CIDR values from which loadbalancer services addresses are assigned (can be specified multiple times). Also used by the proxy module to validate loadBalancerIPs when --strict-external-ip-validation is enabled.', { features: ['loadbalancer', 'service-proxy', 'router'], implemented: true }),
  'loadbalancer-sync-period': duration('1m0s', "The delay between checking for missed services (e.g. '5s', '1m'). Must be greater than 0.", { ...LOADBALANCER, implemented: true }),
  'log-format': flag(logFormatSyntax(), 'Log line format: json (one JSON object per line) or text (readable, for people).', { ...ALWAYS, implemented: true, agentOnly: true }),
  'masquerade-all': bool(false, 'SNAT all traffic to cluster IP/node port.', { ...PROXY, implemented: true }),
  master: text('', 'The address of the Kubernetes API server (overrides any value in kubeconfig).', { ...ALWAYS, implemented: true }),
  'metrics-addr': text('', 'Prometheus metrics address to listen on, (Default: all interfaces)', { ...ALWAYS, implemented: true }),
  'metrics-path': text(DEFAULT_METRICS_PATH, 'Prometheus metrics path', { ...ALWAYS, implemented: true }),
  'metrics-port': uint(16, 0, 'Prometheus metrics port, (Default 0, Disabled)', { ...ALWAYS, implemented: true }),
  'netpol-default-deny': bool(false, 'Default policy to use for pods to have before NetworkPolicy is applied', { ...FIREWALL, implemented: true }),
  'nodeport-bindon-all-ip': bool(false, "For service of NodePort type create IPVS service that listens on all IP's of the node.", { ...PROXY, implemented: true }),
  'nodes-full-mesh': bool(true, 'Each node in the cluster will setup BGP peering with rest of the nodes.', { ...ROUTER, implemented: true }),
  'overlay-encap': text('ipip', 'Valid encapsulation types are "ipip" or "fou" (if set to "fou", the udp port can be specified via "overlay-encap-port")', { ...ROUTER, implemented: false }),
  'overlay-encap-port': uint(16, 5555, 'Overlay tunnel encapsulation port (only used for "fou" encapsulation)', { ...ROUTER, implemented: false }),
  'overlay-type': text('subnet', 'Possible values: subnet,full - When set to "subnet", the default, default "--enable-overlay=true" behavior is used. When set to "full", it changes "--enable-overlay=true" default behavior so that IP-in-IP tunneling is used for pod-to-pod networking across nodes regardless of the subnet the nodes are in.', { ...ROUTER, implemented: false }),
  'override-nexthop': bool(false, 'Override the next-hop in bgp routes sent to peers with the local ip.', { ...ROUTER, implemented: true }),
  'peer-router-asns': flag(uintListSyntax(), 'ASN numbers of the BGP peer to which cluster nodes will advertise cluster ip and node\'s pod cidr.', { ...ROUTER, implemented: true }),
  'peer-router-ips': flag(ipListSyntax(), "The ip address of the external router to which all nodes will peer and advertise the cluster ip and pod cidr's.", { ...ROUTER, implemented: true }),
  'peer-router-multihop-ttl': uint(8, 0, 'Enable eBGP multihop supports -- sets multihop-ttl. (Relevant only if ttl >= 2)', { ...ROUTER, implemented: true }),
  'peer-router-passwords': list([], 'Password for authenticating against the BGP peer defined with "--peer-router-ips".', { ...ROUTER, implemented: true }),
  'peer-router-passwords-file': text('', 'Path to file containing password for authenticating against the BGP peer defined with "--peer-router-ips". --peer-router-passwords will be preferred if both are set.', { ...ROUTER, implemented: true }),
  'peer-router-ports': flag(uintListSyntax(), 'The remote port of the external BGP to which all nodes will peer. If not set, default BGP port (179) will be used.', { ...ROUTER, implemented: true }),
  'router-id': text('', 'BGP router-id. Must be specified in a ipv6 only cluster, "generate" can be specified to generate the router id.', { ...ROUTER, implemented: true }),
  'routes-sync-period': duration('5m0s', "The delay between route updates and advertisements (e.g. '5s', '1m', '2h22m'). Must be greater than 0.", { ...ROUTER, implemented: true }),
  'run-firewall': bool(true, 'Enables Network Policy -- sets up iptables to provide ingress firewall for pods.', { ...ALWAYS, implemented: true }),
  'run-loadbalancer': bool(false, 'Enable loadbalancer address allocator', { ...ALWAYS, implemented: true }),
  'run-router': bool(true, 'Enables Pod Networking -- Advertises and learns the routes to Pods via iBGP.', { ...ALWAYS, implemented: true }),
  'run-service-proxy': bool(true, 'Enables Service Proxy -- sets up IPVS for Kubernetes Services.', { ...ALWAYS, implemented: true }),
  'runtime-endpoint': text('', 'Path to CRI compatible container runtime socket (used for DSR mode). Currently known working with containerd.', { ...PROXY, implemented: false }),
  'service-cluster-ip-range': list(['10.96.0.0/12'], 'CIDR values from which service cluster IPs are assigned (can be specified up to 2 times)', { features: ['firewall', 'service-proxy', 'router'], implemented: true }),
  'service-external-ip-range': list([], 'Specify external IP CIDRs that are used for inter-cluster communication (can be specified multiple times). Also used by the proxy module to validate externalIPs when --strict-external-ip-validation is enabled.', { features: ['firewall', 'service-proxy', 'router'], implemented: true }),
  'service-node-port-range': text('30000-32767', 'NodePort range specified with either a hyphen or colon', { features: ['firewall', 'service-proxy'], implemented: true }),
  'service-tcp-timeout': duration('0s', "Specify TCP timeout for IPVS services in standard duration syntax (e.g. '5s', '1m'), default 0s preserves default system value (default: 0s)", { ...PROXY, implemented: true }),
  'service-tcpfin-timeout': duration('0s', "Specify TCP FIN timeout for IPVS services in standard duration syntax (e.g. '5s', '1m'), default 0s preserves default system value (default: 0s)", { ...PROXY, implemented: true }),
  'service-udp-timeout': duration('0s', "Specify UDP timeout for IPVS services in standard duration syntax (e.g. '5s', '1m'), default 0s preserves default system value (default: 0s)", { ...PROXY, implemented: true }),
  'strict-external-ip-validation': bool(true, 'When enabled, the proxy module validates externalIPs and loadBalancerIPs against configured CIDR ranges (--service-external-ip-range and --loadbalancer-ip-range). When strict mode is enabled and no range is configured, all externalIPs / loadBalancerIPs are rejected (default-deny). Disable this flag to restore previous behavior of accepting all IPs without validation.', { features: ['service-proxy', 'router'], implemented: true }),
  'use-nftables-for-netpol': bool(false, '[Experimental] Use nftables instead of iptables for the network policy controller. Requires nft >= 1.0.1 and kernel nftables support.', { ...FIREWALL, implemented: true }),
  v: flag(verbositySyntax(), 'log level for V logs', { ...ALWAYS, implemented: true, shorthand: 'v' }),
  version: bool(false, 'Print version information.', { ...ALWAYS, implemented: true, shorthand: 'V' }),
};

export type FlagName = keyof typeof FLAGS;
type ValueOf<D> = D extends FlagDefinition<infer T> ? T : never;
/** Every flag's parsed value, by flag name. */
export type FlagValues = { [Name in FlagName]: ValueOf<(typeof FLAGS)[Name]> };

export type LogFormat = 'json' | 'text';

/** The agent's configuration as the flags give it, typed and validated, grouped by feature. Durations are in ms. */
export interface AgentConfig {
  /** --run-firewall, --run-service-proxy, --run-router, --run-loadbalancer. */
  features: Record<Feature, boolean>;
  /** --cleanup-config: remove what every plugin of this build programmed, then exit. */
  cleanupConfig: boolean;
  /** This node's name: --hostname-override, else $NODE_NAME, else the host name (kube-router's precedence). */
  nodeName: string;
  /** Where nodeName came from, for the start-up log line. */
  nodeNameSource: '--hostname-override' | 'NODE_NAME' | 'hostname';
  /** --kubeconfig; undefined: in-cluster or $KUBECONFIG. */
  kubeconfig: string | undefined;
  /** --master. */
  master: string | undefined;
  /** --cache-sync-timeout. */
  cacheSyncTimeoutMs: number;
  /** --health-addr ("" = every address, IPv4 and IPv6), --health-port (0 = no server; the checks still run). */
  health: { addr: string; port: number; graceMs: number; windowsMs: Record<string, number> };
  /** --metrics-addr ("" = every address), --metrics-port (0 = disabled, kube-router's default), --metrics-path. */
  metrics: { addr: string; port: number; path: string };
  logging: {
    /** kube-router's -v verbosity, and the pino level it maps to. */
    verbosity: number;
    level: Level;
    format: LogFormat;
  };
  /** --enable-ipv4, --enable-ipv6: every plugin programs only these families. */
  ipFamilies: { ipv4: boolean; ipv6: boolean };
  /** The cluster's Service address space, read by the firewall, the proxy and the router. */
  services: {
    /** --service-cluster-ip-range (one per family). */
    clusterIpRanges: string[];
    /** --service-external-ip-range. */
    externalIpRanges: string[];
    /** --service-node-port-range, as given (`30000-32767` or `30000:32767`). */
    nodePortRange: string;
  };
  /** The network policy firewall. */
  firewall: {
    /** --iptables-sync-period (also the nftables backend's period). */
    syncPeriodMs: number;
    /** --netpol-default-deny. */
    defaultDeny: boolean;
    /** --use-nftables-for-netpol. */
    useNftables: boolean;
  };
  /** The IPVS service proxy. */
  proxy: {
    /** --ipvs-sync-period. */
    syncPeriodMs: number;
    /** --ipvs-graceful-period. */
    gracefulPeriodMs: number;
    /** --ipvs-graceful-termination. */
    gracefulTermination: boolean;
    /** --ipvs-permit-all. */
    permitAll: boolean;
    /** --excluded-cidrs. */
    excludedCidrs: string[];
    /** --hairpin-mode. */
    hairpinMode: boolean;
    /** --masquerade-all. */
    masqueradeAll: boolean;
    /** --nodeport-bindon-all-ip. */
    nodePortBindOnAllIp: boolean;
    /** --runtime-endpoint ("" = none). */
    runtimeEndpoint: string;
    /** --strict-external-ip-validation. */
    strictExternalIpValidation: boolean;
    /** --service-tcp-timeout, --service-tcpfin-timeout, --service-udp-timeout (0 = the kernel's default). */
    tcpTimeoutMs: number;
    tcpFinTimeoutMs: number;
    udpTimeoutMs: number;
    /** --loadbalancer-ip-range, which the proxy uses to validate loadBalancerIPs. */
    loadBalancerIpRanges: string[];
  };
  /** Pod networking: BGP, kernel routes, overlay, CNI. */
  routing: {
    /** --routes-sync-period. */
    syncPeriodMs: number;
    /** --injected-routes-sync-period. */
    injectedRoutesSyncPeriodMs: number;
    /** --advertise-cluster-ip, --advertise-external-ip, --advertise-loadbalancer-ip, --advertise-pod-cidr. */
    advertiseClusterIp: boolean;
    advertiseExternalIp: boolean;
    advertiseLoadBalancerIp: boolean;
    advertisePodCidr: boolean;
    /** --auto-mtu. */
    autoMtu: boolean;
    /** --enable-cni. */
    enableCni: boolean;
    /** $KUBE_ROUTER_CNI_CONF_FILE (kube-router's default /etc/cni/net.d/10-kuberouter.conf when unset or empty). */
    cniConfFile: string | undefined;
    /** --enable-ibgp. */
    enableIbgp: boolean;
    /** --nodes-full-mesh. */
    nodesFullMesh: boolean;
    /** --enable-overlay, --overlay-type (subnet | full), --overlay-encap (ipip | fou), --overlay-encap-port. */
    enableOverlay: boolean;
    overlayType: string;
    overlayEncap: string;
    overlayEncapPort: number;
    /** --enable-pod-egress. */
    enablePodEgress: boolean;
    /** --override-nexthop. */
    overrideNextHop: boolean;
    /** --disable-source-dest-check (AWS). */
    disableSourceDestCheck: boolean;
    /** --cluster-asn (0 = kube-router's default, 64512). */
    clusterAsn: number;
    /** --router-id ("" = the node's IPv4 address; "generate"). */
    routerId: string;
    bgp: {
      /** --bgp-port. */
      port: number;
      /** --bgp-holdtime. */
      holdTimeMs: number;
      /** --bgp-graceful-restart, --bgp-graceful-restart-time, --bgp-graceful-restart-deferral-time. */
      gracefulRestart: boolean;
      gracefulRestartTimeMs: number;
      gracefulRestartDeferralTimeMs: number;
    };
    /** --enable-bfd and its timers (milliseconds, as kube-router takes them). */
    bfd: { enabled: boolean; port: number; desiredMinTxIntervalMs: number; requiredMinRxIntervalMs: number; detectionMultiplier: number };
    /** --peer-router-ips, -asns, -ports, -passwords, -passwords-file, -multihop-ttl: the external peers, by index. */
    peers: {
      ips: string[];
      asns: number[];
      ports: number[];
      passwords: string[];
      passwordsFile: string;
      multihopTtl: number;
    };
    /** --gobgp-admin-address, --gobgp-admin-port (0 = no gRPC admin server). */
    gobgpAdmin: { address: string; port: number };
  };
  /** The LoadBalancer address allocator. */
  loadbalancer: {
    /** --loadbalancer-sync-period. */
    syncPeriodMs: number;
    /** --loadbalancer-ip-range. */
    ipRanges: string[];
    /** --loadbalancer-default-class. */
    defaultClass: boolean;
  };
  /** --enable-pprof. */
  enablePprof: boolean;
}

export type FlagsResult =
  | { ok: true; config: AgentConfig; values: FlagValues; given: ReadonlySet<FlagName> }
  /** Help, version, or a usage error: print and exit with exitCode (0 for help and version, 2 for bad flags). */
  | { ok: false; exitCode: number; stdout: string; stderr: string };

const USAGE_ERROR = 2;

/**
 * Parses kube-router's command line with pflag's syntax (see pflag.ts): every kube-router flag with its name, default
 * and syntax, plus the agent's own. Checks the values (naming the flag), but not whether this build implements them:
 * that is unsupportedSettings(), which needs the catalog.
 */
export function parseFlags(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): FlagsResult {
  const usageError = (problems: readonly string[]): FlagsResult => ({
    ok: false,
    exitCode: USAGE_ERROR,
    stdout: '',
    stderr: `${problems.map((p) => `error: ${p}`).join('\n')}\n(run kube-router --help for usage)\n`,
  });
  let parsed;
  try {
    parsed = parseCommandLine(argv, FLAGS, SHORTHANDS);
  } catch (error) {
    if (error instanceof FlagSyntaxError) return usageError([error.message]);
    throw error;
  }
  const values = parsed.values as FlagValues;
  if (values.help) return { ok: false, exitCode: 0, stdout: helpText(), stderr: '' };
  if (values.version) return { ok: false, exitCode: 0, stdout: `${packageVersion()}\n`, stderr: '' };
  const problems = validateFlags(values);
  // kube-router refuses them too: a stray word is usually a boolean written `--flag false` instead of `--flag=false`.
  if (parsed.positional.length > 0) {
    problems.unshift(
      `unrecognized positional argument(s): ${parsed.positional.join(' ')}` +
        ' (boolean flags take their value as --flag=false, not --flag false)',
    );
  }
  if (problems.length > 0) return usageError(problems);
  return { ok: true, config: toConfig(values, env), values, given: parsed.given as Set<FlagName> };
}

/** The help text, as `kube-router --help` prints it: pflag's layout, every flag with its default. */
export function helpText(): string {
  const entries = Object.entries(FLAGS as Record<string, FlagDefinition>).map(([name, definition]) => ({
    name,
    syntax: definition,
    usage: definition.usage,
    ...(!definition.implemented && {
      note: definition.builtValue === undefined ? '[not implemented in this build]' : `[not implemented in this build: it does what ${String(definition.builtValue)} says]`,
    }),
    ...(definition.shorthand !== undefined && { shorthand: definition.shorthand }),
  }));
  return `Usage of kube-router:\n${formatFlagUsages(entries)}`;
}

const SHORTHANDS: Record<string, FlagName> = Object.fromEntries(
  Object.entries(FLAGS as Record<string, FlagDefinition>)
    .filter(([, definition]) => definition.shorthand !== undefined)
    .map(([name, definition]) => [definition.shorthand, name]),
);

function toConfig(v: FlagValues, env: NodeJS.ProcessEnv): AgentConfig {
  const [nodeName, nodeNameSource] = resolveNodeName(v['hostname-override'], env);
  return {
    features: {
      firewall: v['run-firewall'],
      'service-proxy': v['run-service-proxy'],
      router: v['run-router'],
      loadbalancer: v['run-loadbalancer'],
    },
    cleanupConfig: v['cleanup-config'],
    nodeName,
    nodeNameSource,
    kubeconfig: v.kubeconfig === '' ? undefined : v.kubeconfig,
    master: v.master === '' ? undefined : v.master,
    cacheSyncTimeoutMs: v['cache-sync-timeout'],
    health: { addr: v['health-addr'], port: v['health-port'], graceMs: v['health-grace'], windowsMs: v['health-window'] },
    metrics: { addr: v['metrics-addr'], port: v['metrics-port'], path: v['metrics-path'] },
    logging: { verbosity: v.v, level: logLevelFor(v.v), format: v['log-format'] },
    ipFamilies: { ipv4: v['enable-ipv4'], ipv6: v['enable-ipv6'] },
    services: {
      clusterIpRanges: v['service-cluster-ip-range'],
      externalIpRanges: v['service-external-ip-range'],
      nodePortRange: v['service-node-port-range'],
    },
    firewall: {
      syncPeriodMs: v['iptables-sync-period'],
      defaultDeny: v['netpol-default-deny'],
      useNftables: v['use-nftables-for-netpol'],
    },
    proxy: {
      syncPeriodMs: v['ipvs-sync-period'],
      gracefulPeriodMs: v['ipvs-graceful-period'],
      gracefulTermination: v['ipvs-graceful-termination'],
      permitAll: v['ipvs-permit-all'],
      excludedCidrs: v['excluded-cidrs'],
      hairpinMode: v['hairpin-mode'],
      masqueradeAll: v['masquerade-all'],
      nodePortBindOnAllIp: v['nodeport-bindon-all-ip'],
      runtimeEndpoint: v['runtime-endpoint'],
      strictExternalIpValidation: v['strict-external-ip-validation'],
      tcpTimeoutMs: v['service-tcp-timeout'],
      tcpFinTimeoutMs: v['service-tcpfin-timeout'],
      udpTimeoutMs: v['service-udp-timeout'],
      loadBalancerIpRanges: v['loadbalancer-ip-range'],
    },
    routing: {
      syncPeriodMs: v['routes-sync-period'],
      injectedRoutesSyncPeriodMs: v['injected-routes-sync-period'],
      advertiseClusterIp: v['advertise-cluster-ip'],
      advertiseExternalIp: v['advertise-external-ip'],
      advertiseLoadBalancerIp: v['advertise-loadbalancer-ip'],
      advertisePodCidr: v['advertise-pod-cidr'],
      autoMtu: v['auto-mtu'],
      enableCni: v['enable-cni'],
      cniConfFile: env.KUBE_ROUTER_CNI_CONF_FILE || undefined,
      enableIbgp: v['enable-ibgp'],
      nodesFullMesh: v['nodes-full-mesh'],
      enableOverlay: v['enable-overlay'],
      overlayType: v['overlay-type'],
      overlayEncap: v['overlay-encap'],
      overlayEncapPort: v['overlay-encap-port'],
      enablePodEgress: v['enable-pod-egress'],
      overrideNextHop: v['override-nexthop'],
      disableSourceDestCheck: v['disable-source-dest-check'],
      clusterAsn: v['cluster-asn'],
      routerId: v['router-id'],
      bgp: {
        port: v['bgp-port'],
        holdTimeMs: v['bgp-holdtime'],
        gracefulRestart: v['bgp-graceful-restart'],
        gracefulRestartTimeMs: v['bgp-graceful-restart-time'],
        gracefulRestartDeferralTimeMs: v['bgp-graceful-restart-deferral-time'],
      },
      bfd: {
        enabled: v['enable-bfd'],
        port: v['bfd-port'],
        desiredMinTxIntervalMs: v['bfd-desired-min-tx-interval'],
        requiredMinRxIntervalMs: v['bfd-required-min-rx-interval'],
        detectionMultiplier: v['bfd-detection-multiplier'],
      },
      peers: {
        ips: v['peer-router-ips'],
        asns: v['peer-router-asns'],
        ports: v['peer-router-ports'],
        passwords: v['peer-router-passwords'],
        passwordsFile: v['peer-router-passwords-file'],
        multihopTtl: v['peer-router-multihop-ttl'],
      },
      gobgpAdmin: { address: v['gobgp-admin-address'], port: v['gobgp-admin-port'] },
    },
    loadbalancer: {
      syncPeriodMs: v['loadbalancer-sync-period'],
      ipRanges: v['loadbalancer-ip-range'],
      defaultClass: v['loadbalancer-default-class'],
    },
    enablePprof: v['enable-pprof'],
  };
}

/** kube-router's precedence: --hostname-override, then $NODE_NAME, then the host name. */
function resolveNodeName(override: string, env: NodeJS.ProcessEnv): [string, AgentConfig['nodeNameSource']] {
  if (override !== '') return [override, '--hostname-override'];
  if (env.NODE_NAME) return [env.NODE_NAME, 'NODE_NAME'];
  return [hostname(), 'hostname'];
}

function logLevelFor(verbosity: number): Level {
  return verbosity >= 3 ? 'trace' : verbosity >= 1 ? 'debug' : 'info';
}

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

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}
