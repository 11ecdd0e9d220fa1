import type { ControllerPlugin } from '@kube-router/controller';
import type { CommandRunner } from '@kube-router/netfilter';
import type { NetpolOptions } from '@kube-router/netpol';
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

/** The backend as the agent assembles it, programming `env.netns`. */
export function startTestEnforcer(backend: NetpolTestBackend, env: HarnessEnv, extra: TestEnforcerOptions = {}): Promise<HarnessEnforcer> {
  const plugin = extra.plugin ?? backend.createPlugin(extra.runner ? { runner: extra.runner } : {});
  return startNetpolHarness(plugin, env, {
    ...(extra.options === undefined ? {} : { options: extra.options }),
    ...(extra.scheduler === undefined ? {} : { scheduler: extra.scheduler }),
  });
}
