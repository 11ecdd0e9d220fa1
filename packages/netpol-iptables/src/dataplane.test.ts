import { ServiceRegistry, type PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import { RecordingRunner } from '@kube-router/netfilter';
import { PolicyCompiler } from '@kube-router/netpol';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createIptablesDataplane } from './dataplane.js';
import { netpolIptablesOptions } from './options.js';

const pod = (name: string, app: string, nodeName: string, ip: string) => ({
  metadata: { namespace: 'tagd', name, labels: { app } },
  spec: { nodeName },
  status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] },
});

describe('the iptables dataplane', () => {
  it('keeps the node render while the local pods are the same, and renders again when they or the failed policies change', () => {
    const ctx: PluginContext = {
      nodeName: 'tagd-node',
      logger: pino({ level: 'silent' }),
      metrics: new AgentMetrics({ collectDefaultMetrics: false }),
      health: new HealthRegistry({ defaultGraceMs: 5_000 }),
      services: new ServiceRegistry(),
    };
    const dataplane = createIptablesDataplane(ctx, netpolIptablesOptions.parse({}), new RecordingRunner());
    const compiler = new PolicyCompiler({ nodeName: 'tagd-node' });
    const namespaces = [{ metadata: { name: 'tagd' } }];
    const policies = [{ metadata: { namespace: 'tagd', name: 'web' }, spec: { podSelector: { matchLabels: { app: 'web' } }, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }] }] } }];
    const web = pod('web', 'web', 'tagd-node', '10.244.0.5');
    const first = compiler.compile({ pods: [web, pod('client', 'other', 'node-b', '10.244.1.5')], namespaces, policies });
    const input = { podCidrs: [], failedPolicies: new Set<string>() };
    const render = dataplane.renderNode(first, input);
    expect(render.ipv4?.chains.length).toBeGreaterThan(0);

    // A remote pod relabelled into the policy's peers: the policy's sets change, the node's chains do not.
    const peers = compiler.compile({ pods: [web, pod('client', 'client', 'node-b', '10.244.1.5')], namespaces, policies });
    expect(peers.pods).toBe(first.pods);
    expect(dataplane.renderNode(peers, { podCidrs: [], failedPolicies: new Set() })).toBe(render);

    // The policy failed closed: other node chains.
    const failed = dataplane.renderNode(peers, { podCidrs: [], failedPolicies: new Set(['tagd/web']) });
    expect(failed).not.toBe(render);
    expect(failed.ipv4?.chains).not.toEqual(render.ipv4?.chains);

    // A second local pod: the local pods change, and so does the render.
    const more = compiler.compile({ pods: [web, pod('web-2', 'web', 'tagd-node', '10.244.0.6'), pod('client', 'client', 'node-b', '10.244.1.5')], namespaces, policies });
    const grown = dataplane.renderNode(more, input);
    expect(grown).not.toBe(render);
    expect(grown.ipv4?.chains.length).toBeGreaterThan(render.ipv4?.chains.length ?? 0);
  });
});
