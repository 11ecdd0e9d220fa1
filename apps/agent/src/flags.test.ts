import { describe, expect, it } from 'vitest';
import { helpText, parseFlags, type AgentConfig } from './flags.js';
import { MissingFeatureError, pluginsForConfig } from './catalog.js';
import { testPlugin } from './testing/test-plugins.js';

function config(argv: string[], env: NodeJS.ProcessEnv = {}): AgentConfig {
  const result = parseFlags(argv, env);
  if (!result.ok) throw new Error(`flags refused: ${result.stderr}`);
  return result.config;
}

describe('parseFlags', () => {
  it("uses kube-router's defaults", () => {
    const c = config([], { NODE_NAME: 'node-1' });
    expect(c).toEqual({
      features: { firewall: true, 'service-proxy': true, router: true, loadbalancer: false },
      syncPeriodsMs: { iptables: 300_000, ipvs: 300_000, routes: 300_000, loadbalancer: 60_000 },
      health: { addr: '0.0.0.0', port: 20244 },
      metrics: { addr: '0.0.0.0', port: 0, path: '/metrics' },
      healthGraceMs: 30_000,
      healthWindowsMs: {},
      nodeName: 'node-1',
      kubeconfig: undefined,
      master: undefined,
      cacheSyncTimeoutMs: 60_000,
      verbosity: 0,
      logLevel: 'info',
      loadbalancer: { ipRanges: [], defaultClass: true },
      ipFamilies: { ipv4: true, ipv6: false },
      firewall: {
        defaultDeny: false,
        serviceClusterIpRanges: ['10.96.0.0/12'],
        serviceExternalIpRanges: [],
        nodePortRange: '30000-32767',
      },
    } satisfies AgentConfig);
  });

  it('takes the firewall flags, replacing the default service range rather than adding to it', () => {
    const c = config([
      '--netpol-default-deny',
      '--service-cluster-ip-range=10.43.0.0/16,fd00:43::/108',
      '--service-external-ip-range=192.0.2.0/24',
      '--service-node-port-range=30000:31000',
    ]);
    expect(c.firewall).toEqual({
      defaultDeny: true,
      serviceClusterIpRanges: ['10.43.0.0/16', 'fd00:43::/108'],
      serviceExternalIpRanges: ['192.0.2.0/24'],
      nodePortRange: '30000:31000',
    });
  });

  it('takes pflag booleans in every spelling', () => {
    expect(config(['--run-firewall=false']).features.firewall).toBe(false);
    expect(config(['--run-firewall=0']).features.firewall).toBe(false);
    expect(config(['--run-loadbalancer']).features.loadbalancer).toBe(true);
    expect(config(['--run-loadbalancer=true']).features.loadbalancer).toBe(true);
    expect(config(['--run-router=False', '--run-service-proxy=f']).features).toMatchObject({
      router: false,
      'service-proxy': false,
    });
    expect(config(['--enable-ipv6', '--enable-ipv4=false']).ipFamilies).toEqual({ ipv4: false, ipv6: true });
  });

  it('takes Go durations, ports, paths and names', () => {
    const c = config(
      [
        '--iptables-sync-period=30s',
        '--ipvs-sync-period',
        '1h30m',
        '--routes-sync-period=250ms',
        '--loadbalancer-sync-period=2m',
        '--cache-sync-timeout=10s',
        '--health-addr=127.0.0.1',
        '--health-port=0',
        '--metrics-addr=::',
        '--metrics-port=8080',
        '--metrics-path=/prom',
        '--hostname-override=worker-7',
        '--kubeconfig=/var/lib/kube-router/kubeconfig',
        '--master=https://10.0.0.1:6443',
        '--health-grace=10s',
        '--health-window=netpol-iptables=10m',
        '--health-window',
        'route-sync=1m',
      ],
      { NODE_NAME: 'ignored' },
    );
    expect(c.syncPeriodsMs).toEqual({ iptables: 30_000, ipvs: 5_400_000, routes: 250, loadbalancer: 120_000 });
    expect(c.cacheSyncTimeoutMs).toBe(10_000);
    expect(c.health).toEqual({ addr: '127.0.0.1', port: 0 });
    expect(c.metrics).toEqual({ addr: '::', port: 8080, path: '/prom' });
    expect(c.nodeName).toBe('worker-7');
    expect(c.kubeconfig).toBe('/var/lib/kube-router/kubeconfig');
    expect(c.master).toBe('https://10.0.0.1:6443');
    expect(c.healthGraceMs).toBe(10_000);
    expect(c.healthWindowsMs).toEqual({ 'netpol-iptables': 600_000, 'route-sync': 60_000 });
  });

  it('maps -v to a log level', () => {
    expect(config(['-v', '0']).logLevel).toBe('info');
    expect(config(['--v=2'])).toMatchObject({ verbosity: 2, logLevel: 'debug' });
    expect(config(['-v', '5']).logLevel).toBe('trace');
  });

  it('collects repeated and comma-separated load balancer ranges', () => {
    const c = config(['--loadbalancer-ip-range=10.0.0.0/24,10.0.1.0/24', '--loadbalancer-ip-range', 'fd00::/120']);
    expect(c.loadbalancer.ipRanges).toEqual(['10.0.0.0/24', '10.0.1.0/24', 'fd00::/120']);
    expect(config(['--loadbalancer-default-class=false']).loadbalancer.defaultClass).toBe(false);
  });

  it.each([
    [['--iptables-sync-period=5'], /--iptables-sync-period.*invalid duration "5": missing unit/],
    [['--ipvs-sync-period=0s'], /--ipvs-sync-period must be greater than 0, got 0s/],
    [['--health-port=70000'], /--health-port.*port number from 0 to 65535/],
    [['--run-firewall=maybe'], /--run-firewall.*expected true or false/],
    [['--enable-ipv4=false'], /at least one of --enable-ipv4 and --enable-ipv6 must be true/],
    [['--no-such-flag'], /unknown option '--no-such-flag'/],
    [['--health-window=10m'], /expected controller=duration/],
    [['--metrics-path=metrics'], /--metrics-path must start with \//],
    [['stray'], /too many arguments/],
  ])('refuses %j with exit code 2', (argv, message) => {
    const result = parseFlags(argv, {});
    expect(result).toMatchObject({ ok: false, exitCode: 2 });
    expect(result.ok ? '' : result.stderr).toMatch(message);
  });

  it('prints help with every flag and its default, and exits 0', () => {
    const result = parseFlags(['--help'], {});
    expect(result).toMatchObject({ ok: false, exitCode: 0, stderr: '' });
    const help = result.ok ? '' : result.stdout;
    expect(help).toBe(helpText());
    for (const flag of [
      '--run-firewall',
      '--run-service-proxy',
      '--run-router',
      '--run-loadbalancer',
      '--iptables-sync-period',
      '--ipvs-sync-period',
      '--routes-sync-period',
      '--loadbalancer-sync-period',
      '--health-addr',
      '--health-port',
      '--metrics-addr',
      '--metrics-port',
      '--metrics-path',
      '--hostname-override',
      '--kubeconfig',
      '--master',
      '--cache-sync-timeout',
      '-v, --v',
      '--loadbalancer-ip-range',
      '--loadbalancer-default-class',
      '--enable-ipv4',
      '--enable-ipv6',
    ]) {
      expect(help).toContain(flag);
    }
    expect(help).toMatch(/--iptables-sync-period <duration> .*\(default 5m0s\)/);
    expect(help).toMatch(/--health-port <port> .*\(default 20244\)/);
    expect(help).not.toContain('preset');
  });

  it('prints the version', () => {
    expect(parseFlags(['--version'], {})).toMatchObject({ ok: false, exitCode: 0, stdout: '0.1.0\n' });
  });
});

describe('plugin catalog', () => {
  const firewall = testPlugin({ name: 'netpol-test' });
  const routes = testPlugin({ name: 'route-sync-test' });

  it('maps enabled features to plugins, with options from the flags', () => {
    const c = config(['--run-service-proxy=false', '--run-router=false', '--iptables-sync-period=1m']);
    const entries = pluginsForConfig(c, {
      firewall: (cfg) => [{ plugin: firewall, options: { syncPeriodMs: cfg.syncPeriodsMs.iptables } }],
      router: () => [{ plugin: routes }],
    });
    expect(entries).toEqual([{ plugin: firewall, options: { syncPeriodMs: 60_000 } }]);
  });

  it('joins a plugin that two features share once', () => {
    const c = config(['--run-firewall=false']);
    const entries = pluginsForConfig(c, { 'service-proxy': () => [{ plugin: routes }], router: () => [{ plugin: routes }] });
    expect(entries).toEqual([{ plugin: routes }]);
  });

  it('refuses an enabled feature that no plugin provides, naming the flag to turn off', () => {
    const c = config(['--run-router=false']);
    expect(() => pluginsForConfig(c, { firewall: () => [{ plugin: firewall }] })).toThrow(MissingFeatureError);
    expect(() => pluginsForConfig(c, { firewall: () => [{ plugin: firewall }] })).toThrow(
      '--run-service-proxy is enabled but this build has no plugin for service-proxy. ' +
        'Disable it with --run-service-proxy=false (features available in this build: firewall).',
    );
  });
});
