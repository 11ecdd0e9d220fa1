import { ServiceRegistry } from '@kube-router/controller';
import type { PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { namespace, pod, policy } from '../testing/fixtures.js';
import { createNetpolController } from './controller.js';
import type { NetpolDataplane, NodeApplied } from './dataplane.js';
import { NetpolSyncMetrics } from './metrics.js';
import type { NetpolSources } from './sources.js';

/** A node render: the policies it fails closed. */
type FakeNode = { readonly failed: readonly string[] };

/** A dataplane that writes nothing and records what the controller asked of it, in order. */
function fakeDataplane(metrics: NetpolSyncMetrics, refuse: () => readonly string[], node: () => Partial<NodeApplied> = () => ({})) {
  const calls: string[] = [];
  const dataplane: NetpolDataplane<{ readonly id: string }, FakeNode> = {
    metrics,
    renderPolicy: (compiled) => ({ id: compiled.id }),
    renderNode: (_model, { failedPolicies }) => ({ failed: [...failedPolicies].sort() }),
    async prepare({ full }) {
      calls.push(`prepare full=${full}`);
    },
    async applyPolicies(policies, assumed) {
      calls.push(`policies ${policies.map((p) => p.id).join(',')} node failing [${assumed.failed}]`);
      return { failedPolicies: new Map(refuse().map((id) => [id, new Error(`${id} refused`)])) };
    },
    async applyNode(rendered) {
      calls.push(`node failing [${rendered.failed}]`);
      return { enforcing: true, failures: new Map(), written: { chainsWritten: 1 }, ...node() };
    },
    async removeLeftovers(_sync, enforcing) {
      calls.push(`leftovers enforcing=${enforcing}`);
    },
    counts: () => ({ chains: 3, sets: 2 }),
    takeDrift: () => ({}),
  };
  return { dataplane, calls };
}

function context(): PluginContext {
  return {
    nodeName: 'node-a',
    logger: pino({ level: 'silent' }),
    metrics: new AgentMetrics({ collectDefaultMetrics: false }),
    health: new HealthRegistry({ defaultGraceMs: 5_000 }),
    services: new ServiceRegistry(),
  };
}

const sources = (synced = true): NetpolSources => ({
  pods: () => [pod('web/server', { ips: ['10.0.0.2'], labels: { app: 'server' } })],
  namespaces: () => [namespace('web')],
  policies: () => [policy('web/a', { podSelector: {}, ingress: [{}] }), policy('web/b', { podSelector: {}, ingress: [{}] })],
  hasSynced: () => synced,
  onChange: () => () => undefined,
  warnPolicy: () => undefined,
});

const OPTIONS = { defaultDeny: false, syncPeriodMs: 60_000, minSyncIntervalMs: undefined, syncTimeoutMs: undefined };

describe('createNetpolController', () => {
  it('writes the node in a second phase with the policies the first refused failed closed, and keeps them closed in the next sync', async () => {
    const ctx = context();
    let refused: string[] = ['web/b'];
    const { dataplane, calls } = fakeDataplane(new NetpolSyncMetrics(ctx.metrics.registry), () => refused);
    const controller = createNetpolController(ctx, { sources: sources() }, OPTIONS, dataplane);

    const first = await controller.runObservedSync('initial');
    expect(first.ok).toBe(false);
    expect(String(first.ok ? '' : first.error)).toContain('policy/web/b');
    refused = [];
    expect((await controller.runObservedSync('cluster changed')).ok).toBe(true);
    expect(calls).toEqual([
      'prepare full=true',
      'policies web/a,web/b node failing []',
      'node failing [web/b]',
      'leftovers enforcing=true',
      // Still failed closed while its policy goes in, let out once it went in.
      'prepare full=false',
      'policies web/a,web/b node failing [web/b]',
      'node failing []',
      'leftovers enforcing=true',
    ]);
  });

  it('joins the node phase failures, counts the objects and the failed policies', async () => {
    const ctx = context();
    const metrics = new NetpolSyncMetrics(ctx.metrics.registry);
    const { dataplane, calls } = fakeDataplane(metrics, () => ['web/a'], () => ({ enforcing: false, failures: new Map([['node/ipv4', new Error('refused')]]) }));
    const controller = createNetpolController(ctx, { sources: sources() }, OPTIONS, dataplane);
    const outcome = await controller.runObservedSync('periodic');
    expect(String(outcome.ok ? '' : outcome.error)).toContain('node/ipv4');
    expect(calls).toContain('leftovers enforcing=false');
    expect((await metrics.policyChains.get()).values[0]?.value).toBe(3);
    expect((await metrics.policyIpsets.get()).values[0]?.value).toBe(2);
    expect((await metrics.failedPolicies.get()).values[0]?.value).toBe(1);
    // Not written as rendered: the next sync's first phase still fails closed what failed before.
    await controller.runObservedSync('cluster changed');
    expect(calls).toContain('policies web/a,web/b node failing [web/a]');
  });

  it('compiles an event sync from the changed objects alone, and a full sync or one without known changes from the lists', async () => {
    const ctx = context();
    const metrics = new NetpolSyncMetrics(ctx.metrics.registry);
    const { dataplane, calls } = fakeDataplane(metrics, () => []);
    let pods = [pod('web/server', { ips: ['10.0.0.2'], labels: { app: 'server' } })];
    let pending: ReturnType<NonNullable<NetpolSources['takeChanges']>> = { pods: { upserted: [], deleted: [] }, namespaces: { upserted: [], deleted: [] }, policies: { upserted: [], deleted: [] } };
    let listReads = 0;
    const tracked: NetpolSources = {
      ...sources(),
      pods: () => {
        listReads++;
        return pods;
      },
      takeChanges: () => {
        const taken = pending;
        pending = { pods: { upserted: [], deleted: [] }, namespaces: { upserted: [], deleted: [] }, policies: { upserted: [], deleted: [] } };
        return taken;
      },
    };
    const controller = createNetpolController(ctx, { sources: tracked }, OPTIONS, dataplane);
    const compiles = async () => Object.fromEntries((await metrics.compiles.get()).values.map((v) => [v.labels.input, v.value]));

    expect((await controller.runObservedSync('initial')).ok).toBe(true);
    expect(await compiles()).toEqual({ changes: 0, lists: 1 });

    // A second pod: the event sync reads it from the changes, never the pod list.
    const added = pod('web/client', { ips: ['10.0.0.3'] });
    pods = [...pods, added];
    pending = { ...pending, pods: { upserted: [added], deleted: [] } };
    const readsBefore = listReads;
    expect((await controller.runObservedSync('cluster changed')).ok).toBe(true);
    expect(listReads).toBe(readsBefore);
    expect(await compiles()).toEqual({ changes: 1, lists: 1 });

    // Changes a source cannot give (too many): that event sync reads the lists.
    tracked.takeChanges = () => undefined;
    expect((await controller.runObservedSync('cluster changed')).ok).toBe(true);
    expect(await compiles()).toEqual({ changes: 1, lists: 2 });
    // A periodic sync always reads the lists.
    expect((await controller.runObservedSync('periodic')).ok).toBe(true);
    expect(await compiles()).toEqual({ changes: 1, lists: 3 });
    expect(calls.filter((call) => call.startsWith('prepare'))).toHaveLength(4);
  });

  it('refuses to program from informers that have not synced, before touching the kernel', async () => {
    const ctx = context();
    const { dataplane, calls } = fakeDataplane(new NetpolSyncMetrics(ctx.metrics.registry), () => []);
    const controller = createNetpolController(ctx, { sources: sources(false) }, OPTIONS, dataplane);
    const outcome = await controller.runObservedSync('initial');
    expect(String(outcome.ok ? '' : outcome.error)).toContain('informer caches have not synced');
    expect(calls).toEqual([]);
  });
});
