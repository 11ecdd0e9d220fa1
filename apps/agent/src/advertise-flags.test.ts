import { describe, expect, it } from 'vitest';
import { routingBgpPlugin } from '@kube-router/routing-bgp';
import { routingBgpOptions } from './catalog.js';
import type { AgentConfig } from './config.js';
import { FLAGS } from './flags.js';
import { parseFlags } from './parse-flags.js';

function config(argv: string[]): AgentConfig {
  const result = parseFlags(argv, {});
  if (!result.ok) throw new Error(`refused: ${result.stderr}`);
  return result.config;
}

describe('--advertise-* and --override-nexthop', () => {
  it('default to off, as in kube-router', () => {
    expect(routingBgpOptions(config([]))).toMatchObject({
      advertiseClusterIp: false,
      advertiseExternalIp: false,
      advertiseLoadBalancerIp: false,
      advertisePodCidr: true,
      overrideNextHop: false,
    });
  });

  it('become the routing-bgp plugin options of the same names, which the plugin accepts', () => {
    const options = routingBgpOptions(
      config(['--advertise-cluster-ip', '--advertise-external-ip=true', '--advertise-loadbalancer-ip', '--advertise-pod-cidr=false', '--override-nexthop']),
    );
    expect(options).toMatchObject({
      advertiseClusterIp: true,
      advertiseExternalIp: true,
      advertiseLoadBalancerIp: true,
      advertisePodCidr: false,
      overrideNextHop: true,
    });
    expect(routingBgpPlugin.options.parse(options)).toMatchObject({ advertiseLoadBalancerIp: true, overrideNextHop: true });
  });

  it('are implemented', () => {
    for (const name of ['advertise-cluster-ip', 'advertise-external-ip', 'advertise-loadbalancer-ip', 'override-nexthop'] as const) {
      expect(FLAGS[name].implemented, name).toBe(true);
    }
  });
});

describe('--enable-ipv4 and --enable-ipv6 for the router', () => {
  it("become routing-bgp's enableIpv4 and enableIpv6, kube-router's defaults first", () => {
    expect(routingBgpPlugin.options.parse(routingBgpOptions(config([])))).toMatchObject({ enableIpv4: true, enableIpv6: false });
    expect(routingBgpOptions(config(['--enable-ipv6=true', '--enable-ipv4=false']))).toMatchObject({ enableIpv4: false, enableIpv6: true });
  });
});
