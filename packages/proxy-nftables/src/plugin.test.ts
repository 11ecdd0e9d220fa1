import { RecordingRunner } from '@kube-router/netfilter';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { proxyNftablesOptions } from './options.js';
import { createProxyNftablesPlugin, proxyNftablesPlugin } from './plugin.js';

describe('proxyNftablesPlugin', () => {
  it('is proxy-nftables, names nft and conntrack, none when a test runner stands in', () => {
    expect(proxyNftablesPlugin.name).toBe('proxy-nftables');
    expect(proxyNftablesPlugin.tools?.(proxyNftablesOptions.parse({}))).toEqual(['nft', 'conntrack']);
    expect(createProxyNftablesPlugin({ runner: new RecordingRunner() }).tools?.(proxyNftablesOptions.parse({}))).toEqual([]);
  });

  it('refuses unknown options and takes proxy-ipvs’s names', () => {
    expect(() => proxyNftablesOptions.parse({ ipvsPermitAll: true })).toThrow(/ipvsPermitAll/);
    expect(proxyNftablesOptions.parse({ nodePortBindOnAllIp: true, masqueradeAll: true, podCidrs: ['10.244.0.0/16'] })).toMatchObject({ syncPeriodMs: 300_000, enableIpv4: true, enableIpv6: false });
  });

  it('cleans up both tables that exist, and nothing else', async () => {
    const runner = new RecordingRunner()
      .on('nft', {})
      .on('nft -j list tables', { stdout: JSON.stringify({ nftables: [{ table: { family: 'ip', name: 'kube-router-proxy', handle: 1 } }, { table: { family: 'ip', name: 'kube-router-filter-ipv4', handle: 2 } }] }) });
    await createProxyNftablesPlugin({ runner }).cleanup?.({ nodeName: 'n', logger: pino({ level: 'silent' }) }, proxyNftablesOptions.parse({}));
    expect(runner.invocations.map((invocation) => invocation.input ?? invocation.line)).toEqual(['nft -j list tables', 'delete table ip kube-router-proxy\n']);
  });
});
