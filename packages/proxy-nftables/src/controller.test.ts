import { ServiceRegistry } from '@kube-router/controller';
import type { PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import { RecordingRunner } from '@kube-router/netfilter';
import type { V1Service } from '@kubernetes/client-node';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createProxyNftablesController } from './controller.js';
import type { ProxySources } from './controller.js';
import { proxyNftablesOptions } from './options.js';
import { node, service, slice } from './testing/objects.js';

function setup(services: V1Service[], runner: RecordingRunner) {
  const warnings: string[] = [];
  const sources: ProxySources = {
    services: () => services,
    slicesFor: () => [slice([{ ip: '10.244.0.5' }])],
    node: () => node(),
    hasSynced: () => true,
    onChange: () => () => undefined,
    warnService: (namespace, name, reason) => warnings.push(`${namespace}/${name} ${reason}`),
  };
  const metrics = new AgentMetrics({ collectDefaultMetrics: false });
  const ctx: PluginContext = { nodeName: 'node-a', logger: pino({ level: 'silent' }), metrics, health: new HealthRegistry({ defaultGraceMs: 5_000 }), services: new ServiceRegistry() };
  const controller = createProxyNftablesController(ctx, { sources, runner }, proxyNftablesOptions.parse({ syncPeriodMs: 60_000 }));
  return { controller, warnings };
}

const refuses = (text: string) => (spec: { input?: string; args?: readonly string[] }) => (spec.args?.includes('-f') ?? false) && (spec.input ?? '').includes(text);

describe('proxy-nftables controller', () => {
  it('writes the table without a Service the kernel refuses: that one fails alone, with a Warning', async () => {
    // The last matching response wins.
    const runner = new RecordingRunner()
      .on('nft', {})
      .on((spec) => spec.args?.includes('list') ?? false, { stdout: '{"nftables": []}' })
      .on(refuses('default/bad/'), { exitCode: 1, stderr: 'Error: Could not process rule: Operation not supported' });
    const { controller, warnings } = setup([service('good'), service('bad', { clusterIP: '10.96.0.11' })], runner);
    const outcome = await controller.runObservedSync('initial');
    expect(outcome.ok).toBe(false);
    expect(String(outcome.ok ? '' : outcome.error)).toMatch(/service\/default\/bad.*Operation not supported/s);
    expect(String(outcome.ok ? '' : outcome.error)).not.toContain('default/good');
    expect(warnings).toEqual(['default/bad ServiceNotProgrammed']);
    const applied = runner.invocations.filter((invocation) => invocation.args.join(' ') === '-f -').at(-1)?.input ?? '';
    expect(applied).toContain('default/good/');
    expect(applied).not.toContain('default/bad/');
    expect(controller.lastSync()?.servicePorts).toBe(2);
  });

});
