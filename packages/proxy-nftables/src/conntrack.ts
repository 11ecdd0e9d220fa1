import { deleteConntrackEntries } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import type { StaleFlow } from './stale-flows.js';

/** Deletes one stale UDP flow's conntrack entries; resolves with how many went. */
export async function deleteStaleFlow(runner: CommandRunner, flow: StaleFlow, options: { netns?: string; timeoutMs: number }): Promise<number> {
  const result = await deleteConntrackEntries(
    runner,
    {
      protocol: 'udp',
      family: flow.family,
      ...(flow.originalDestination !== undefined && { originalDestination: flow.originalDestination }),
      originalPort: flow.originalPort,
      ...(flow.replySource !== undefined && { replySource: flow.replySource }),
    },
    { ...(options.netns !== undefined && { netns: options.netns }), timeoutMs: options.timeoutMs },
  );
  return result.deleted;
}
