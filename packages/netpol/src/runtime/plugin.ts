import { definePlugin } from '@kube-router/controller';
import type { CleanupContext, ControllerPlugin, OptionsSchema, PluginContext } from '@kube-router/controller';
import { KubeServices } from '@kube-router/kube';
import { ExecRunner } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { createNetpolController } from './controller.js';
import type { NetpolDataplane } from './dataplane.js';
import type { ResolvedNetpolOptions } from './options.js';
import { informerSources } from './sources.js';
import { NETPOL_CONTROLLER } from './sync.js';

/** What a netpol backend is, besides the controller every backend shares. */
export interface NetpolBackend<Options extends ResolvedNetpolOptions> {
  /** `z.strictObject({ ...netpolOptionFields, ...its own })`. */
  readonly options: OptionsSchema<Options>;
  /** The executables it runs with these options (ControllerPlugin.tools). */
  tools(options: Options): readonly string[];
  /** Its renders are its own: the controller only hands them from the dataplane's renderers to its kernel. */
  createDataplane(ctx: PluginContext, options: Options, runner: CommandRunner): NetpolDataplane<{ readonly id: string }, unknown>;
  /** --cleanup-config: every object of its own, and nothing of anyone else's (ControllerPlugin.cleanup). */
  cleanup(ctx: CleanupContext, options: Options, runner: CommandRunner): Promise<void>;
}

export interface NetpolPluginOverrides {
  /**
   * Runs the backend's commands instead of an ExecRunner logging to the plugin's logger: for tests that must break
   * the kernel tools on purpose. The plugin then names no tools (ControllerPlugin.tools): the runner stands in for them.
   */
  readonly runner?: CommandRunner;
}

/**
 * A backend's `netpol` plugin: the controller of createNetpolController over the backend's dataplane, fed by the
 * agent's informers (the Node too with default deny, for its pod CIDRs; without it Node updates need not wake the
 * loop).
 */
export function defineNetpolPlugin<Options extends ResolvedNetpolOptions>(
  backend: NetpolBackend<Options>,
  overrides: NetpolPluginOverrides = {},
): ControllerPlugin<Options> {
  const runnerFor = (logger: PluginContext['logger']) => overrides.runner ?? new ExecRunner({ logger });
  return definePlugin({
    name: NETPOL_CONTROLLER,
    host: '^1.0.0',
    options: backend.options,
    tools: (options) => (overrides.runner ? [] : backend.tools(options)),
    create(ctx, options) {
      const sources = informerSources(ctx.services.get(KubeServices), ctx.logger, options.defaultDeny ? ctx.nodeName : undefined);
      return createNetpolController(ctx, { sources }, options, backend.createDataplane(ctx, options, runnerFor(ctx.logger)));
    },
    cleanup: (ctx, options) => backend.cleanup(ctx, options, runnerFor(ctx.logger)),
  });
}
