import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { proxyIpvsPlugin } from '@kube-router/proxy-ipvs';
import { routingBgpPlugin } from '@kube-router/routing-bgp';
import { proxyOptions, routingBgpOptions } from './catalog.js';
import type { AgentConfig } from './config.js';
import { parseFlags } from './parse-flags.js';
import { peerRoutersOfFlags } from './peer-routers.js';

const b64 = (text: string) => Buffer.from(text).toString('base64');

function config(argv: string[]): AgentConfig {
  const result = parseFlags(argv, {});
  if (!result.ok) throw new Error(`refused: ${result.stderr}`);
  return result.config;
}

function refusal(argv: string[]): string {
  const result = parseFlags(argv, {});
  if (result.ok) throw new Error(`accepted ${argv.join(' ')}`);
  return result.stderr;
}

describe('--peer-router-* flags', () => {
  let dir = '';
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'bp-passwords-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('become the routing-bgp plugin’s external peers, passwords decoded, and the plugin accepts them', () => {
    const options = routingBgpOptions(
      config([
        '--peer-router-ips=192.0.2.1,2001:db8::1',
        '--peer-router-asns=65001,4200000001',
        '--peer-router-ports=179,1790',
        `--peer-router-passwords=${b64('first')},${b64('second')}`,
        '--peer-router-multihop-ttl=3',
        '--bgp-graceful-restart',
        '--bgp-graceful-restart-time=2m',
        '--bgp-graceful-restart-deferral-time=30s',
      ]),
    );
    expect(options).toMatchObject({
      peerRouters: [
        { address: '192.0.2.1', asn: 65_001, port: 179, password: 'first' },
        { address: '2001:db8::1', asn: 4_200_000_001, port: 1790, password: 'second' },
      ],
      peerMultihopTtl: 3,
      gracefulRestart: true,
      gracefulRestartTimeSeconds: 120,
      gracefulRestartDeferralTimeSeconds: 30,
    });
    expect(() => routingBgpPlugin.options.parse(options)).not.toThrow();
    // The defaults: no peers, graceful restart off with kube-router's times.
    expect(routingBgpOptions(config([]))).toMatchObject({
      peerRouters: [],
      peerMultihopTtl: 0,
      gracefulRestart: false,
      gracefulRestartTimeSeconds: 90,
      gracefulRestartDeferralTimeSeconds: 360,
    });
  });

  it('keeps a blank password item, as pflag does: kube-router documents `pw,,pw` for a peer without one', () => {
    const options = routingBgpOptions(
      config(['--peer-router-ips=192.0.2.1,192.0.2.2,192.0.2.3', '--peer-router-asns=65001,65002,65003', `--peer-router-passwords=${b64('a')},,${b64('c')}`]),
    );
    expect(options.peerRouters?.map((p) => p.password)).toEqual(['a', undefined, 'c']);
    // The typed lists refuse a blank item, as pflag's uintSlice and ipSlice do.
    expect(refusal(['--peer-router-asns=65001,,65003'])).toContain('--peer-router-asns');
    expect(refusal(['--peer-router-ips=192.0.2.1,,192.0.2.3'])).toContain('--peer-router-ips');
  });

  it('reads the passwords file when --peer-router-passwords is not given; the flag wins over it', async () => {
    const file = join(dir, 'passwords');
    await writeFile(file, `${b64('from file')},${b64('second')}\n`);
    const argv = ['--peer-router-ips=192.0.2.1,192.0.2.2', '--peer-router-asns=65001,65002', `--peer-router-passwords-file=${file}`];
    expect(routingBgpOptions(config(argv)).peerRouters?.map((p) => p.password)).toEqual(['from file', 'second']);
    expect(routingBgpOptions(config([...argv, `--peer-router-passwords=${b64('a')},${b64('b')}`])).peerRouters?.map((p) => p.password)).toEqual(['a', 'b']);
  });

  it('reads --peer-router-asns and -ports as pflag\'s uintSlice does: decimal, a leading zero is not octal', () => {
    const options = routingBgpOptions(config(['--peer-router-ips=192.0.2.1', '--peer-router-asns=065000', '--peer-router-ports=0179']));
    expect(options.peerRouters).toEqual([{ address: '192.0.2.1', asn: 65_000, port: 179 }]);
    for (const asns of ['0x10', '1_000', '-1']) expect(refusal(['--peer-router-ips=192.0.2.1', `--peer-router-asns=${asns}`])).toContain('--peer-router-asns');
  });

  it.each([
    [['--peer-router-ips=192.0.2.1,192.0.2.2', '--peer-router-asns=65001'], '--peer-router-asns: has 1 ASNs for 2 peer addresses'],
    [['--peer-router-ips=192.0.2.1', '--peer-router-asns=64000'], '--peer-router-asns (entry 1, for 192.0.2.1): ASN 64000 is reserved'],
    [['--peer-router-ips=192.0.2.1', '--peer-router-asns=65001', '--peer-router-ports=0'], '--peer-router-ports (entry 1, for 192.0.2.1): "0" is not a port'],
    [['--peer-router-ips=192.0.2.1', '--peer-router-asns=65001', '--peer-router-ports=179,180'], '--peer-router-ports: has 2 entries for 1 peers'],
    [['--peer-router-ips=192.0.2.1', '--peer-router-asns=65001', '--peer-router-passwords=secret!'], '--peer-router-passwords (entry 1, for 192.0.2.1): the password is not base64'],
    [['--peer-router-ips=192.0.2.1', '--peer-router-asns=65001', '--peer-router-passwords-file=/nonexistent/bp-passwords'], '--peer-router-passwords-file /nonexistent/bp-passwords: ENOENT'],
    [['--peer-router-ips=192.0.2.1,192.0.2.2,::ffff:192.0.2.1', '--peer-router-asns=65001,65002,65003'], '--peer-router-ips: 192.0.2.1 is listed twice (entries 1 and 3)'],
    [['--bgp-graceful-restart', '--bgp-graceful-restart-time=4096s'], '--bgp-graceful-restart-time must be greater than 0 and at most 4095s'],
    [['--bgp-graceful-restart', '--bgp-graceful-restart-time=0s'], '--bgp-graceful-restart-time must be greater than 0'],
    [['--bgp-graceful-restart', '--bgp-graceful-restart-deferral-time=0s'], '--bgp-graceful-restart-deferral-time must be greater than 0'],
    [['--bgp-graceful-restart', '--bgp-graceful-restart-deferral-time=18h1s'], '--bgp-graceful-restart-deferral-time must be greater than 0 and at most 18h'],
  ])('refuses %j at start, naming the flag', (argv, message) => {
    expect(refusal(argv)).toContain(message);
  });

  it('checks the graceful restart times only with --bgp-graceful-restart on, as kube-router', () => {
    expect(config(['--bgp-graceful-restart-time=0s', '--bgp-graceful-restart-deferral-time=19h']).routing.bgp.gracefulRestart).toBe(false);
  });

  it('refuses to build the plugin options when the passwords file became unreadable after the start checks', async () => {
    const file = join(dir, 'vanishing');
    await writeFile(file, `${b64('secret')}\n`);
    const checked = config(['--peer-router-ips=192.0.2.1', '--peer-router-asns=65001', `--peer-router-passwords-file=${file}`]);
    await rm(file);
    expect(() => routingBgpOptions(checked)).toThrow(/external BGP peers cannot be configured: --peer-router-passwords-file .*ENOENT/);
  });

  it('passes --strict-external-ip-validation and its ranges to the router, default on as in kube-router', () => {
    expect(routingBgpOptions(config([]))).toMatchObject({ strictExternalIpValidation: true, serviceExternalIpRanges: [], loadBalancerIpRanges: [] });
    const options = routingBgpOptions(
      config(['--strict-external-ip-validation=false', '--service-external-ip-range=192.0.2.0/24', '--loadbalancer-ip-range=198.51.100.0/24']),
    );
    expect(options).toMatchObject({ strictExternalIpValidation: false, serviceExternalIpRanges: ['192.0.2.0/24'], loadBalancerIpRanges: ['198.51.100.0/24'] });
    expect(() => routingBgpPlugin.options.parse(options)).not.toThrow();
  });

  it('passes --strict-external-ip-validation and its ranges to the service proxy too, default on', () => {
    expect(proxyOptions(config([]))).toMatchObject({ strictExternalIpValidation: true, serviceExternalIpRanges: [], loadBalancerIpRanges: [] });
    const options = proxyOptions(
      config([
        '--strict-external-ip-validation=false',
        '--service-external-ip-range=192.0.2.0/24',
        '--loadbalancer-ip-range=198.51.100.0/24',
        '--service-cluster-ip-range=10.96.0.0/12',
      ]),
    );
    expect(options).toMatchObject({
      strictExternalIpValidation: false,
      serviceExternalIpRanges: ['192.0.2.0/24'],
      loadBalancerIpRanges: ['198.51.100.0/24'],
      serviceClusterIpRanges: ['10.96.0.0/12'],
    });
    expect(() => proxyIpvsPlugin.options.parse(options)).not.toThrow();
  });

  it('a password file with a bad entry names the file flag', () => {
    const { problems } = peerRoutersOfFlags(
      { ips: ['192.0.2.1'], asns: [65_001], ports: [], passwords: [], passwordsFile: '/x' },
      () => 'not base64',
    );
    expect(problems).toEqual(['--peer-router-passwords-file (entry 1, for 192.0.2.1): the password is not base64']);
  });
});
