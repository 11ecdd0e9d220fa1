import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { familiesOf, routedAddresses } from './local-node.js';
import { meshNode } from './testing/nodes.js';

const dualStack: V1Node = { ...meshNode('node-1', '10.0.0.1'), status: { addresses: [{ type: 'InternalIP', address: '10.0.0.1' }, { type: 'InternalIP', address: 'fd00::1' }] } };

function read(node: V1Node = dualStack, enabled?: { ipv4: boolean; ipv6: boolean }) {
  const warnings: string[] = [];
  try {
    return { addresses: routedAddresses(node, enabled, (_n, reason, message) => warnings.push(`${reason}: ${message}`)), warnings };
  } catch (error) {
    return { error: (error as Error).message, warnings };
  }
}

describe('routedAddresses', () => {
  it('keeps only the enabled families, as kube-router’s node view', () => {
    expect(read(dualStack, { ipv4: true, ipv6: false }).addresses).toEqual({ primary: '10.0.0.1', byFamily: { ipv4: '10.0.0.1' } });
    expect(read(dualStack).addresses?.byFamily).toEqual({ ipv4: '10.0.0.1', ipv6: 'fd00::1' });
  });

  it('a Node without a usable address, or without an enabled family, fails with a Warning saying why', () => {
    expect(read(meshNode('node-1', 'nope'))).toEqual({
      error: expect.stringContaining('does not parse'),
      warnings: [expect.stringMatching(/^InvalidNodeAddress: cannot route pods: .*does not parse/)],
    });
    expect(read(meshNode('node-1', '10.0.0.1'), { ipv4: true, ipv6: true })).toEqual({
      error: 'node node-1: IPv6 was enabled (--enable-ipv6), but no IPv6 address was found on the node',
      warnings: ['InvalidNodeAddress: cannot route pods: IPv6 was enabled (--enable-ipv6), but no IPv6 address was found on the node'],
    });
  });
});

describe('familiesOf', () => {
  it('lists IPv4 first', () => {
    expect(familiesOf({ primary: 'fd00::1', byFamily: { ipv6: 'fd00::1', ipv4: '10.0.0.1' } })).toEqual(['ipv4', 'ipv6']);
    expect(familiesOf({ primary: 'fd00::1', byFamily: { ipv6: 'fd00::1' } })).toEqual(['ipv6']);
  });
});
