import { definePlugin } from '@kube-router/controller';
import type { CleanupContext, ControllerPlugin, OptionsSchema, PluginContext } from '@kube-router/controller';
import { KubeServices } from '@kube-router/kube';
import { ExecRunner } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { createNetpolController } from './controller.js';
import type { NetpolDataplane } from './dataplane.js';
import { DropLog } from './drop-log.js';
import type { ResolvedNetpolOptions } from './options.js';
import { informerSources } from './sources.js';
import type { NetpolSources } from './sources.js';
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
    // The drop log's tcpdump runs whatever runs the backend's commands.
    tools: (options) => [...(overrides.runner ? [] : backend.tools(options)), ...(options.dropLog ? ['tcpdump'] : [])],
    create(ctx, options) {
      const kube = ctx.services.get(KubeServices);
      const sources = informerSources(kube, ctx.logger, options.defaultDeny ? ctx.nodeName : undefined);
      const dropLog = options.dropLog ? createDropLog(ctx, options, sources) : undefined;
      return createNetpolController(ctx, { sources, ...(dropLog && { dropLog }) }, options, backend.createDataplane(ctx, options, runnerFor(ctx.logger)));
    },
    cleanup: (ctx, options) => backend.cleanup(ctx, options, runnerFor(ctx.logger)),
  });
}

/** The drop log over the agent's pods, its Events recorded on the pod's informer object. */
function createDropLog(ctx: PluginContext, options: ResolvedNetpolOptions, sources: NetpolSources): DropLog {
  const kube = ctx.services.get(KubeServices);
  const pods = kube.informers.pods();
  return new DropLog(
    { ...(options.netns === undefined ? {} : { netns: options.netns }), events: options.dropLogEvents, intervalMs: options.dropLogIntervalMs },
    {
      logger: ctx.logger,
      nodeName: ctx.nodeName,
      pods: () => sources.pods(),
      onChange: (handler) => kube.informers.onChange('pods', handler),
      warnPod(namespace, name, reason, message) {
        const pod = pods.get(namespace, name);
        // List items come without kind and apiVersion, as from a real API server; the event needs both.
        const involved = pod ? { ...pod, apiVersion: 'v1', kind: 'Pod' } : { apiVersion: 'v1', kind: 'Pod', namespace, name };
        kube.events.warning(involved, reason, message).catch((error: unknown) => {
          ctx.logger.warn({ err: error, pod: `${namespace}/${name}`, reason }, 'could not record event');
        });
      },
    },
  );
}
