import { ServiceRegistry } from '@kube-router/controller';
import type { PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { compileNetworkPolicies } from '../compiler.js';
import { namespace, NODE, pod, policy } from '../testing/fixtures.js';
import { createNetpolController } from './controller.js';
import type { NetpolDataplane } from './dataplane.js';
import { createExplainService, netpolExplainServiceKey } from './explain-service.js';
import type { AppliedModel } from './explain-service.js';
import { NetpolSyncMetrics } from './metrics.js';
import type { NetpolSources } from './sources.js';

const pods = [
  pod('web/server', { ips: ['10.0.0.2', 'fd00::2'], labels: { app: 'server' } }),
  pod('web/client', { ips: ['10.0.0.3'], labels: { app: 'client' } }),
  pod('web/v6only', { ips: ['fd00::9'] }),
  pod('web/pending', {}),
  pod('other/far', { ips: ['10.0.1.4'], node: 'node-b' }),
];
const namespaces = [namespace('web'), namespace('other')];
const policies = [policy('web/server', { podSelector: { matchLabels: { app: 'server' } }, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }], ports: [{ port: 80 }] }] })];
const applied: AppliedModel = {
  model: compileNetworkPolicies({ nodeName: NODE, pods, namespaces, policies }),
  failedPolicies: new Set(),
  appliedAt: new Date('2026-01-02T03:04:05Z'),
};

describe('the explain service', () => {
  const service = createExplainService(NODE, { pods: () => pods }, {}, () => applied);

  it('resolves pods to their addresses, names the pods behind addresses, and explains', () => {
    const result = service.explain({ from: 'web/client', to: '10.0.0.2', port: '80', protocol: 'tcp' });
    expect(result).toMatchObject({
      ok: true,
      answer: {
        node: NODE,
        appliedAt: '2026-01-02T03:04:05.000Z',
        flow: { source: '10.0.0.3', destination: '10.0.0.2', protocol: 'TCP', port: 80 },
        from: { input: 'web/client', ip: '10.0.0.3', pod: 'web/client', node: NODE },
        to: { input: '10.0.0.2', ip: '10.0.0.2', pod: 'web/server', node: NODE },
        explanation: { allowed: true, ingress: { verdict: 'allowed', rule: { policy: 'web/server', direction: 'ingress', index: 0 } } },
      },
    });
    const far = service.explain({ from: 'other/far', to: 'web/server', port: 80 });
    expect(far).toMatchObject({ ok: true, answer: { from: { pod: 'other/far', node: 'node-b' }, explanation: { allowed: false } } });
  });

  it('picks the address family both sides have', () => {
    const result = service.explain({ from: 'web/v6only', to: 'web/server', port: 80, protocol: 'UDP' });
    expect(result).toMatchObject({ ok: true, answer: { flow: { source: 'fd00::9', destination: 'fd00::2', protocol: 'UDP' } } });
  });

  it.each([
    [{ from: 'web/nobody', to: 'web/server', port: 80 }, 'from: no pod web/nobody in the cluster'],
    [{ from: 'web/pending', to: 'web/server', port: 80 }, 'from: pod web/pending has no IP address yet'],
    [{ from: 'web/client', to: 'a/b/c', port: 80 }, 'to "a/b/c" is neither an IP address nor a pod as namespace/name'],
    [{ from: '', to: 'web/server', port: 80 }, 'from is missing: give a pod (namespace/name) or an IP'],
    [{ from: 'web/client', to: 'web/server', port: undefined }, 'a destination port is needed (1-65535)'],
    [{ from: 'web/client', to: 'web/server', port: '80x' }, 'port "80x" is not an integer in 1-65535'],
    [{ from: 'web/client', to: 'web/server', port: 80, protocol: 'icmp' }, 'protocol "icmp" is not one of TCP, UDP, SCTP'],
    [{ from: 'web/client', to: 'fd00::2', port: 80 }, 'web/client (10.0.0.3) and fd00::2 (fd00::2) have no address family in common'],
  ])('answers %j with a 400 and a clear message', (request, error) => {
    expect(service.explain(request)).toEqual({ ok: false, status: 400, error });
  });

  it('says so with a 503 before the first applied sync', () => {
    const early = createExplainService(NODE, { pods: () => pods }, {}, () => undefined);
    expect(early.explain({ from: 'web/client', to: 'web/server', port: 80 })).toEqual({
      ok: false,
      status: 503,
      error: `netpol on ${NODE} has not applied a sync yet`,
    });
  });
});

describe('the explain service with --netpol-default-deny', () => {
  // Started after the last applied sync: in the cluster, not in the model nor in the kernel's local pods set.
  const later = [...pods, pod('web/new', { ips: ['10.0.0.7'] })];
  const gateway = '10.0.0.1';
  const withDefaultDeny: AppliedModel = { ...applied, defaultDeny: { podCidrs: ['10.0.0.0/24', 'fd00::/64'] } };
  const service = createExplainService(NODE, { pods: () => later }, {}, () => withDefaultDeny, (ip) => ip === gateway);

  it('says the tail chain rejects a local address that was no pod at the last sync, either direction', () => {
    expect(service.explain({ from: 'web/new', to: 'web/server', port: 80 })).toMatchObject({
      ok: true,
      answer: { from: { pod: 'web/new' }, explanation: { allowed: false, egress: { verdict: 'default-deny', policies: [] } } },
    });
    expect(service.explain({ from: 'web/client', to: '10.0.0.7', port: 80 })).toMatchObject({
      ok: true,
      answer: { to: { pod: 'web/new' }, explanation: { allowed: false, ingress: { verdict: 'default-deny' } } },
    });
    expect(service.explain({ from: 'fd00::77', to: 'web/server', port: 80 })).toMatchObject({
      ok: true,
      answer: { explanation: { allowed: false, egress: { verdict: 'default-deny' } } },
    });
  });

  it("exempts the node's own addresses and addresses outside its pod CIDRs, as the kernel does", () => {
    expect(service.explain({ from: gateway, to: 'web/server', port: 80 })).toMatchObject({
      ok: true,
      answer: { explanation: { egress: { verdict: 'not-local' }, ingress: { verdict: 'denied' } } },
    });
    expect(service.explain({ from: 'web/client', to: gateway, port: 80 })).toMatchObject({
      ok: true,
      answer: { explanation: { allowed: true, ingress: { verdict: 'not-local' } } },
    });
    expect(service.explain({ from: 'web/client', to: 'other/far', port: 80 })).toMatchObject({
      ok: true,
      answer: { explanation: { allowed: true, ingress: { verdict: 'not-local' } } },
    });
  });

  it('says not-local for the same pod when the last sync did not apply default deny', () => {
    const open = createExplainService(NODE, { pods: () => later }, {}, () => applied, () => false);
    expect(open.explain({ from: 'web/new', to: 'web/client', port: 80 })).toMatchObject({
      ok: true,
      answer: { explanation: { allowed: true, egress: { verdict: 'not-local' } } },
    });
  });
});

describe('the explain service resolving addresses', () => {
  // A finished pod keeps its IP in status after the IP went to another pod; listed first, as an informer may.
  const withFinished = [pod('web/done', { ips: ['10.0.0.3'], phase: 'Succeeded' }), pod('web/old', { ips: ['10.0.0.2'], phase: 'Failed' }), ...pods];
  const service = createExplainService(NODE, { pods: () => withFinished }, {}, () => applied);

  it('names the pod that holds an address now, not a finished one', () => {
    expect(service.explain({ from: '10.0.0.3', to: '10.0.0.2', port: 80 })).toMatchObject({
      ok: true,
      answer: { from: { pod: 'web/client' }, to: { pod: 'web/server' }, explanation: { allowed: true } },
    });
  });

  it('still resolves a finished pod the user names', () => {
    expect(service.explain({ from: 'web/done', to: 'web/server', port: 80 })).toMatchObject({
      ok: true,
      answer: { from: { input: 'web/done', ip: '10.0.0.3', pod: 'web/done' } },
    });
  });
});

describe('the netpol controller', () => {
  it('provides the explain service, answering from the model and refused policies it last applied', async () => {
    const ctx: PluginContext = {
      nodeName: NODE,
      logger: pino({ level: 'silent' }),
      metrics: new AgentMetrics({ collectDefaultMetrics: false }),
      health: new HealthRegistry({ defaultGraceMs: 5_000 }),
      services: new ServiceRegistry(),
    };
    let current = policies;
    let refuse: string[] = [];
    let nodeFails = false;
    const sources: NetpolSources = {
      pods: () => pods,
      namespaces: () => namespaces,
      policies: () => current,
      hasSynced: () => true,
      onChange: () => () => undefined,
      warnPolicy: () => undefined,
    };
    const dataplane: NetpolDataplane<{ readonly id: string }, object> = {
      metrics: new NetpolSyncMetrics(ctx.metrics.registry),
      renderPolicy: (compiled) => ({ id: compiled.id }),
      renderNode: () => ({}),
      prepare: async () => undefined,
      applyPolicies: async () => ({ failedPolicies: new Map(refuse.map((id) => [id, new Error('refused')])) }),
      applyNode: async () => ({ enforcing: !nodeFails, failures: new Map(nodeFails ? [['node/ipv4', new Error('refused')]] : []), written: {} }),
      removeLeftovers: async () => undefined,
      counts: () => ({ chains: 0, sets: 0 }),
      takeDrift: () => ({}),
    };
    const options = { defaultDeny: false, syncPeriodMs: 60_000, minSyncIntervalMs: undefined, syncTimeoutMs: undefined };
    const controller = createNetpolController(ctx, { sources }, options, dataplane);
    const service = ctx.services.get(netpolExplainServiceKey);
    const request = { from: 'web/client', to: 'web/server', port: 80 };
    expect(service.explain(request)).toMatchObject({ ok: false, status: 503 });

    expect((await controller.runObservedSync('initial')).ok).toBe(true);
    expect(service.explain(request)).toMatchObject({ ok: true, answer: { explanation: { allowed: true } } });

    current = [];
    expect(service.explain(request)).toMatchObject({ ok: true, answer: { explanation: { allowed: true } } });
    current = [policy('web/deny', { podSelector: {}, ingress: [] })];
    // The cluster changed, the kernel not yet: explain answers for the kernel.
    expect(service.explain(request)).toMatchObject({ ok: true, answer: { explanation: { allowed: true } } });
    expect((await controller.runObservedSync('cluster changed')).ok).toBe(true);
    expect(service.explain(request)).toMatchObject({
      ok: true,
      answer: { explanation: { allowed: false, ingress: { verdict: 'denied', policies: ['web/deny'] } } },
    });

    current = policies;
    refuse = ['web/server'];
    expect((await controller.runObservedSync('refused')).ok).toBe(false);
    expect(service.explain(request)).toMatchObject({
      ok: true,
      answer: { explanation: { allowed: false, ingress: { verdict: 'fail-closed', failedPolicies: ['web/server'] } } },
    });
    expect(service.explain(request)).not.toHaveProperty('answer.writeFailures');

    // A sync that could not write the node's rules: the answer says the kernel may differ.
    refuse = [];
    nodeFails = true;
    expect((await controller.runObservedSync('node refused')).ok).toBe(false);
    expect(service.explain(request)).toMatchObject({ ok: true, answer: { writeFailures: ['node/ipv4'], explanation: { allowed: true } } });
  });

  it('keeps the pod CIDRs the sync applied default deny with, for explain, and only with default deny on', async () => {
    const ctx: PluginContext = {
      nodeName: NODE,
      logger: pino({ level: 'silent' }),
      metrics: new AgentMetrics({ collectDefaultMetrics: false }),
      health: new HealthRegistry({ defaultGraceMs: 5_000 }),
      services: new ServiceRegistry(),
    };
    let current = pods;
    const sources: NetpolSources = {
      pods: () => current,
      namespaces: () => namespaces,
      policies: () => policies,
      hasSynced: () => true,
      onChange: () => () => undefined,
      warnPolicy: () => undefined,
      node: () => ({ metadata: { name: NODE }, spec: { podCIDRs: ['10.0.0.0/24'] } }),
    };
    const dataplane: NetpolDataplane<{ readonly id: string }, object> = {
      metrics: new NetpolSyncMetrics(ctx.metrics.registry),
      renderPolicy: (compiled) => ({ id: compiled.id }),
      renderNode: () => ({}),
      prepare: async () => undefined,
      applyPolicies: async () => ({ failedPolicies: new Map() }),
      applyNode: async () => ({ enforcing: true, failures: new Map(), written: {} }),
      removeLeftovers: async () => undefined,
      counts: () => ({ chains: 0, sets: 0 }),
      takeDrift: () => ({}),
    };
    const controller = createNetpolController(ctx, { sources }, { defaultDeny: true, syncPeriodMs: 60_000, minSyncIntervalMs: undefined, syncTimeoutMs: undefined }, dataplane);
    expect((await controller.runObservedSync('initial')).ok).toBe(true);
    const service = ctx.services.get(netpolExplainServiceKey);
    // Started since that sync: the kernel's tail chain rejects it until the next sync programs it.
    current = [...pods, pod('web/new', { ips: ['10.0.0.7'] })];
    const request = { from: 'web/new', to: 'web/client', port: 80 };
    expect(service.explain(request)).toMatchObject({ ok: true, answer: { explanation: { allowed: false, egress: { verdict: 'default-deny' } } } });
    expect((await controller.runObservedSync('pod started')).ok).toBe(true);
    expect(service.explain(request)).toMatchObject({ ok: true, answer: { explanation: { allowed: true, egress: { verdict: 'not-isolated' } } } });
  });
});
