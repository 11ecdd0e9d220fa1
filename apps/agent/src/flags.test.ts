import { describe, expect, it } from 'vitest';
import { LBALLOC_CONTROLLER } from '@kube-router/lballoc';
import { NETPOL_CONTROLLER } from '@kube-router/netpol-iptables';
import type { AgentConfig } from './config.js';
import { FLAGS, type FlagDefinition, type FlagName } from './flags.js';
import { helpText, parseFlags } from './parse-flags.js';
import { proxyIpvsPlugin } from '@kube-router/proxy-ipvs';
import { proxyNftablesPlugin } from '@kube-router/proxy-nftables';
import { defaultCatalog, MissingFeatureError, pluginsForConfig, type PluginCatalog } from './catalog.js';
import { unsupportedSettings } from './feature-support.js';
import { testPlugin } from './testing/test-plugins.js';
import { KUBE_ROUTER_OPTIONS } from './testing/fixtures/kube-router-options.js';

function parsed(argv: string[], env: NodeJS.ProcessEnv = {}) {
  const result = parseFlags(argv, env);
  if (!result.ok) throw new Error(`flags refused: ${result.stderr}`);
  return result;
}
const config = (argv: string[], env: NodeJS.ProcessEnv = {}): AgentConfig => parsed(argv, env).config;

function refusal(argv: string[]): string {
  const result = parseFlags(argv, {});
  expect(result).toMatchObject({ ok: false, exitCode: 2 });
  return result.ok ? '' : result.stderr;
}

// pflag's type names, as kube-router's --help shows them, for each Go flag type.
const PFLAG_TYPE: Record<string, string> = {
  Bool: 'bool',
  String: 'string',
  StringSlice: 'strings',
  UintSlice: 'uints',
  IPSlice: 'ipSlice',
  Uint: 'uint',
  Uint8: 'uint8',
  Uint16: 'uint16',
  Uint32: 'uint32',
  Duration: 'duration',
};

describe('the flag table', () => {
  const definitions = FLAGS as Record<string, FlagDefinition>;

  it("has every kube-router flag with kube-router's type, shorthand and default, and nothing else but the agent's own", () => {
    expect(KUBE_ROUTER_OPTIONS).toHaveLength(79);
    for (const [name, goType, shorthand, defaultText] of KUBE_ROUTER_OPTIONS) {
      const definition = definitions[name];
      expect(definition, `--${name}`).toBeDefined();
      expect(definition!.agentOnly, `--${name}`).toBeUndefined();
      // -v is a string in kube-router that klog reads as a number: the help keeps saying string.
      expect(definition!.type, `--${name}`).toBe(PFLAG_TYPE[goType]);
      expect(definition!.shorthand ?? '', `--${name}`).toBe(shorthand);
      if (name === 'help' || name === 'version') continue;
      // Writing the default out changes nothing: it parses to the value the flag has when absent.
      const given = parsed([`--${name}=${defaultText}`]).values[name as FlagName];
      expect(given, `--${name}=${defaultText}`).toEqual(definition!.default);
    }
    const kubeRouterNames = new Set(KUBE_ROUTER_OPTIONS.map(([name]) => name));
    const extra = Object.keys(definitions).filter((name) => !kubeRouterNames.has(name));
    expect(extra.sort()).toEqual(['enable-explain', 'health-grace', 'health-window', 'log-format', 'netpol-drop-log', 'netpol-drop-log-events', 'use-nftables-for-service-proxy']);
    for (const name of extra) expect(definitions[name]!.agentOnly).toBe(true);
  });

  it('names only real features', () => {
    for (const [name, definition] of Object.entries(definitions)) {
      for (const feature of definition.features) {
        expect(['firewall', 'service-proxy', 'router', 'loadbalancer'], `--${name}`).toContain(feature);
      }
    }
  });
});

describe('parseFlags: pflag syntax', () => {
  it.each([
    [['--iptables-sync-period=30s']],
    [['--iptables-sync-period', '30s']],
  ])('takes a value after = or as the next argument: %j', (argv) => {
    expect(config(argv).firewall.syncPeriodMs).toBe(30_000);
  });

  it.each([[['-v=2']], [['-v', '2']], [['-v2']], [['--v=2']], [['--v', '2']]])('takes the shorthand -v as %j', (argv) => {
    expect(config(argv).logging).toMatchObject({ verbosity: 2, level: 'debug' });
  });

  it('maps -v to a log level', () => {
    expect(config([]).logging).toEqual({ verbosity: 0, level: 'info', format: 'json' });
    expect(config(['-v=1']).logging.level).toBe('debug');
    expect(config(['-v', '5']).logging.level).toBe('trace');
  });

  it('takes booleans as --flag and --flag=<strconv.ParseBool spelling>', () => {
    expect(config(['--run-firewall=false']).features.firewall).toBe(false);
    expect(config(['--run-firewall=0']).features.firewall).toBe(false);
    expect(config(['--run-loadbalancer']).features.loadbalancer).toBe(true);
    expect(config(['--run-loadbalancer=T']).features.loadbalancer).toBe(true);
    expect(config(['--run-router=False', '--run-service-proxy=f']).features).toMatchObject({
      router: false,
      'service-proxy': false,
    });
  });

  it('refuses `--flag false` as pflag does (a positional argument), saying how to write it', () => {
    expect(refusal(['--run-router', 'false'])).toContain(
      'unrecognized positional argument(s): false (boolean flags take their value as --flag=false, not --flag false)',
    );
  });

  it('collects list flags from repeats and commas; the first use replaces the default', () => {
    const c = config([
      '--loadbalancer-ip-range=10.0.0.0/24,10.0.1.0/24',
      '--loadbalancer-ip-range',
      'fd00::/120',
      '--service-cluster-ip-range=10.43.0.0/16',
      '--service-cluster-ip-range=fd00:43::/108',
      '--peer-router-ips=192.0.2.1,2001:db8::1',
      '--peer-router-asns=65000,65001',
      '--peer-router-ports=179',
      '--peer-router-ports=1790',
    ]);
    expect(c.loadbalancer.ipRanges).toEqual(['10.0.0.0/24', '10.0.1.0/24', 'fd00::/120']);
    expect(c.services.clusterIpRanges).toEqual(['10.43.0.0/16', 'fd00:43::/108']);
    expect(c.routing.peers).toMatchObject({ ips: ['192.0.2.1', '2001:db8::1'], asns: [65000, 65001], ports: [179, 1790] });
    expect(config(['--service-cluster-ip-range=']).services.clusterIpRanges).toEqual([]);
  });

  it('takes unsigned numbers as strconv.ParseUint(s, 0, bits) does, within their width', () => {
    expect(config(['--bgp-port=0x1b3']).routing.bgp.port).toBe(435);
    expect(config(['--cluster-asn=4200000000']).routing.clusterAsn).toBe(4_200_000_000);
    expect(refusal(['--gobgp-admin-port=65536'])).toContain('invalid argument "65536" for "--gobgp-admin-port" flag: value out of range');
    expect(refusal(['--peer-router-multihop-ttl=256'])).toContain('--peer-router-multihop-ttl');
    expect(refusal(['--bgp-port=-1'])).toContain('expected an unsigned integer');
  });

  it("refuses a --cluster-asn outside kube-router's private ranges when the router runs; 0 keeps 64512", () => {
    expect(refusal(['--run-router=true', '--cluster-asn=65536'])).toContain('--cluster-asn: invalid ASN number for cluster ASN: 65536');
    expect(refusal(['--run-router=true', '--cluster-asn=0x1'])).toContain('--cluster-asn: invalid ASN number for cluster ASN: 1');
    expect(config(['--run-router=true', '--cluster-asn=0']).routing.clusterAsn).toBe(0);
    expect(config(['--run-router=false', '--cluster-asn=65536']).routing.clusterAsn).toBe(65_536);
  });

  it('ends the flags at --', () => {
    expect(refusal(['--', '--run-router=false'])).toContain('unrecognized positional argument(s): --run-router=false');
  });

  it.each([
    [['--no-such-flag'], 'unknown flag: --no-such-flag'],
    [['-x'], "unknown shorthand flag: 'x' in -x"],
    [['--iptables-sync-period'], 'flag needs an argument: --iptables-sync-period'],
    [['-v'], "flag needs an argument: 'v' in -v"],
    [['--run-firewall=maybe'], 'invalid argument "maybe" for "--run-firewall" flag: expected true or false'],
    [['--iptables-sync-period=5'], 'invalid argument "5" for "--iptables-sync-period" flag: invalid duration "5": missing unit'],
    [['--peer-router-ips=10.0.0.300'], '"10.0.0.300" is not an IP address'],
    [['--log-format=xml'], 'for "--log-format" flag: expected json or text'],
    [['stray'], 'unrecognized positional argument(s): stray'],
  ])('refuses %j with exit code 2', (argv, message) => {
    expect(refusal(argv)).toContain(message);
  });
});

describe('parseFlags: values', () => {
  it("defaults the servers to kube-router's: every address (\"\"), health on 20244, metrics off", () => {
    const c = config([]);
    expect(c.health).toEqual({ addr: '', port: 20244, graceMs: 30_000, windowsMs: {} });
    expect(c.metrics).toEqual({ addr: '', port: 0, path: '/metrics', explain: false });
  });

  it("uses kube-router's defaults for every group", () => {
    const c = config([], { NODE_NAME: 'node-1' });
    expect(c.features).toEqual({ firewall: true, 'service-proxy': true, router: true, loadbalancer: false });
    expect(c.firewall).toEqual({ syncPeriodMs: 300_000, defaultDeny: false, dropLog: false, dropLogEvents: false, useNftables: false });
    expect(c.services).toEqual({ clusterIpRanges: ['10.96.0.0/12'], externalIpRanges: [], nodePortRange: '30000-32767' });
    expect(c.loadbalancer).toEqual({ syncPeriodMs: 60_000, ipRanges: [], defaultClass: true });
    expect(c.proxy).toMatchObject({ syncPeriodMs: 300_000, gracefulPeriodMs: 30_000, permitAll: true, strictExternalIpValidation: true });
    expect(c.routing).toMatchObject({
      syncPeriodMs: 300_000,
      injectedRoutesSyncPeriodMs: 60_000,
      advertisePodCidr: true,
      enableOverlay: true,
      overlayType: 'subnet',
      overlayEncap: 'ipip',
      overlayEncapPort: 5555,
      bgp: { port: 179, holdTimeMs: 90_000, gracefulRestart: false, gracefulRestartTimeMs: 90_000, gracefulRestartDeferralTimeMs: 360_000 },
      bfd: { enabled: false, port: 3784, desiredMinTxIntervalMs: 1000, requiredMinRxIntervalMs: 1000, detectionMultiplier: 3 },
      gobgpAdmin: { address: '127.0.0.1', port: 50051 },
    });
    expect(c).toMatchObject({ cleanupConfig: false, cacheSyncTimeoutMs: 60_000, kubeconfig: undefined, master: undefined });
    expect(c.ipFamilies).toEqual({ ipv4: true, ipv6: false });
  });

  it('takes the agent flags: servers, Kubernetes access, health windows', () => {
    const c = config([
      '--health-addr=127.0.0.1',
      '--health-port=0',
      '--metrics-addr=::',
      '--metrics-port=8080',
      '--metrics-path=/prom',
      '--kubeconfig=/var/lib/kube-router/kubeconfig',
      '--master=https://10.0.0.1:6443',
      '--cache-sync-timeout=10s',
      '--health-grace=10s',
      '--health-window=netpol=10m',
      '--health-window',
      'route-sync=1m',
      '--log-format=text',
    ]);
    expect(c.health).toEqual({ addr: '127.0.0.1', port: 0, graceMs: 10_000, windowsMs: { netpol: 600_000, 'route-sync': 60_000 } });
    expect(c.metrics).toEqual({ addr: '::', port: 8080, path: '/prom', explain: false });
    expect(c).toMatchObject({ kubeconfig: '/var/lib/kube-router/kubeconfig', master: 'https://10.0.0.1:6443', cacheSyncTimeoutMs: 10_000 });
    expect(c.logging.format).toBe('text');
  });

  it("resolves the node name with kube-router's precedence and says where it came from", () => {
    expect(config(['--hostname-override=worker-7'], { NODE_NAME: 'from-env' })).toMatchObject({
      nodeName: 'worker-7',
      nodeNameSource: '--hostname-override',
    });
    expect(config([], { NODE_NAME: 'from-env' })).toMatchObject({ nodeName: 'from-env', nodeNameSource: 'NODE_NAME' });
    expect(config([], {}).nodeNameSource).toBe('hostname');
  });

  it.each([
    [['--ipvs-sync-period=0s'], '--ipvs-sync-period must be greater than 0, got 0s'],
    [['--iptables-sync-period=500us'], '--iptables-sync-period must be a whole number of milliseconds, got 0.5ms'],
    [['--routes-sync-period=1500us'], '--routes-sync-period must be a whole number of milliseconds, got 1.5ms'],
    [['--health-grace=-1s'], '--health-grace must not be negative, got -1s'],
    [['--health-grace=3000000h'], 'for "--health-grace" flag: invalid duration "3000000h": longer than Go\'s maximum duration'],
    [['--health-window=netpol=3000000h'], 'longer than Go\'s maximum duration'],
    [['--health-window=10m'], 'expected controller=duration'],
    [['--health-window=netpol=0s'], '--health-window=netpol=0s: the window must be a whole number of milliseconds, at least 1ms'],
    [['--enable-ipv4=false'], 'at least one of --enable-ipv4 and --enable-ipv6 must be true'],
    [['--metrics-path=metrics'], '--metrics-path must be a URL path such as /metrics'],
    [['--metrics-path=/metrics?x=1'], '--metrics-path must be a URL path such as /metrics (no query, fragment or spaces), got "/metrics?x=1"'],
    [['--metrics-path=/a b'], '--metrics-path must be a URL path'],
    [['--health-addr=localhost:1'], '--health-addr must be an IP address, or empty for every address, got "localhost:1"'],
    [['--metrics-addr=10.0.0.256'], '--metrics-addr must be an IP address'],
    [['--metrics-port=20244', '--metrics-addr=127.0.0.1'], '--metrics-port and --health-port are both 20244: then --metrics-addr must equal --health-addr'],
    [['--metrics-port=20244', '--metrics-path=/healthz'], '--metrics-path /healthz collides with the health endpoints'],
    [['--enable-explain'], '--enable-explain serves /explain on the metrics server: set --metrics-port too'],
    [['--enable-explain', '--metrics-port=20245', '--metrics-path=/explain'], '--metrics-path /explain collides with --enable-explain'],
    [['--service-node-port-range=30000'], '--service-node-port-range "30000": expected a port range such as 30000-32767'],
    [['--service-node-port-range=32767-30000'], 'the first port must be lower than the second'],
    [['--service-node-port-range=30000-70000'], 'ports must be at most 65535'],
    [['--service-cluster-ip-range=10.96.0.0/33'], '--service-cluster-ip-range "10.96.0.0/33" is not a CIDR'],
    // Go's net.ParseCIDR refuses each (ipaddr.js read the octal one as 8.96.0.0/12).
    [['--service-cluster-ip-range=010.96.0.0/12'], '--service-cluster-ip-range "010.96.0.0/12" is not a CIDR'],
    [['--service-cluster-ip-range=10.96.0.0/012'], '--service-cluster-ip-range "10.96.0.0/012" is not a CIDR'],
    [['--service-cluster-ip-range=fd00::%eth0/108'], '--service-cluster-ip-range "fd00::%eth0/108" is not a CIDR'],
    [['--metrics-addr=010.0.0.1'], '--metrics-addr must be an IP address'],
    [['--service-cluster-ip-range=10.96.0.0/12,fd00::/108,10.0.0.0/8'], '--service-cluster-ip-range takes at most 2 ranges'],
    [['--service-external-ip-range=example.com'], '--service-external-ip-range "example.com" is not a CIDR'],
    [['--loadbalancer-ip-range=10.0.0.0/33'], 'invalid --loadbalancer-ip-range "10.0.0.0/33"'],
    [['--loadbalancer-ip-range=10.0.0.0/24,10.0.0.128/25'], 'invalid --loadbalancer-ip-range "10.0.0.128/25": overlaps 10.0.0.0/24'],
    [['--bgp-holdtime=1s'], '--bgp-holdtime must be from 3s to 18h12m16s, got 1s'],
    [['--bfd-detection-multiplier=0'], '--bfd-detection-multiplier must be from 1 to 255, got 0'],
    [['--overlay-type=partial'], '--overlay-type must be subnet or full'],
  ])('refuses %j at start, naming the flag', (argv, message) => {
    expect(refusal(argv)).toContain(message);
  });

  it('reports every bad value at once', () => {
    const stderr = refusal(['--ipvs-sync-period=0s', '--metrics-path=x', '--health-addr=nope']);
    expect(stderr.match(/^error: /gm)).toHaveLength(3);
  });

  it('accepts the longest durations Go does: timers cope with them (see the controller tests)', () => {
    expect(config(['--loadbalancer-sync-period=720h']).loadbalancer.syncPeriodMs).toBe(720 * 3_600_000);
    expect(config(['--cache-sync-timeout=720h']).cacheSyncTimeoutMs).toBe(720 * 3_600_000);
  });
});

describe('help and version', () => {
  it('prints every flag with its default in pflag layout, marks what this build lacks, and exits 0', () => {
    const result = parseFlags(['--help'], {});
    expect(result).toMatchObject({ ok: false, exitCode: 0, stderr: '' });
    const help = result.ok ? '' : result.stdout;
    expect(help).toBe(helpText());
    expect(parseFlags(['-h'], {})).toEqual(result);
    for (const name of Object.keys(FLAGS)) expect(help).toContain(`--${name}`);
    expect(help).toMatch(/^ {6}--iptables-sync-period duration +The delay .* \(default 5m0s\)$/m);
    expect(help).toMatch(/^ {6}--health-port uint16 +Health check port, 0 = Disabled \(default 20244\)$/m);
    expect(help).toMatch(/^ {2}-v, --v string +log level for V logs \(default "0"\)$/m);
    expect(help).toMatch(/^ {6}--enable-bfd +Enable BFD for GoBGP \[not implemented in this build\]$/m);
    expect(help).toMatch(/--health-window controller=duration +Health window of one controller \(netpol, proxy, routing-bgp, route-sync, lballoc\)/);
    // The names are the controllers' own (the `controller` label and health check name).
    for (const name of [NETPOL_CONTROLLER, LBALLOC_CONTROLLER]) expect(FLAGS['health-window'].usage).toMatch(new RegExp(`[( ]${name}[,)]`));
  });

  it('prints the version', () => {
    expect(parseFlags(['--version'], {})).toMatchObject({ ok: false, exitCode: 0, stdout: '0.1.0\n' });
    expect(parseFlags(['-V'], {})).toMatchObject({ ok: false, exitCode: 0, stdout: '0.1.0\n' });
  });
});

describe('unsupportedSettings', () => {
  const catalog: PluginCatalog = { firewall: () => [], loadbalancer: () => [] };
  const check = (argv: string[], given: PluginCatalog = catalog) => {
    const { config: c, values } = parsed(argv);
    return unsupportedSettings(c, values, given).map((u) => u.message);
  };
  it('accepts every flag at its default, written out or not', () => {
    const base = ['--run-service-proxy=false', '--run-router=false'];
    expect(check(base)).toEqual([]);
    const allDefaults = KUBE_ROUTER_OPTIONS.filter(([name]) => !['help', 'version', 'run-service-proxy', 'run-router'].includes(name))
      .map(([name, , , defaultText]) => `--${name}=${defaultText}`);
    expect(check([...base, ...allDefaults])).toEqual([]);
  });

  it('refuses an enabled feature without a plugin, naming its flag', () => {
    expect(check([])).toEqual([
      '--run-service-proxy: this build has no plugin for service-proxy; disable it with --run-service-proxy=false',
      '--run-router: this build has no plugin for router; disable it with --run-router=false',
    ]);
  });

  it('refuses a flag that no plugin implements once set, only while its feature runs', () => {
    const catalogWithRouter: PluginCatalog = { ...catalog, router: () => [], 'service-proxy': () => [] };
    expect(check(['--enable-bfd', '--bfd-port=4000'], catalogWithRouter)).toEqual([
      '--bfd-port=4000: not implemented by the router plugins of this build (only its default 3784 is accepted)',
      '--enable-bfd=true: not implemented by the router plugins of this build (only its default false is accepted)',
    ]);
    expect(check(['--enable-bfd', '--run-router=false'], catalogWithRouter)).toEqual([]);
    expect(check(['--enable-pprof', '--run-router=false', '--run-service-proxy=false'])).toEqual([
      '--enable-pprof=true: not implemented by the agent of this build (only its default false is accepted)',
    ]);
  });

  it('accepts the value that says what this build does: --enable-overlay=false (kube-router\'s only-advertise-routes DaemonSet sets it)', () => {
    const catalogWithRouter: PluginCatalog = { ...catalog, router: () => [], 'service-proxy': () => [] };
    expect(check(['--enable-overlay=false'], catalogWithRouter)).toEqual([]);
    expect(check(['--enable-overlay=true'], catalogWithRouter)).toEqual([]);
    expect(check(['--overlay-type=full'], catalogWithRouter)).toEqual([
      '--overlay-type=full: not implemented by the router plugins of this build (only its default subnet is accepted)',
    ]);
    expect(helpText()).toMatch(/--enable-overlay .*\[not implemented in this build: it does what false says\]/);
  });

  it('does not name the flags of a feature that is missing altogether: the feature says it', () => {
    expect(check(['--run-router=false', '--hairpin-mode'])).toEqual([
      '--run-service-proxy: this build has no plugin for service-proxy; disable it with --run-service-proxy=false',
    ]);
  });

  it('needs no feature for --cleanup-config, which cleans up what the build has', () => {
    expect(check(['--cleanup-config'])).toEqual([]);
  });

  it('refuses an IPVS-only flag set while the nftables proxy is chosen, and only then', () => {
    const withProxy: PluginCatalog = { ...catalog, 'service-proxy': () => [] };
    const base = ['--run-router=false', '--use-nftables-for-service-proxy'];
    // The flags both proxies have are taken; so are IPVS-only flags written out at their defaults (kube-router's manifests),
    // and --hairpin-mode at either value (the nftables proxy hairpins every Service).
    expect(check([...base, '--hairpin-mode', '--masquerade-all', '--ipvs-permit-all=true', '--service-udp-timeout=0s'], withProxy)).toEqual([]);
    expect(check([...base, '--ipvs-graceful-termination', '--excluded-cidrs=10.0.0.0/8', '--service-udp-timeout=30s'], withProxy)).toEqual([
      '--excluded-cidrs=10.0.0.0/8: an IPVS setting that the nftables service proxy (--use-nftables-for-service-proxy) has no counterpart for (only its default "" is accepted with it)',
      '--ipvs-graceful-termination=true: an IPVS setting that the nftables service proxy (--use-nftables-for-service-proxy) has no counterpart for (only its default false is accepted with it)',
      '--service-udp-timeout=30s: an IPVS setting that the nftables service proxy (--use-nftables-for-service-proxy) has no counterpart for (only its default 0s is accepted with it)',
    ]);
    // On IPVS they are what they say; without the proxy they do not matter.
    expect(check(['--run-router=false', '--ipvs-graceful-termination'], withProxy)).toEqual([]);
    expect(check([...base, '--run-service-proxy=false', '--ipvs-graceful-termination'], withProxy)).toEqual([]);
  });

});

describe('plugin catalog', () => {
  const firewall = testPlugin({ name: 'netpol-test' });
  const routes = testPlugin({ name: 'route-sync-test' });

  it('maps enabled features to plugins, with options from the flags', () => {
    const c = config(['--run-service-proxy=false', '--run-router=false', '--iptables-sync-period=1m']);
    const entries = pluginsForConfig(c, {
      firewall: (cfg) => [{ plugin: firewall, options: { syncPeriodMs: cfg.firewall.syncPeriodMs } }],
      router: () => [{ plugin: routes }],
    });
    expect(entries).toEqual([{ plugin: firewall, options: { syncPeriodMs: 60_000 } }]);
  });

  it('joins a plugin that two features share once', () => {
    const c = config(['--run-firewall=false']);
    const entries = pluginsForConfig(c, { 'service-proxy': () => [{ plugin: routes }], router: () => [{ plugin: routes }] });
    expect(entries).toEqual([{ plugin: routes }]);
  });

  it('--use-nftables-for-service-proxy makes the reference catalog\'s proxy proxy-nftables, with the proxy flags both share', () => {
    const proxyOf = (argv: string[]) => pluginsForConfig(config(['--run-firewall=false', '--run-router=false', ...argv]), defaultCatalog);
    expect(proxyOf([]).map((entry) => entry.plugin)).toEqual([proxyIpvsPlugin]);
    const [nftables] = proxyOf(['--use-nftables-for-service-proxy', '--enable-ipv6', '--hairpin-mode', '--ipvs-sync-period=1m']);
    expect(nftables?.plugin).toBe(proxyNftablesPlugin);
    expect(nftables?.options).toMatchObject({ enableIpv4: true, enableIpv6: true, syncPeriodMs: 60_000 });
    const [strict] = proxyOf(['--use-nftables-for-service-proxy', '--masquerade-all', '--loadbalancer-ip-range=10.255.0.0/24', '--service-external-ip-range=198.51.100.0/24']);
    // What each does to the tables is in proxy-nftables' render and model tests; the lab's LoadBalancer address answers
    // only because --loadbalancer-ip-range admits it under strict validation (lab.test.ts).
    expect(strict?.options).toMatchObject({
      masqueradeAll: true,
      strictExternalIpValidation: true,
      loadBalancerIpRanges: ['10.255.0.0/24'],
      serviceExternalIpRanges: ['198.51.100.0/24'],
    });
    // The nftables proxy hairpins every Service (no option), and has no graceful termination.
    expect(nftables?.options).not.toHaveProperty('hairpinMode');
    expect(nftables?.options).not.toHaveProperty('gracefulTermination');
  });

  it('refuses an enabled feature that no plugin provides, naming the flag to turn off', () => {
    const c = config(['--run-router=false']);
    expect(() => pluginsForConfig(c, { firewall: () => [{ plugin: firewall }] })).toThrow(MissingFeatureError);
  });
});
