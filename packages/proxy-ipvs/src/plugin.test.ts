import { describe, expect, it } from 'vitest';
import { proxyIpvsOptions } from './options.js';
import { createProxyIpvsPlugin, proxyIpvsPlugin } from './plugin.js';

describe('proxyIpvsPlugin.tools', () => {
  it('names the iptables binaries of each enabled family and of the chosen backend', () => {
    const tools = proxyIpvsPlugin.tools?.(proxyIpvsOptions.parse({ enableIpv4: false, iptablesBackend: 'nft' }));
    expect(tools).toEqual(['ipvsadm', 'ipset', 'ip', 'sysctl', 'ip6tables-nft-save', 'ip6tables-nft-restore']);
    expect(proxyIpvsPlugin.tools?.(proxyIpvsOptions.parse({}))).toContain('iptables-restore');
  });

  it('names none when a test runner stands in for the tools', () => {
    const runner = { run: () => Promise.reject(new Error('unused')) };
    expect(createProxyIpvsPlugin({ runner }).tools?.(proxyIpvsOptions.parse({}))).toEqual([]);
  });
});
