import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { JoinedSyncError, ServiceRegistry } from '@kube-router/controller';
import type { PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import type { CommandRunner } from '@kube-router/netfilter';
import { createProxyController } from '../controller.js';
import type { ProxyController, ProxySources } from '../controller.js';
import { proxyIpvsOptions } from '../options.js';
import type { ProxyIpvsOptions } from '../options.js';
import { driftCount } from './drift.js';
import { captureLogs } from '@kube-router/testkit';
import type { LogLine } from '@kube-router/testkit';

export interface RecordedWarning {
  readonly owner: string;
  readonly reason: string;
  readonly message: string;
}

export interface ControllerHarness {
  readonly controller: ProxyController;
  readonly warnings: RecordedWarning[];
  readonly metrics: AgentMetrics;
  /** The controller's log lines, info and above. */
  readonly logs: LogLine[];
  /** kube_router_controller_drift_repaired_total{controller="proxy",object}; 0 before any. */
  drift(object: string): Promise<number>;
  /** One sync; the objects (`service/ns/name`, `ipsets/ipv4`, ...) it failed for, empty when it succeeded. */
  sync(reason?: string): Promise<string[]>;
}

/**
 * The proxy controller without informers: the cluster is the objects given, events are recorded, and the runner is
 * the test's (a RecordingRunner, or an ExecRunner into a network namespace).
 */
export function controllerHarness(
  runner: CommandRunner,
  objects: { services: V1Service[]; slices?: V1EndpointSlice[]; node?: V1Node },
  options: ProxyIpvsOptions = {},
): ControllerHarness {
  const warnings: RecordedWarning[] = [];
  const sources: ProxySources = {
    services: () => objects.services,
    slicesFor: (namespace, name) =>
      (objects.slices ?? []).filter((slice) => slice.metadata?.namespace === namespace && slice.metadata.labels?.['kubernetes.io/service-name'] === name),
    node: () => objects.node,
    hasSynced: () => true,
    onChange: () => () => {},
    warnService: (namespace, name, reason, message) => warnings.push({ owner: `${namespace}/${name}`, reason, message }),
  };
  const { logger, lines: logs } = captureLogs();
  const metrics = new AgentMetrics({ collectDefaultMetrics: false });
  const ctx: PluginContext = {
    nodeName: objects.node?.metadata?.name ?? 'node-a',
    logger,
    metrics,
    health: new HealthRegistry({ defaultGraceMs: 5_000 }),
    services: new ServiceRegistry(),
  };
  const controller = createProxyController(ctx, { sources, runner }, proxyIpvsOptions.parse({ setSysctls: false, enableIpv6: true, ...options }));
  return {
    controller,
    warnings,
    metrics,
    logs,
    drift: (object) => driftCount(metrics, object),
    async sync(reason = 'initial') {
      const outcome = await controller.runObservedSync(reason);
      if (outcome.ok) return [];
      if (!(outcome.error instanceof JoinedSyncError)) throw outcome.error;
      return outcome.error.failures.map((failure) => failure.object);
    },
  };
}

