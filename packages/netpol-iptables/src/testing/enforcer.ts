import type { ControllerPlugin } from '@kube-router/controller';
import { startNetpolHarness } from '@kube-router/netpol/harness';
import type { HarnessEnforcer, HarnessEnv } from '@kube-router/netpol/harness';
import type { CommandRunner } from '@kube-router/netfilter';
import { createNetpolIptablesPlugin } from '../plugin.js';
import type { NetpolIptablesOptions } from '../options.js';

export type EnforcerEnv = HarnessEnv;
/** The enforcer and its parts, for this package's own tests. */
export type TestEnforcer = HarnessEnforcer;

export interface TestEnforcerOptions {
  options?: NetpolIptablesOptions;
  runner?: CommandRunner;
  /** Start the scheduler's loop (event-driven syncs). Default true. */
  scheduler?: boolean;
}

/** This backend as the agent assembles it, for the conformance suite. */
export async function startIptablesEnforcer(env: EnforcerEnv): Promise<TestEnforcer> {
  return startTestEnforcer(env);
}

export async function startTestEnforcer(env: EnforcerEnv, extra: TestEnforcerOptions = {}): Promise<TestEnforcer> {
  const plugin = createNetpolIptablesPlugin(extra.runner ? { runner: extra.runner } : {});
  return startNetpolHarness(plugin as ControllerPlugin<unknown>, env, {
    ...(extra.options === undefined ? {} : { options: extra.options }),
    ...(extra.scheduler === undefined ? {} : { scheduler: extra.scheduler }),
  });
}
