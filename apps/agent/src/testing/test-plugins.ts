import { z } from 'zod';
import {
  createSyncController,
  definePlugin,
  type ControllerPlugin,
  type ControllerStartContext,
  type Services,
  type SyncContext,
} from '@kube-router/controller';

export interface TestPluginSpec {
  name: string;
  requires?: string[];
  syncPeriodMs?: number;
  minSyncIntervalMs?: number;
  syncTimeoutMs?: number;
  healthGraceMs?: number;
  sync?: (ctx: SyncContext) => Promise<void>;
  onCreate?: (services: Services) => void;
  onStart?: (ctx: ControllerStartContext) => void;
  onStop?: () => void | Promise<void>;
}

/** Options every test plugin accepts, so that tests can exercise option validation through a real zod schema. */
export const testPluginOptions = z.object({
  syncPeriodMs: z.number().int().positive().optional(),
  label: z.string().min(1).optional(),
});

/** A plugin built the way real plugins are: definePlugin + createSyncController. */
export function testPlugin(spec: TestPluginSpec): ControllerPlugin<z.infer<typeof testPluginOptions>> {
  return definePlugin({
    name: spec.name,
    host: '*',
    ...(spec.requires && { requires: spec.requires }),
    options: testPluginOptions,
    create(ctx, options) {
      spec.onCreate?.(ctx.services);
      return createSyncController(ctx, {
        name: spec.name,
        syncPeriodMs: options.syncPeriodMs ?? spec.syncPeriodMs ?? 60_000,
        ...(spec.minSyncIntervalMs !== undefined && { minSyncIntervalMs: spec.minSyncIntervalMs }),
        ...(spec.syncTimeoutMs !== undefined && { syncTimeoutMs: spec.syncTimeoutMs }),
        ...(spec.healthGraceMs !== undefined && { healthGraceMs: spec.healthGraceMs }),
        sync: async (syncCtx) => {
          ctx.logger.info({ reason: syncCtx.reason }, 'sync started');
          await spec.sync?.(syncCtx);
        },
        start: (startCtx) => spec.onStart?.(startCtx),
        stop: () => spec.onStop?.(),
      });
    },
  });
}
