import { describe, expect, it } from 'vitest';
import { netpolIptablesOptions } from './options.js';
import { netpolIptablesPlugin } from './plugin.js';

describe('netpolIptablesPlugin.tools', () => {
  it('names ipset and the save and restore binaries of each enabled family and of the chosen backend', () => {
    const tools = netpolIptablesPlugin.tools?.(netpolIptablesOptions.parse({ enableIpv6: true, iptablesBackend: 'legacy' }));
    expect(tools).toEqual(['ipset', 'iptables-legacy-save', 'iptables-legacy-restore', 'ip6tables-legacy-save', 'ip6tables-legacy-restore']);
  });
});
