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

function setup(services: V1Service[], runner: RecordingRunner, endpoints = { slices: [slice([{ ip: '10.244.0.5' }])] }) {
  const warnings: string[] = [];
  const sources: ProxySources = {
    services: () => services,
    // The same objects every call, as the informers give them: unchanged Services keep their plans and fragments.
    slicesFor: () => endpoints.slices,
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

  it('leaves a refused Service out while it is unchanged, checking again only the Services that changed', async () => {
    const runner = new RecordingRunner()
      .on('nft', {})
      .on((spec) => spec.args?.includes('list') ?? false, { stdout: '{"nftables": []}' })
      .on(refuses('default/bad/'), { exitCode: 1, stderr: 'Error: Could not process rule: Operation not supported' });
    const services = [service('good'), service('bad', { clusterIP: '10.96.0.11' }), service('other', { clusterIP: '10.96.0.12' })];
    const { controller, warnings } = setup(services, runner);
    const checks = () => runner.invocations.filter((invocation) => invocation.args.includes('-c')).length;
    await controller.runObservedSync('initial');
    expect(checks()).toBe(3);
    runner.invocations.length = 0;
    const again = await controller.runObservedSync('unchanged');
    expect(again.ok).toBe(false);
    expect(String(again.ok ? '' : again.error)).toMatch(/service\/default\/bad.*Operation not supported/s);
    expect(checks()).toBe(0);
    expect(warnings.at(-1)).toBe('default/bad ServiceNotProgrammed');
    // Another Service changes: written, nothing checked.
    services[0] = service('good', { ports: [{ name: 'http', port: 81, protocol: 'TCP' }] });
    runner.invocations.length = 0;
    await controller.runObservedSync('good changed');
    expect(checks()).toBe(0);
    expect(runner.invocations.at(-1)?.input).toContain('10.96.0.10 . tcp . 81');
    // The refused one changes: it alone is checked again.
    services[1] = service('bad', { clusterIP: '10.96.0.11', ports: [{ name: 'http', port: 82, protocol: 'TCP' }] });
    runner.invocations.length = 0;
    await controller.runObservedSync('bad changed');
    expect(checks()).toBe(1);
  });

  it('tries a failed conntrack deletion again next sync, and lists the flows after a restart', async () => {
    const runner = new RecordingRunner()
      .on('nft', {})
      .on((spec) => spec.args?.includes('list') ?? false, { stdout: '{"nftables": []}' })
      .on('conntrack', { stdout: 'udp      17 29 src=10.244.1.1 dst=10.96.0.10 sport=4000 dport=80 src=10.244.9.9 dst=10.244.1.1 sport=8080 dport=4000 mark=0 use=1\n' });
    const udp = [{ name: 'http', port: 8080, protocol: 'UDP' }];
    const endpoints = { slices: [slice([{ ip: '10.244.0.5' }, { ip: '10.244.0.6' }], udp)] };
    const { controller } = setup([service('dns', { ports: [{ name: 'http', port: 80, protocol: 'UDP' }] })], runner, endpoints);
    const conntrack = () => runner.invocations.filter((invocation) => invocation.command === 'conntrack').map((invocation) => invocation.args.join(' '));
    await controller.runObservedSync('initial');
    // After a restart: the entry answered by 10.244.9.9, no endpoint of the port, goes.
    expect(conntrack()).toEqual([expect.stringMatching(/^-L -p udp -f ipv4 --orig-dst 10\.96\.0\.10 --orig-port-dst 80/), expect.stringMatching(/^-D .*--reply-src 10\.244\.9\.9/)]);
    runner.invocations.length = 0;
    runner.once('conntrack', { exitCode: 2, stderr: 'conntrack: Operation failed' });
    endpoints.slices = [slice([{ ip: '10.244.0.5' }], udp)];
    const failed = await controller.runObservedSync('endpoint gone');
    expect(failed.ok).toBe(false);
    expect(conntrack()).toEqual([expect.stringMatching(/--reply-src 10\.244\.0\.6/)]);
    runner.invocations.length = 0;
    const retried = await controller.runObservedSync('period');
    expect(retried.ok).toBe(true);
    expect(conntrack()).toEqual([expect.stringMatching(/--reply-src 10\.244\.0\.6/)]);
  });

});
