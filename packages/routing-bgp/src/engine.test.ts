import type { V1Node } from '@kubernetes/client-node';
import { messageOf, SyncFailures } from '@kube-router/controller';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { GobgpEngine, resolveRouterId, wantedListenAddresses } from './engine.js';
import { FakeGobgpd } from './testing/fake-gobgpd.js';

const logger = pino({ level: 'silent' });
const dualStack = { primary: '10.0.0.1', byFamily: { ipv4: '10.0.0.1', ipv6: 'fd00::1' } };

function engine(gobgpd: FakeGobgpd, options: { routerId?: string; gracefulRestart?: boolean } = {}) {
  return new GobgpEngine({
    apiTarget: 'unix:///nowhere',
    apiTimeoutMs: 1_000,
    client: gobgpd.client(),
    bgpPort: 1790,
    ...(options.routerId && { routerId: options.routerId }),
    ...(options.gracefulRestart && { gracefulRestart: { restartTimeSeconds: 90, deferralTimeSeconds: 360 } }),
    logger,
  });
}

describe('GobgpEngine', () => {
  it('starts BGP once: a new gobgpd gets its global config, a running one is left alone', async () => {
    const gobgpd = new FakeGobgpd();
    const bgp = engine(gobgpd, { gracefulRestart: true });
    expect(bgp.supervised).toBe(false);
    expect(await bgp.ensureBgp(dualStack, 64_512, ['10.0.0.1', 'fd00::1'])).toBe('started');
    expect(gobgpd.global).toEqual({
      asn: 64_512,
      routerId: '10.0.0.1',
      listenPort: 1790,
      listenAddresses: ['10.0.0.1', 'fd00::1'],
      gracefulRestart: { restartTimeSeconds: 90, deferralTimeSeconds: 360 },
    });
    expect(await bgp.ensureBgp(dualStack, 64_512, ['10.0.0.1'])).toBe('running');
    expect(gobgpd.global?.listenAddresses).toEqual(['10.0.0.1', 'fd00::1']);
  });

  it('refuses to run on with another ASN: gobgpd cannot change it without a restart', async () => {
    const gobgpd = new FakeGobgpd();
    await engine(gobgpd).ensureBgp(dualStack, 64_512, ['10.0.0.1']);
    await expect(engine(gobgpd).ensureBgp(dualStack, 64_513, ['10.0.0.1'])).rejects.toThrow(/runs with ASN 64512, wanted 64513/);
  });

  it('does not start BGP when the listen addresses could not be checked', async () => {
    const gobgpd = new FakeGobgpd();
    await expect(engine(gobgpd).ensureBgp(dualStack, 64_512, undefined)).rejects.toThrow(/BGP not started.*bgp-local-addresses/);
    expect(gobgpd.global).toBeUndefined();
  });

  it('fails while gobgpd does not answer', async () => {
    const gobgpd = new FakeGobgpd();
    gobgpd.failing.set('waitReady', new Error('connection refused'));
    await expect(engine(gobgpd).ensureBgp(dualStack, 64_512, ['10.0.0.1'])).rejects.toThrow('connection refused');
  });
});

describe('resolveRouterId', () => {
  it('takes --router-id, a generated one, or the node’s IPv4 address; an IPv6-only node must be told', () => {
    expect(resolveRouterId('192.0.2.9', dualStack)).toBe('192.0.2.9');
    expect(resolveRouterId(undefined, dualStack)).toBe('10.0.0.1');
    expect(resolveRouterId('generate', dualStack)).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(() => resolveRouterId(undefined, { primary: 'fd00::1', byFamily: { ipv6: 'fd00::1' } })).toThrow(/--router-id/);
  });
});

describe('wantedListenAddresses', () => {
  const withAnnotation = (value?: string): V1Node => ({
    metadata: { name: 'node-1', annotations: value === undefined ? {} : { 'kube-router.io/bgp-local-addresses': value } },
  });

  async function listen(node: V1Node, localAddresses: () => Promise<string[]> = () => Promise.resolve(['10.0.0.1', '10.0.1.1'])) {
    const failures = new SyncFailures();
    const warnings: string[] = [];
    const addresses = await wantedListenAddresses({
      node,
      addresses: dualStack,
      localAddresses,
      warn: (_node, reason, message) => warnings.push(`${reason}: ${message}`),
      failures,
    });
    return { addresses, warnings, failures: failures.list.map((f) => `${f.object}: ${messageOf(f.error)}`) };
  }

  it('listens on the node’s address of each family without the annotation, and reads no interface', async () => {
    const result = await listen(withAnnotation(), () => Promise.reject(new Error('not called')));
    expect(result).toEqual({ addresses: ['10.0.0.1', 'fd00::1'], warnings: [], failures: [] });
  });

  it('listens on the annotated addresses that this node has', async () => {
    expect((await listen(withAnnotation('10.0.1.1'))).addresses).toEqual(['10.0.1.1']);
  });

  it('a foreign address: a Warning, a failure, and the node’s own addresses', async () => {
    const result = await listen(withAnnotation('10.0.0.250'));
    expect(result.addresses).toEqual(['10.0.0.1', 'fd00::1']);
    expect(result.warnings).toEqual([expect.stringMatching(/^InvalidBgpLocalAddresses: gobgpd listens on the node's addresses 10.0.0.1, fd00::1/)]);
    expect(result.failures).toHaveLength(1);
  });

  it('interfaces that cannot be read: undefined (BGP is not started) and a failure', async () => {
    const result = await listen(withAnnotation('10.0.1.1'), () => Promise.reject(new Error('ip failed')));
    expect(result.addresses).toBeUndefined();
    expect(result.failures.join()).toContain('ip failed');
  });
});
