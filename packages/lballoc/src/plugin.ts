import { CoreV1Api } from '@kubernetes/client-node';
import { definePlugin } from '@kube-router/controller';
import { KubeServices, listPage } from '@kube-router/kube';
import { z } from 'zod';
import { createLballocController, LBALLOC_CONTROLLER } from './controller.js';

/** Services per page of the allocator's list. */
const LIST_PAGE_SIZE = 500;

/** kube-router's Lease name for the allocator. */
export const LBALLOC_LEASE = 'kube-router-lballoc';

/** Unknown keys are refused (`range` for `ranges` would otherwise be dropped silently and fail much later). */
export const lballocOptions = z.strictObject({
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
  host: '^1.0.0',
  options: lballocOptions,
  create(ctx, options) {
    const kube = ctx.services.get(KubeServices);
    let onLeadershipChange: () => void = () => undefined;
    let term = 0;
    const elector = kube.leaderElector({
      name: LBALLOC_LEASE,
      logger: ctx.logger,
      onStartedLeading: () => {
        term += 1;
        onLeadershipChange();
      },
      onStoppedLeading: () => onLeadershipChange(),
    });
    return createLballocController(
      ctx,
      {
        api: kube.kubeConfig.makeApiClient(CoreV1Api),
        async listServices(timeoutMs, signal) {
          const items: unknown[] = [];
          const seen = new Set<string>();
          let token: string | undefined;
          do {
            if (token !== undefined) {
              // A server that hands out one continue token twice would keep this loop going for ever.
              if (seen.has(token)) throw new Error('list services: the API server repeated a continue token');
              seen.add(token);
            }
            const page = await listPage(
              kube.kubeConfig,
              '/api/v1/services',
              { limit: LIST_PAGE_SIZE, continue: token },
              'list services',
              timeoutMs,
              signal,
            );
            items.push(...page.items);
            token = page.continueToken;
          } while (token !== undefined);
          return items;
        },
        isLeader: () => elector.isLeader(),
        leadershipTerm: () => term,
        identity: elector.identity,
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
