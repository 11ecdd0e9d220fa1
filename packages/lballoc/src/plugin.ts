import { CoreV1Api } from '@kubernetes/client-node';
import { definePlugin } from '@kube-router/controller';
import { KubeServices } from '@kube-router/kube';
import { z } from 'zod';
import { createLballocController, LBALLOC_CONTROLLER } from './controller.js';

/** kube-router's Lease name for the allocator. */
export const LBALLOC_LEASE = 'kube-router-lballoc';

export const lballocOptions = z.object({
  /** --loadbalancer-ip-range, repeatable: CIDRs (or first-last ranges) of either family. */
  ranges: z.array(z.string()).default([]),
  /** --loadbalancer-default-class: also serve Services with no class or class `default`. */
  defaultClass: z.boolean().default(true),
  /** --loadbalancer-sync-period. */
  syncPeriodMs: z.number().int().positive().default(60_000),
  minSyncIntervalMs: z.number().int().nonnegative().optional(),
  syncTimeoutMs: z.number().int().nonnegative().optional(),
});
export type LballocOptions = z.input<typeof lballocOptions>;

/** The LoadBalancer IP allocator plugin. It needs the agent's Kubernetes context (KubeServices). */
export const lballocPlugin = definePlugin({
  name: LBALLOC_CONTROLLER,
  version: '0.1.0',
  options: lballocOptions,
  create(ctx, options) {
    const kube = ctx.services.get(KubeServices);
    let onLeadershipChange: () => void = () => undefined;
    const elector = kube.leaderElector({
      name: LBALLOC_LEASE,
      logger: ctx.logger,
      onStartedLeading: () => onLeadershipChange(),
      onStoppedLeading: () => onLeadershipChange(),
    });
    return createLballocController(
      ctx,
      {
        api: kube.kubeConfig.makeApiClient(CoreV1Api),
        isLeader: () => elector.isLeader(),
        // List items come without kind and apiVersion, as from a real API server; the event needs both.
        warn: (service, reason, message) =>
          void kube.events.warning({ ...service, apiVersion: 'v1', kind: 'Service' }, reason, message),
        onServicesChanged: (handler) => kube.informers.onChange('services', handler),
        startElection(onChange) {
          onLeadershipChange = onChange;
          elector.start();
        },
        stopElection: () => elector.stop(),
      },
      options,
    );
  },
});
