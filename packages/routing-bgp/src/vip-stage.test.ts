import type { V1Service } from '@kubernetes/client-node';
import { SyncFailures } from '@kube-router/controller';
import pino from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createRoutingMetrics } from './metrics.js';
import { pathPrefix, podCidrPath } from './paths.js';
import { FakeGobgpd } from './testing/fake-gobgpd.js';
import { meshNode } from './testing/nodes.js';
import { ServiceVipStage } from './vip-stage.js';
import type { VipAddressValidation } from './vips.js';

const me = meshNode('node-1', '10.0.0.1');

const service = (name: string, spec: V1Service['spec'], annotations: Record<string, string> = {}): V1Service => ({
  metadata: { namespace: 'default', name, annotations },
  spec: { type: 'ClusterIP', clusterIP: spec?.clusterIPs?.[0], ...spec },
});

function harness(services: V1Service[], options: { synced?: boolean; validation?: VipAddressValidation } = {}) {
  const gobgpd = new FakeGobgpd();
  const warnings: string[] = [];
  const metrics = createRoutingMetrics(new Registry());
  const stage = new ServiceVipStage({
    nodeName: 'node-1',
    cluster: {
      services: { list: () => services, hasSynced: () => options.synced ?? true },
      endpointSlices: { listForService: () => [], hasSynced: () => true },
      warnService: (s, reason, message) => warnings.push(`${s.metadata?.name} ${reason}: ${message}`),
    },
    flags: { advertiseClusterIp: true, advertiseExternalIp: true, advertiseLoadBalancerIp: false },
    ...(options.validation && { validation: options.validation }),
    gobgp: () => gobgpd.client(),
    metrics,
    logger: pino({ level: 'silent' }),
  });
  const plan = () => {
    const failures = new SyncFailures();
    return { vips: stage.plan(me, failures), failures: failures.list.map((f) => f.object) };
  };
  return { gobgpd, warnings, stage, plan, metrics };
}

describe('ServiceVipStage', () => {
  it('plans nothing (and says so) until Services and EndpointSlices are listed: an empty cache withdraws no VIP', () => {
    expect(harness([service('web', { clusterIPs: ['10.96.0.1'] })], { synced: false }).plan()).toEqual({ vips: undefined, failures: ['vip-advertisement'] });
  });

  it('a Service with a bad annotation: a Warning and a failure; a refused address: a Warning only', () => {
    const { plan, warnings } = harness(
      [
        service('web', { clusterIPs: ['10.96.0.1'], externalIPs: ['192.0.2.7'] }),
        service('odd', { clusterIPs: ['10.96.0.2'] }, { 'kube-router.io/service.advertise.clusterip': 'maybe' }),
      ],
      { validation: { externalIpRanges: [], loadBalancerIpRanges: [], clusterIpRanges: ['10.96.0.0/12'] } },
    );
    const { vips, failures } = plan();
    expect(vips).toEqual(new Set(['10.96.0.1/32', '10.96.0.2/32']));
    expect(failures).toEqual(['service/default/odd']);
    expect(warnings).toEqual([expect.stringMatching(/^odd InvalidAnnotation:/), expect.stringMatching(/^web InvalidServiceAddress: externalip 192.0.2.7 is not announced/)]);
  });

  it('announces and withdraws with the node’s address, counting each, and lists gobgpd again after it restarted', async () => {
    const { gobgpd, stage, metrics } = harness([]);
    const podCidrs = new Set(['10.1.0.0/24']);
    await stage.reconcile(new Set(['10.96.0.1/32']), podCidrs, { ipv4: '10.0.0.1' });
    expect(gobgpd.paths.map(pathPrefix)).toEqual(['10.96.0.1/32']);
    expect(await stage.announced(podCidrs)).toEqual(new Set(['10.96.0.1/32']));
    await stage.reconcile(new Set(), podCidrs, { ipv4: '10.0.0.1' });
    expect(gobgpd.paths).toEqual([]);
    const counts = Object.fromEntries((await metrics.advertisementsSent.get()).values.map((v) => [v.labels.type, v.value]));
    expect(counts).toEqual({ 'advertise-vip': 1, 'withdraw-vip': 1 });
    // What the stage believes announced is kept until gobgpd restarts; then its RIB is listed again.
    gobgpd.paths.push(podCidrPath('10.96.0.5/32', '10.0.0.1'));
    expect(await stage.announced(podCidrs)).toEqual(new Set());
    stage.forget();
    expect(await stage.announced(podCidrs)).toEqual(new Set(['10.96.0.5/32']));
  });
});
