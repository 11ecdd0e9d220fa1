import type { ControllerPlugin } from '@kube-router/controller';
import type { CommandRunner } from '@kube-router/netfilter';
import { netpolExplainServiceKey } from '@kube-router/netpol';
import type { NetpolOptions } from '@kube-router/netpol';
import type { EnforcerFlow, EnforcerVerdict } from '@kube-router/testkit/netpol-conformance';
import type { NetpolTestBackend } from './backend.js';
import { startNetpolHarness } from './harness.js';
import type { HarnessEnforcer, HarnessEnv } from './harness.js';

export interface TestEnforcerOptions {
  /** The plugin's options: those of either backend, and the backend's own. */
  options?: NetpolOptions & Record<string, unknown>;
  /** Runs the plugin's commands instead of the real tools. */
  runner?: CommandRunner;
  /** Start the scheduler's loop (event-driven syncs). Default true. */
  scheduler?: boolean;
  /** Another plugin of the same controller (the other backend, for the switch test). */
  plugin?: ControllerPlugin<unknown>;
}

/** The harness, and the verdicts of the controller's explain service (what `kube-router explain` asks). */
export interface TestEnforcer extends HarnessEnforcer {
  explain(flow: EnforcerFlow): Promise<EnforcerVerdict>;
}

/** The backend as the agent assembles it, programming `env.netns`. */
export async function startTestEnforcer(backend: NetpolTestBackend, env: HarnessEnv, extra: TestEnforcerOptions = {}): Promise<TestEnforcer> {
  const plugin = extra.plugin ?? backend.createPlugin(extra.runner ? { runner: extra.runner } : {});
  const harness = await startNetpolHarness(plugin, env, {
    ...(extra.options === undefined ? {} : { options: extra.options }),
    ...(extra.scheduler === undefined ? {} : { scheduler: extra.scheduler }),
  });
  return {
    ...harness,
    async explain(flow) {
      const result = harness.services.get(netpolExplainServiceKey).explain({ from: flow.source, to: flow.destination, port: flow.port, protocol: flow.protocol });
      if (!result.ok) throw new Error(`explain ${JSON.stringify(flow)}: ${result.status} ${result.error}`);
      const { egress, ingress, allowed } = result.answer.explanation;
      const rule = (side: typeof egress) => (side.rule ? ` by ${side.rule.policy} spec.${side.rule.direction}[${side.rule.index}]` : '');
      return { allowed, detail: `egress ${egress.verdict}${rule(egress)}, ingress ${ingress.verdict}${rule(ingress)}` };
    },
  };
}
