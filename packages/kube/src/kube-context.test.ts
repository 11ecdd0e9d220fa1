import { ServiceRegistry } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createKubeContext, KubeServices } from './kube-context.js';
import type { KubeContext } from './kube-context.js';
import { captureLogs, leaseSpec, pod, startTestCluster, waitFor } from './testing/fixtures.js';
import type { TestCluster } from './testing/fixtures.js';

let cluster: TestCluster;
let kube: KubeContext;

beforeEach(async () => {
  cluster = await startTestCluster();
});

afterEach(async () => {
  await kube?.informers.stop();
  await cluster.close();
});

describe('KubeServices', () => {
  it('gives plugins the informers, the event recorder and leader election of the agent', async () => {
    const metrics = new AgentMetrics({ collectDefaultMetrics: false });
    const health = new HealthRegistry();
    kube = createKubeContext({
      kubeConfig: cluster.kubeConfig,
      nodeName: 'node-1',
      logger: captureLogs().logger,
      metrics,
      leaderElection: { namespace: 'kube-system', identity: 'kube-router-abcde', leaseDurationMs: 1000, renewDeadlineMs: 600, retryPeriodMs: 150 },
    });
    const services = new ServiceRegistry();
    services.provide(KubeServices, kube);
    health.addReadinessCheck('informers', kube.informers.readinessCheck);

    // What a plugin does in create(): take listers, turn changes into sync requests.
    const consumer = services.get(KubeServices);
    const localPods = consumer.informers.pods({ fieldSelector: `spec.nodeName=${consumer.nodeName}` });
    const requests: string[] = [];
    consumer.informers.onChange('pods', () => requests.push('pods'), { fieldSelector: `spec.nodeName=${consumer.nodeName}` });
    expect(health.readinessChecks()).toEqual([{ name: 'informers', ok: false, reason: expect.stringContaining('not started') }]);

    await kube.informers.start({ cacheSyncTimeoutMs: 5000 });
    expect(health.readinessChecks()).toEqual([{ name: 'informers', ok: true }]);
    cluster.server.create(pod('mine', { nodeName: 'node-1' }));
    cluster.server.create(pod('theirs', { nodeName: 'node-2' }));
    await waitFor('my pod', () => localPods.list().length === 1);
    await waitFor('a sync request', () => requests.length > 0);
    expect(localPods.get('default', 'mine')).toBeDefined();

    await consumer.events.warning(localPods.get('default', 'mine')!, 'SyncFailed', 'boom');
    expect(cluster.server.list('v1', 'Event', 'default')).toHaveLength(1);

    let leading = false;
    const elector = consumer.leaderElector({ name: 'kube-router-lballoc', onStartedLeading: () => (leading = true) });
    elector.start();
    await waitFor('leadership', () => leading && elector.isLeader());
    expect(leaseSpec(cluster.server, 'kube-system', 'kube-router-lballoc')).toMatchObject({ holderIdentity: 'kube-router-abcde', leaseDurationSeconds: 1 });
    await elector.stop();

    const exposition = await metrics.registry.metrics();
    expect(exposition).toContain('kube_router_informer_watch_healthy{resource="pods{fieldSelector=spec.nodeName=node-1}"} 1');
    expect(exposition).toContain('kube_router_leader_election_is_leader{lease="kube-system/kube-router-lballoc"} 0');
  });
});
