import { describe, expect, it } from 'vitest';
import { lballocPlugin } from '@kube-router/lballoc';
import { netpolIptablesPlugin } from '@kube-router/netpol-iptables';
import { netpolNftablesPlugin } from '@kube-router/netpol-nftables';
import { proxyIpvsPlugin } from '@kube-router/proxy-ipvs';
import { routeSyncPlugin } from '@kube-router/route-sync';
import { routingBgpPlugin } from '@kube-router/routing-bgp';
import type { ControllerPlugin } from '@kube-router/controller';
import { FEATURE_FLAGS, flagOptions } from './catalog.js';
import { FLAGS, type FlagDefinition, type OptionTarget } from './flags.js';
import { parseFlags } from './parse-flags.js';

const definitions = Object.entries(FLAGS as Record<string, FlagDefinition>);
const TARGETS: Record<OptionTarget, ControllerPlugin<unknown>> = {
  netpol: netpolIptablesPlugin,
  'netpol-nftables': netpolNftablesPlugin,
  'proxy-ipvs': proxyIpvsPlugin,
  'route-sync': routeSyncPlugin,
  'routing-bgp': routingBgpPlugin,
  lballoc: lballocPlugin,
} as Record<OptionTarget, ControllerPlugin<unknown>>;

function defaultConfig() {
  const result = parseFlags([], { NODE_NAME: 'node-1' });
  if (!result.ok) throw new Error(result.stderr);
  return result.config;
}

describe('each flag declared once', () => {
  it('has a field of the configuration whenever it becomes plugin options', () => {
    for (const [name, definition] of definitions) {
      if (definition.options !== undefined) expect(definition.config, `--${name}`).toBeDefined();
    }
  });

  it("gives every option it names, so that a plugin's own default never stands in for the flag's", () => {
    const config = defaultConfig();
    for (const target of Object.keys(TARGETS) as OptionTarget[]) {
      const options = flagOptions(target, config) as Record<string, unknown>;
      for (const [name, definition] of definitions) {
        const mapping = definition.options?.[target];
        if (mapping === undefined) continue;
        if (typeof mapping === 'string') {
          expect(options, `--${name} -> ${target}`).toHaveProperty(mapping);
        } else if ((mapping.convert as (value: unknown) => unknown)(definition.default) !== undefined) {
          // Only kube-router's "unset" values (--router-id="", --cluster-asn=0) leave their option to the plugin.
          expect(options, `--${name} -> ${target}`).toHaveProperty(mapping.option);
        }
      }
    }
  });

  it("names only options that the plugins' schemas accept, with values they accept", () => {
    const config = defaultConfig();
    for (const [target, plugin] of Object.entries(TARGETS) as Array<[OptionTarget, ControllerPlugin<unknown>]>) {
      const own = target === 'netpol-nftables' ? flagOptions('netpol', config) : {};
      expect(() => plugin.options.parse({ ...own, ...flagOptions(target, config) }), target).not.toThrow();
    }
  });

  it("converts as the plugins take them: seconds, and kube-router's unset values left out", () => {
    const result = parseFlags(['--bgp-holdtime=1m', '--router-id=10.0.0.1', '--service-udp-timeout=1500ms'], {});
    if (!result.ok) throw new Error(result.stderr);
    expect(flagOptions('routing-bgp', result.config)).toMatchObject({ holdTimeSeconds: 60, routerId: '10.0.0.1' });
    expect(flagOptions('proxy-ipvs', result.config)).toMatchObject({ udpTimeoutSeconds: 2 });
    expect(flagOptions('routing-bgp', defaultConfig())).not.toHaveProperty('routerId');
    expect(flagOptions('routing-bgp', defaultConfig())).not.toHaveProperty('clusterAsn');
  });

  it('names the flag of each feature from its definition', () => {
    expect(FEATURE_FLAGS).toEqual({
      firewall: '--run-firewall',
      'service-proxy': '--run-service-proxy',
      router: '--run-router',
      loadbalancer: '--run-loadbalancer',
    });
  });
});
