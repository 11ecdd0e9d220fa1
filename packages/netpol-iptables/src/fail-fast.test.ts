import { ServiceRegistry, type PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import { RecordingRunner } from '@kube-router/netfilter';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { NetpolSources } from '@kube-router/netpol';
import { createNetpolController } from '@kube-router/netpol';
import { createIptablesDataplane } from './dataplane.js';
import { netpolIptablesOptions } from './options.js';

const COMMAND_TIMEOUT_MS = 300;

/** One namespace, one local pod, one policy selecting it: a sync that writes sets and chains for both families. */
const sources: NetpolSources = {
  pods: () => [
    {
      metadata: { namespace: 'tagd', name: 'web', labels: { app: 'web' } },
      spec: { nodeName: 'tagd-node', containers: [{ name: 'web', ports: [{ containerPort: 80 }] }] },
      status: { phase: 'Running', podIP: '10.244.0.5', podIPs: [{ ip: '10.244.0.5' }, { ip: 'fd00:10:244::5' }] },
    },
  ],
  namespaces: () => [{ metadata: { name: 'tagd', labels: {} } }],
  policies: () => [
    {
      metadata: { namespace: 'tagd', name: 'web' },
      spec: { podSelector: { matchLabels: { app: 'web' } }, ingress: [{ from: [{ ipBlock: { cidr: '10.0.0.0/8' } }] }] },
    },
  ],
  hasSynced: () => true,
  onChange: () => () => undefined,
  warnPolicy: () => undefined,
};

describe('a hanging iptables-restore', () => {
  it('fails the sync within about one command timeout, naming the command, instead of one timeout per step', async () => {
    // The kernel tool hangs: each iptables-restore takes its whole timeout and is reported as timed out.
    const runner = new RecordingRunner().on('iptables-restore', async () => {
      await new Promise((resolve) => setTimeout(resolve, COMMAND_TIMEOUT_MS));
      return { timedOut: true };
    });
    const ctx: PluginContext = {
      nodeName: 'tagd-node',
      logger: pino({ level: 'silent' }),
      metrics: new AgentMetrics({ collectDefaultMetrics: false }),
      health: new HealthRegistry({ defaultGraceMs: 5_000 }),
      services: new ServiceRegistry(),
    };
    const options = netpolIptablesOptions.parse({ enableIpv6: true, commandTimeoutMs: COMMAND_TIMEOUT_MS, syncTimeoutMs: 0 });
    const controller = createNetpolController(ctx, { sources }, options, createIptablesDataplane(ctx, options, runner));

    const started = performance.now();
    const outcome = await controller.runObservedSync('initial');
    const elapsed = performance.now() - started;

    expect(outcome.ok).toBe(false);
    const message = outcome.ok ? '' : String((outcome.error as Error).message);
    expect(message).toContain('iptables-restore');
    expect(message).toContain('timed out');
    // Only the first write waited; the steps after it failed at once. Before: every step waited its own timeout.
    expect(runner.invocations.filter((i) => i.command === 'iptables-restore')).toHaveLength(1);
    expect(elapsed).toBeLessThan(3 * COMMAND_TIMEOUT_MS);

    // The next sync starts afresh: it tries the kernel again.
    await controller.runObservedSync('retry');
    expect(runner.invocations.filter((i) => i.command === 'iptables-restore')).toHaveLength(2);
  });
});
