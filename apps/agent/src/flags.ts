import { hostname } from 'node:os';
import { readFileSync } from 'node:fs';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import type { Level } from 'pino';
import { DEFAULT_HEALTH_PORT } from '@kube-router/healthcheck';
import { DEFAULT_METRICS_PATH } from '@kube-router/metrics';
import { formatGoDuration, parseGoDuration } from './duration.js';

/** The features kube-router switches with --run-*; each maps to plugins through the catalog. */
export const FEATURES = ['firewall', 'service-proxy', 'router', 'loadbalancer'] as const;
export type Feature = (typeof FEATURES)[number];

/** The agent's configuration as the flags give it, typed and validated. */
export interface AgentConfig {
  features: Record<Feature, boolean>;
  syncPeriodsMs: { iptables: number; ipvs: number; routes: number; loadbalancer: number };
  /** Port 0 disables the server; the checks still run (kube-router's --health-port=0). */
  health: { addr: string; port: number };
  /** Port 0 disables metrics (kube-router's default). */
  metrics: { addr: string; port: number; path: string };
  healthGraceMs: number;
  healthWindowsMs: Record<string, number>;
  nodeName: string;
  kubeconfig: string | undefined;
  master: string | undefined;
  cacheSyncTimeoutMs: number;
  /** kube-router's -v verbosity, and the pino level it maps to. */
  verbosity: number;
  logLevel: Level;
  loadbalancer: { ipRanges: string[]; defaultClass: boolean };
  ipFamilies: { ipv4: boolean; ipv6: boolean };
  /** The network policy firewall's settings. */
  firewall: {
    defaultDeny: boolean;
    serviceClusterIpRanges: string[];
    serviceExternalIpRanges: string[];
    nodePortRange: string;
  };
}

export type FlagsResult =
  | { ok: true; config: AgentConfig }
  /** Help, version, or a usage error: print and exit with exitCode (0 for help and version, 2 for bad flags). */
  | { ok: false; exitCode: number; stdout: string; stderr: string };

const USAGE_ERROR = 2;

interface RawFlags {
  runFirewall: boolean;
  runServiceProxy: boolean;
  runRouter: boolean;
  runLoadbalancer: boolean;
  iptablesSyncPeriod: number;
  ipvsSyncPeriod: number;
  routesSyncPeriod: number;
  loadbalancerSyncPeriod: number;
  healthAddr: string;
  healthPort: number;
  metricsAddr: string;
  metricsPort: number;
  metricsPath: string;
  healthGrace: number;
  healthWindow: Record<string, number>;
  hostnameOverride: string | undefined;
  kubeconfig: string | undefined;
  master: string | undefined;
  cacheSyncTimeout: number;
  v: number;
  loadbalancerIpRange: string[];
  loadbalancerDefaultClass: boolean;
  enableIpv4: boolean;
  enableIpv6: boolean;
  netpolDefaultDeny: boolean;
  serviceClusterIpRange: string[];
  serviceExternalIpRange: string[];
  serviceNodePortRange: string;
}

/**
 * Parses kube-router's command line. Flags that kube-router has keep its names, defaults and syntax (pflag booleans
 * take `--flag`, `--flag=true` and `--flag=false`; durations are Go durations; list flags repeat or take commas).
 */
export function parseFlags(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): FlagsResult {
  let stdout = '';
  let stderr = '';
  const command = buildCommand()
    .exitOverride()
    .configureOutput({
      writeOut: (text) => void (stdout += text),
      writeErr: (text) => void (stderr += text),
    });
  try {
    command.parse([...argv], { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) {
      const exitCode = error.exitCode === 0 ? 0 : USAGE_ERROR;
      return { ok: false, exitCode, stdout, stderr };
    }
    throw error;
  }
  const raw = command.opts<RawFlags>();
  const problems = validate(raw);
  if (problems.length > 0) {
    return {
      ok: false,
      exitCode: USAGE_ERROR,
      stdout,
      stderr: `${problems.map((p) => `error: ${p}`).join('\n')}\n(run kube-router --help for usage)\n`,
    };
  }
  return { ok: true, config: toConfig(raw, env) };
}

/** The help text, as `kube-router --help` prints it. */
export function helpText(): string {
  return buildCommand().helpInformation();
}

function buildCommand(): Command {
  const command = new Command('kube-router')
    .description(
      'Kubernetes node networking agent: network policy firewall, IPVS service proxy, BGP pod routing and ' +
        'LoadBalancer IP allocation, assembled from plugins.',
    )
    .version(packageVersion(), '-V, --version', 'Print version information.')
    .helpOption('-h, --help', 'Print usage information.')
    .allowExcessArguments(false)
    .configureHelp({ optionDescription: goStyleDescription, sortOptions: true });

  const bool = (flags: string, description: string, defaultValue: boolean) =>
    new Option(`${flags} [bool]`, description).preset('true').argParser(parseBoolean).default(defaultValue);
  const duration = (flags: string, description: string, defaultText: string) =>
    new Option(`${flags} <duration>`, description).argParser(parseDuration).default(parseGoDuration(defaultText), formatGoDuration(parseGoDuration(defaultText)));
  const port = (flags: string, description: string, defaultValue: number) =>
    new Option(`${flags} <port>`, description).argParser(parsePort).default(defaultValue);

  const options = [
    bool('--run-firewall', 'Enables Network Policy -- sets up iptables to provide ingress firewall for pods.', true),
    bool('--run-service-proxy', 'Enables Service Proxy -- sets up IPVS for Kubernetes Services.', true),
    bool('--run-router', 'Enables Pod Networking -- Advertises and learns the routes to Pods via iBGP.', true),
    bool('--run-loadbalancer', 'Enable loadbalancer address allocator.', false),
    duration('--iptables-sync-period', 'The delay between iptables rule synchronizations (e.g. 5s, 1m). Must be greater than 0.', '5m'),
    duration('--ipvs-sync-period', 'The delay between ipvs config synchronizations (e.g. 5s, 1m, 2h22m). Must be greater than 0.', '5m'),
    duration('--routes-sync-period', 'The delay between route updates and advertisements (e.g. 5s, 1m, 2h22m). Must be greater than 0.', '5m'),
    duration('--loadbalancer-sync-period', 'The delay between checking for missed services (e.g. 5s, 1m). Must be greater than 0.', '1m'),
    new Option('--health-addr <addr>', 'Health check address to listen on (not in kube-router).').default('0.0.0.0'),
    port('--health-port', 'Health check port, 0 = Disabled (the checks still run).', DEFAULT_HEALTH_PORT),
    duration(
      '--health-grace',
      'Added to each controller\'s sync period to form its health window (not in kube-router).',
      '30s',
    ),
    new Option(
      '--health-window <controller=duration>',
      'Health window of one controller, overriding sync period + grace; repeatable (not in kube-router).',
    )
      .argParser(parseWindow)
      .default({}, ''),
    new Option('--metrics-addr <addr>', 'Prometheus metrics address to listen on.').default('0.0.0.0'),
    port('--metrics-port', 'Prometheus metrics port, 0 = Disabled.', 0),
    new Option('--metrics-path <path>', 'Prometheus metrics path.').default(DEFAULT_METRICS_PATH),
    new Option(
      '--hostname-override <name>',
      'Overrides the NodeName of the node (default: $NODE_NAME, else the host name).',
    ),
    new Option(
      '--kubeconfig <path>',
      'Path to kubeconfig file with authorization information (the master location is set by the master flag).',
    ),
    new Option('--master <url>', 'The address of the Kubernetes API server (overrides any value in kubeconfig).'),
    duration('--cache-sync-timeout', 'The timeout for cache synchronization (e.g. 5s, 1m). Must be greater than 0.', '1m'),
    new Option('-v, --v <level>', 'log level for V logs: 0 info, 1-2 debug, 3 and more trace.')
      .argParser(parseVerbosity)
      .default(0),
    new Option(
      '--loadbalancer-ip-range <cidr>',
      'CIDR values from which loadbalancer services addresses are assigned; repeatable or comma-separated.',
    )
      .argParser(appendList)
      .default([], '[]'),
    bool('--loadbalancer-default-class', 'Handle loadbalancer services without a class.', true),
    bool('--enable-ipv4', 'Enables IPv4 support.', true),
    bool('--enable-ipv6', 'Enables IPv6 support.', false),
    bool(
      '--netpol-default-deny',
      'Deny all traffic of pods that no NetworkPolicy selects, in both directions (not in kube-router).',
      false,
    ),
    new Option(
      '--service-cluster-ip-range <cidr>',
      'CIDR values from which service cluster IPs are assigned; repeatable or comma-separated (one per family).',
    )
      .argParser(appendList)
      // Applied in toConfig: a list default here would be appended to, not replaced.
      .default([], '[10.96.0.0/12]'),
    new Option(
      '--service-external-ip-range <cidr>',
      'Specify external IP CIDRs that are used for inter-cluster communication; repeatable or comma-separated.',
    )
      .argParser(appendList)
      .default([], '[]'),
    new Option('--service-node-port-range <range>', 'NodePort range specified with either a hyphen or colon.').default(
      '30000-32767',
    ),
  ];
  for (const option of options) command.addOption(option);
  return command;
}

function validate(raw: RawFlags): string[] {
  const problems: string[] = [];
  const positive: Array<[string, number]> = [
    ['--iptables-sync-period', raw.iptablesSyncPeriod],
    ['--ipvs-sync-period', raw.ipvsSyncPeriod],
    ['--routes-sync-period', raw.routesSyncPeriod],
    ['--loadbalancer-sync-period', raw.loadbalancerSyncPeriod],
    ['--cache-sync-timeout', raw.cacheSyncTimeout],
  ];
  for (const [flag, value] of positive) {
    if (!(value > 0)) problems.push(`${flag} must be greater than 0, got ${formatGoDuration(value)}`);
  }
  if (raw.healthGrace < 0) problems.push(`--health-grace must not be negative, got ${formatGoDuration(raw.healthGrace)}`);
  if (!raw.enableIpv4 && !raw.enableIpv6) problems.push('at least one of --enable-ipv4 and --enable-ipv6 must be true');
  if (!raw.metricsPath.startsWith('/')) problems.push(`--metrics-path must start with /, got ${raw.metricsPath}`);
  if (raw.metricsPort !== 0 && raw.metricsPort === raw.healthPort && raw.metricsAddr !== raw.healthAddr) {
    problems.push(`--metrics-port and --health-port are both ${raw.healthPort}: then --metrics-addr must equal --health-addr`);
  }
  return problems;
}

function toConfig(raw: RawFlags, env: NodeJS.ProcessEnv): AgentConfig {
  return {
    features: {
      firewall: raw.runFirewall,
      'service-proxy': raw.runServiceProxy,
      router: raw.runRouter,
      loadbalancer: raw.runLoadbalancer,
    },
    syncPeriodsMs: {
      iptables: raw.iptablesSyncPeriod,
      ipvs: raw.ipvsSyncPeriod,
      routes: raw.routesSyncPeriod,
      loadbalancer: raw.loadbalancerSyncPeriod,
    },
    health: { addr: raw.healthAddr, port: raw.healthPort },
    metrics: { addr: raw.metricsAddr, port: raw.metricsPort, path: raw.metricsPath },
    healthGraceMs: raw.healthGrace,
    healthWindowsMs: raw.healthWindow,
    nodeName: raw.hostnameOverride || env.NODE_NAME || hostname(),
    kubeconfig: raw.kubeconfig,
    master: raw.master,
    cacheSyncTimeoutMs: raw.cacheSyncTimeout,
    verbosity: raw.v,
    logLevel: raw.v >= 3 ? 'trace' : raw.v >= 1 ? 'debug' : 'info',
    loadbalancer: { ipRanges: raw.loadbalancerIpRange, defaultClass: raw.loadbalancerDefaultClass },
    ipFamilies: { ipv4: raw.enableIpv4, ipv6: raw.enableIpv6 },
    firewall: {
      defaultDeny: raw.netpolDefaultDeny,
      serviceClusterIpRanges: raw.serviceClusterIpRange.length > 0 ? raw.serviceClusterIpRange : ['10.96.0.0/12'],
      serviceExternalIpRanges: raw.serviceExternalIpRange,
      nodePortRange: raw.serviceNodePortRange,
    },
  };
}

function parseBoolean(value: string): boolean {
  // pflag's strconv.ParseBool spellings.
  if (['1', 't', 'T', 'true', 'TRUE', 'True'].includes(value)) return true;
  if (['0', 'f', 'F', 'false', 'FALSE', 'False'].includes(value)) return false;
  throw new InvalidArgumentError('expected true or false.');
}

function parseDuration(value: string): number {
  try {
    return parseGoDuration(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

function parsePort(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65535) throw new InvalidArgumentError('expected a port number from 0 to 65535.');
  return port;
}

function parseVerbosity(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('expected a number such as 0, 2 or 5.');
  return Number(value);
}

function appendList(value: string, previous: string[]): string[] {
  return [...previous, ...value.split(',').map((item) => item.trim()).filter((item) => item !== '')];
}

function parseWindow(value: string, previous: Record<string, number>): Record<string, number> {
  const separator = value.indexOf('=');
  if (separator <= 0) throw new InvalidArgumentError('expected controller=duration, e.g. netpol-iptables=10m.');
  const windowMs = parseDuration(value.slice(separator + 1));
  if (!(windowMs > 0)) throw new InvalidArgumentError('the window must be greater than 0.');
  return { ...previous, [value.slice(0, separator)]: windowMs };
}

/** pflag's help style: `(default 5m0s)`, without commander's preset noise. */
function goStyleDescription(option: Option): string {
  const shown = option.defaultValueDescription ?? describeDefault(option.defaultValue);
  return shown === undefined || shown === '' ? option.description : `${option.description} (default ${shown})`;
}

function describeDefault(value: unknown): string | undefined {
  if (value === undefined || value === '' || value === false) return undefined;
  if (typeof value === 'number' && value === 0) return undefined;
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}
