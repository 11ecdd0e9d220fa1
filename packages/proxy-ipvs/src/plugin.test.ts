import { describe, expect, it } from 'vitest';
import { proxyIpvsOptions } from './options.js';
import { createProxyIpvsPlugin, proxyIpvsPlugin } from './plugin.js';

describe('proxyIpvsPlugin.tools', () => {
  it('names the iptables binaries of each enabled family and of the chosen backend', () => {
    const tools = proxyIpvsPlugin.tools?.(proxyIpvsOptions.parse({ enableIpv4: false, enableIpv6: true, iptablesBackend: 'nft' }));
    expect(tools).toEqual(['ipvsadm', 'ipset', 'ip', 'bridge', 'sysctl', 'conntrack', 'ip6tables-nft-save', 'ip6tables-nft-restore']);
    expect(proxyIpvsPlugin.tools?.(proxyIpvsOptions.parse({}))).toContain('iptables-restore');
  });

  it('needs IPVS in the kernel, found by /proc/net/ip_vs, but not when a test runner stands in', () => {
    expect(proxyIpvsPlugin.kernelFeatures?.(proxyIpvsOptions.parse({}))).toEqual([{ name: 'IPVS (ip_vs)', path: '/proc/net/ip_vs' }]);
    const runner = { run: () => Promise.reject(new Error('unused')) };
    expect(createProxyIpvsPlugin({ runner }).kernelFeatures?.(proxyIpvsOptions.parse({}))).toEqual([]);
  });

  it('names none when a test runner stands in for the tools', () => {
    const runner = { run: () => Promise.reject(new Error('unused')) };
    expect(createProxyIpvsPlugin({ runner }).tools?.(proxyIpvsOptions.parse({}))).toEqual([]);
  });
});
