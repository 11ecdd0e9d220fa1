import { isIp, parseCidr } from '@kube-router/kube';
import { validateLoadBalancerIPRanges } from '@kube-router/lballoc';
import { clusterAsnProblem } from '@kube-router/routing-bgp';
import { formatGoDuration } from './duration.js';
import type { FlagValues } from './flags.js';
import { peerRoutersOfFlags } from './peer-routers.js';

/**
 * Checks the flags' values at start, each problem naming its flag, so that a bad value never reaches a plugin (which
 * would fail later, less clearly, or never). Returns every problem, not only the first.
 */
export function validateFlags(values: FlagValues): string[] {
  const problems: string[] = [];
  const shown = (ms: number) => formatGoDuration(ms);

  // Periods drive timers: they must be a whole number of milliseconds (Node's timer resolution) and positive.
  const periods = [
    'iptables-sync-period',
    'ipvs-sync-period',
    'routes-sync-period',
    'injected-routes-sync-period',
    'loadbalancer-sync-period',
    'cache-sync-timeout',
    'ipvs-graceful-period',
  ] as const;
  for (const name of periods) {
    const value = values[name];
    if (!(value > 0)) problems.push(`--${name} must be greater than 0, got ${shown(value)}`);
    else if (!Number.isInteger(value)) problems.push(`--${name} must be a whole number of milliseconds, got ${shown(value)}`);
  }
  for (const name of ['health-grace', 'service-tcp-timeout', 'service-tcpfin-timeout', 'service-udp-timeout'] as const) {
    const value = values[name];
    if (value < 0) problems.push(`--${name} must not be negative, got ${shown(value)}`);
    else if (!Number.isInteger(value)) problems.push(`--${name} must be a whole number of milliseconds, got ${shown(value)}`);
  }
  for (const [controller, windowMs] of Object.entries(values['health-window'])) {
    if (!(windowMs >= 1) || !Number.isInteger(windowMs)) {
      problems.push(`--health-window=${controller}=${shown(windowMs)}: the window must be a whole number of milliseconds, at least 1ms`);
    }
  }
  const holdTime = values['bgp-holdtime'];
  if (holdTime < 3_000 || holdTime > 65_536_000) problems.push(`--bgp-holdtime must be from 3s to 18h12m16s, got ${shown(holdTime)}`);
  // As kube-router: the times are checked only with --bgp-graceful-restart on, and must be positive then.
  if (values['bgp-graceful-restart']) {
    const restartTime = values['bgp-graceful-restart-time'];
    if (!(restartTime > 0) || restartTime > 4_095_000) {
      problems.push(`--bgp-graceful-restart-time must be greater than 0 and at most 4095s, got ${shown(restartTime)}`);
    }
    const deferralTime = values['bgp-graceful-restart-deferral-time'];
    if (!(deferralTime > 0) || deferralTime > 18 * 3_600_000) {
      problems.push(`--bgp-graceful-restart-deferral-time must be greater than 0 and at most 18h, got ${shown(deferralTime)}`);
    }
  }
  // As kube-router's routing controller checks it: 0 means 64512, anything else must be a private ASN.
  const clusterAsn = values['cluster-asn'];
  const asnProblem = values['run-router'] && clusterAsn !== 0 ? clusterAsnProblem(clusterAsn) : undefined;
  if (asnProblem) problems.push(`--cluster-asn: ${asnProblem}`);
  const multiplier = values['bfd-detection-multiplier'];
  if (multiplier < 1 || multiplier > 255) problems.push(`--bfd-detection-multiplier must be from 1 to 255, got ${multiplier}`);

  if (!values['enable-ipv4'] && !values['enable-ipv6']) problems.push('at least one of --enable-ipv4 and --enable-ipv6 must be true');

  for (const name of ['health-addr', 'metrics-addr'] as const) {
    const address = values[name];
    if (address !== '' && !isIp(address)) {
      problems.push(`--${name} must be an IP address, or empty for every address, got ${JSON.stringify(address)}`);
    }
  }
  if (values['enable-explain'] && values['metrics-port'] === 0) {
    problems.push('--enable-explain serves /explain on the metrics server: set --metrics-port too');
  }
  const metricsPath = values['metrics-path'];
  if (!isPlainPath(metricsPath)) {
    problems.push(`--metrics-path must be a URL path such as /metrics (no query, fragment or spaces), got ${JSON.stringify(metricsPath)}`);
  }
  if (values['metrics-port'] !== 0 && values['metrics-port'] === values['health-port']) {
    if (values['metrics-addr'] !== values['health-addr']) {
      problems.push(`--metrics-port and --health-port are both ${values['health-port']}: then --metrics-addr must equal --health-addr`);
    }
    if (/^\/(healthz|livez|readyz)(\/|$)/.test(metricsPath)) {
      problems.push(`--metrics-path ${metricsPath} collides with the health endpoints on the shared port ${values['health-port']}`);
    }
  }
  if (values['enable-explain'] && metricsPath === '/explain') problems.push('--metrics-path /explain collides with --enable-explain');

  const nodePortProblem = nodePortRangeProblem(values['service-node-port-range']);
  if (nodePortProblem) problems.push(`--service-node-port-range ${JSON.stringify(values['service-node-port-range'])}: ${nodePortProblem}`);

  const clusterRanges = values['service-cluster-ip-range'];
  problems.push(...cidrProblems('service-cluster-ip-range', clusterRanges));
  if (clusterRanges.length > 2) problems.push(`--service-cluster-ip-range takes at most 2 ranges (one per family), got ${clusterRanges.length}`);
  problems.push(...cidrProblems('service-external-ip-range', values['service-external-ip-range']));
  problems.push(...cidrProblems('excluded-cidrs', values['excluded-cidrs']));
  // The allocator's own checks (syntax, IPv4-mapped ranges, overlaps), so that what passes here is what it can use.
  problems.push(...validateLoadBalancerIPRanges(values['loadbalancer-ip-range']));

  if (!['subnet', 'full'].includes(values['overlay-type'])) {
    problems.push(`--overlay-type must be subnet or full, got ${JSON.stringify(values['overlay-type'])}`);
  }
  if (!['ipip', 'fou'].includes(values['overlay-encap'])) {
    problems.push(`--overlay-encap must be ipip or fou, got ${JSON.stringify(values['overlay-encap'])}`);
  }
  // Events are of the drops the log reads: alone, the flag would silently do nothing.
  if (values['netpol-drop-log-events'] && !values['netpol-drop-log']) {
    problems.push('--netpol-drop-log-events needs --netpol-drop-log');
  }
  problems.push(
    ...peerRoutersOfFlags({
      ips: values['peer-router-ips'],
      asns: values['peer-router-asns'],
      ports: values['peer-router-ports'],
      passwords: values['peer-router-passwords'],
      passwordsFile: values['peer-router-passwords-file'],
    }).problems,
  );
  return problems;
}

/** kube-router's validateNodePortRange: `low-high` or `low:high`, 16-bit ports, low < high. */
export function nodePortRangeProblem(range: string): string | undefined {
  const match = /^(\d+)[:-](\d+)$/.exec(range);
  if (!match) return 'expected a port range such as 30000-32767 or 30000:32767';
  const [low, high] = [Number(match[1]), Number(match[2])];
  if (low > 65535 || high > 65535) return 'ports must be at most 65535';
  if (low >= high) return 'the first port must be lower than the second';
  return undefined;
}

function cidrProblems(flag: string, ranges: readonly string[]): string[] {
  return ranges.flatMap((range) => {
    // Go's net.ParseCIDR, which kube-router reads them with: no `10.1/16`, octal, zone or `/08`.
    if (parseCidr(range) !== undefined) return [];
    return [`--${flag} ${JSON.stringify(range)} is not a CIDR such as 10.96.0.0/12 or fd00::/108`];
  });
}

function isPlainPath(path: string): boolean {
  if (!path.startsWith('/') || /[\s?#]/.test(path)) return false;
  try {
    return new URL(path, 'http://localhost').pathname === path;
  } catch {
    return false;
  }
}
