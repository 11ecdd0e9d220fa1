import pino from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createRoutingMetrics } from './metrics.js';
import { pathNextHop, pathPrefix, podCidrPath } from './paths.js';
import { PodCidrAdvertiser } from './pod-cidr-advertiser.js';
import { FakeGobgpd } from './testing/fake-gobgpd.js';

const dualStack = { primary: '10.0.0.1', byFamily: { ipv4: '10.0.0.1', ipv6: 'fd00::1' } };

function harness() {
  const gobgpd = new FakeGobgpd();
  const metrics = createRoutingMetrics(new Registry());
  const advertiser = new PodCidrAdvertiser({ gobgp: () => gobgpd.client(), metrics, logger: pino({ level: 'silent' }) });
  const announced = () => gobgpd.paths.map((path) => `${pathPrefix(path)} via ${pathNextHop(path)}`).sort();
  const sent = async () => (await metrics.advertisementsSent.get()).values.find((v) => v.labels.type === 'pod-route')?.value ?? 0;
  return { gobgpd, advertiser, announced, sent };
}

describe('PodCidrAdvertiser', () => {
  it('announces each pod CIDR with the node’s address of its family, once', async () => {
    const { advertiser, announced, sent } = harness();
    await advertiser.reconcile(dualStack, ['10.1.0.0/24', 'fd00:10:1::/64']);
    await advertiser.reconcile(dualStack, ['10.1.0.0/24', 'fd00:10:1::/64']);
    expect(announced()).toEqual(['10.1.0.0/24 via 10.0.0.1', 'fd00:10:1::/64 via fd00::1']);
    expect(await sent()).toBe(2);
  });

  it('replaces a path with an old next hop, withdraws a pod CIDR no longer wanted, and leaves the VIPs alone', async () => {
    const { gobgpd, advertiser } = harness();
    gobgpd.paths.push(podCidrPath('10.1.0.0/24', '10.0.0.99'), podCidrPath('10.2.0.0/24', '10.0.0.1'), podCidrPath('10.96.0.1/32', '10.0.0.1'));
    await advertiser.reconcile(dualStack, ['10.1.0.0/24']);
    // gobgpd replaces a local path of the same prefix: no withdrawal first, no moment without a route.
    expect(gobgpd.calls).toEqual(['add-path 10.1.0.0/24', 'delete-path 10.2.0.0/24']);
  });

  it('a pod CIDR of a family the node has no address of fails; the others are announced', async () => {
    const { advertiser, announced } = harness();
    const v4only = { primary: '10.0.0.1', byFamily: { ipv4: '10.0.0.1' } };
    await expect(advertiser.reconcile(v4only, ['10.1.0.0/24', 'fd00:10:1::/64'])).rejects.toThrow(
      /pod-cidr\/fd00:10:1::\/64: node has no ipv6 address to announce/,
    );
    expect(announced()).toEqual(['10.1.0.0/24 via 10.0.0.1']);
  });

  it('a family whose RIB cannot be listed fails, and the other is still reconciled', async () => {
    const { gobgpd, advertiser, announced } = harness();
    const client = gobgpd.client();
    const list = client.listGlobalPaths;
    client.listGlobalPaths = (afi) => (afi === 'AFI_IP6' ? Promise.reject(new Error('unavailable')) : list(afi));
    gobgpd.client = () => client;
    await expect(advertiser.reconcile(dualStack, ['10.1.0.0/24', 'fd00:10:1::/64'])).rejects.toThrow(/advertisements\/ipv6: unavailable/);
    expect(announced()).toEqual(['10.1.0.0/24 via 10.0.0.1']);
  });
});
