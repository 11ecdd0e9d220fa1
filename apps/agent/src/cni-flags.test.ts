import { describe, expect, it } from 'vitest';
import { routingBgpPlugin } from '@kube-router/routing-bgp';
import { routingBgpOptions } from './catalog.js';
import type { AgentConfig } from './config.js';
import { parseFlags } from './parse-flags.js';

function config(argv: string[], env: NodeJS.ProcessEnv = {}): AgentConfig {
  const result = parseFlags(argv, env);
  if (!result.ok) throw new Error(`refused: ${result.stderr}`);
  return result.config;
}

// What the routing-bgp plugin does with them is tested there (pod-network.real.test.ts, with the real CNI plugins).
describe('--enable-cni, --auto-mtu and KUBE_ROUTER_CNI_CONF_FILE', () => {
  it("take kube-router's defaults: on, and /etc/cni/net.d/10-kuberouter.conf", () => {
    const options = routingBgpPlugin.options.parse(routingBgpOptions(config([])));
    expect(options).toMatchObject({ enableCni: true, autoMtu: true, cniConfFile: '/etc/cni/net.d/10-kuberouter.conf' });
  });

  it("read the CNI file from the environment, as kube-router's DaemonSets set it (an empty value is unset)", () => {
    const conflist = '/etc/cni/net.d/10-kuberouter.conflist';
    expect(routingBgpOptions(config([], { KUBE_ROUTER_CNI_CONF_FILE: conflist }))).toMatchObject({ cniConfFile: conflist });
    expect(routingBgpOptions(config([], { KUBE_ROUTER_CNI_CONF_FILE: '' }))).not.toHaveProperty('cniConfFile');
  });

  it('turn off as flags; without --enable-cni the CNI file is not read, so a bad one refuses nothing', () => {
    const options = routingBgpOptions(config(['--enable-cni=false', '--auto-mtu=false'], { KUBE_ROUTER_CNI_CONF_FILE: 'net.d/x.conf' }));
    expect(options).toMatchObject({ enableCni: false, autoMtu: false });
    expect(options).not.toHaveProperty('cniConfFile');
    expect(() => routingBgpPlugin.options.parse(options)).not.toThrow();
  });

  it('refuse a relative CNI file path at start, naming the option', () => {
    const options = routingBgpOptions(config([], { KUBE_ROUTER_CNI_CONF_FILE: 'net.d/x.conf' }));
    expect(() => routingBgpPlugin.options.parse(options)).toThrow('cniConfFile');
  });
});
