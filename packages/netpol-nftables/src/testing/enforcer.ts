import type { ControllerPlugin } from '@kube-router/controller';
import { startNetpolHarness } from '@kube-router/netpol/harness';
import type { HarnessEnforcer, HarnessEnv } from '@kube-router/netpol/harness';
import type { CommandRunner } from '@kube-router/netfilter';
import { createNetpolNftablesPlugin } from '../plugin.js';
import type { NetpolNftablesOptions } from '../options.js';

export type EnforcerEnv = HarnessEnv;
/** The enforcer and its parts, for this package's own tests. */
export type TestEnforcer = HarnessEnforcer;

export interface TestEnforcerOptions {
  options?: NetpolNftablesOptions;
  runner?: CommandRunner;
  /** Start the scheduler's loop (event-driven syncs). Default true. */
  scheduler?: boolean;
  /** Another plugin of the same controller (the iptables backend, for the switch test), with its own options. */
  plugin?: ControllerPlugin<unknown>;
}

/** This backend as the agent assembles it, for the conformance suite. */
export async function startNftablesEnforcer(env: EnforcerEnv): Promise<TestEnforcer> {
  return startTestEnforcer(env);
}

export async function startTestEnforcer(env: EnforcerEnv, extra: TestEnforcerOptions = {}): Promise<TestEnforcer> {
  const plugin = extra.plugin ?? createNetpolNftablesPlugin(extra.runner ? { runner: extra.runner } : {});
  return startNetpolHarness(plugin as ControllerPlugin<unknown>, env, {
    ...(extra.options === undefined ? {} : { options: extra.options }),
    ...(extra.scheduler === undefined ? {} : { scheduler: extra.scheduler }),
  });
}
