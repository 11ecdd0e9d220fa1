import type { PluginContext } from '@kube-router/controller';
import { FailFastSession, Ipset, Iptables } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { netpolFamilies, renderedOnRead } from '@kube-router/netpol';
import type { IpFamily, NetpolDataplane, NodeApplied, PolicyModel } from '@kube-router/netpol';
import { verdictCountersOfSave } from './counters.js';
import { DisabledFamilies } from './disabled-families.js';
import { KernelApplier } from './kernel.js';
import type { ApplyResult, NodeRender } from './kernel.js';
import { NetpolMetrics } from './metrics.js';
import type { ResolvedNetpolIptablesOptions } from './options.js';
import { removeNftablesLeftovers } from './nftables-leftovers.js';
import { renderLocalPodsSet, renderNode } from './render-node.js';
import { renderPolicy } from './render-policy.js';
import type { PolicyRender } from './render-policy.js';

/** The iptables and ipset side of the netpol controller (createNetpolController): chains and ipsets per family. */
export function createIptablesDataplane(ctx: PluginContext, options: ResolvedNetpolIptablesOptions, runner: CommandRunner): NetpolDataplane<PolicyRender, NodeRender> {
  const families = netpolFamilies(options);
  const metrics = new NetpolMetrics(ctx.metrics.registry);
  // Each sync's kernel writes depend on each other: once one times out, the rest fail at once instead of each
  // waiting out its own timeout, so a hung iptables-restore fails the sync within about one command timeout.
  const session = new FailFastSession(runner);
  const iptables: Partial<Record<IpFamily, Iptables>> = {};
  for (const family of families) {
    iptables[family] = new Iptables({ runner: session, family, backend: options.iptablesBackend, netns: options.netns, timeoutMs: options.commandTimeoutMs });
  }
  // The verdict counters' reads run at scrape time, beside syncs: on the plain runner, so that a slow read never fails
  // a sync's session fast (nor a sync's timeout a scrape).
  const counterReaders = families.map(
    (family) => [family, new Iptables({ runner, family, backend: options.iptablesBackend, netns: options.netns, timeoutMs: options.commandTimeoutMs })] as const,
  );
  const ipset = new Ipset({ runner: session, netns: options.netns, timeoutMs: options.commandTimeoutMs });
  const applier = new KernelApplier({ families, iptables, ipset, logger: ctx.logger, timings: metrics });
  const disabledFamilies = new DisabledFamilies(options, families, runner, applier, ctx.logger);
  let nftablesLeftoversRemoved = false;
  let lastNode: { pods: PolicyModel['pods']; key: string; render: NodeRender } | undefined;

  return {
    metrics,
    renderPolicy: (policy) => renderPolicy(policy, families),
    renderNode: (model, { podCidrs, failedPolicies }) => {
      // What the node's chains are made of: the model's local pods (the same object while no local pod's policies
      // changed, as when an event changes only peers), the pod CIDRs and the policies failed closed. While those are
      // as they were, the render (and its digests) is too: an event sync does not render every pod chain again.
      const key = JSON.stringify([podCidrs, [...failedPolicies].sort()]);
      if (lastNode?.pods === model.pods && lastNode.key === key) return lastNode.render;
      const render = renderedOnRead(families, (family) => ({
        chains: renderNode(model, family, { ...options, podCidrs }, failedPolicies),
        ...(options.defaultDeny && { localPods: renderLocalPodsSet(model, family) }),
      }));
      lastNode = { pods: model.pods, key, render };
      return render;
    },
    async prepare(sync) {
      // Full syncs re-read the kernel to repair drift; triggered ones trust what they wrote.
      if (sync.full) applier.invalidate();
      session.begin();
      await disabledFamilies.remove(sync);
    },
    applyPolicies: (policies, node, progress) => applier.applyPolicies(policies, node, progress),
    applyNode: async (node, progress) => nodeApplied(await applier.applyNode(node, progress)),
    async removeLeftovers({ failures }, enforcing) {
      // Our chains enforce now: the nftables backend's tables can go without a moment of no enforcer.
      if (nftablesLeftoversRemoved || !enforcing) return;
      try {
        nftablesLeftoversRemoved = await removeNftablesLeftovers(runner, options.netns, options.commandTimeoutMs);
      } catch (error) {
        failures.add('nftables-leftovers', error);
      }
    },
    async readCounters() {
      // A family at a time, under the xtables lock like every other command: a scrape waits for a sync's restore.
      // A chain written since the last read counts from zero again, whatever it counted before: its write is its
      // generation. A sync's restore can commit while the save waits for the lock, and its write is recorded only
      // after it returns: such a chain shows its fresh counters, and under its old generation the next read (new
      // generation) would add them in whole again. So a chain whose write changed during the read is left out of it:
      // the next read counts it from zero, once. (Every command of ours runs under the same in-process lock, so no
      // restore is still running when the save returns; its write is recorded by then.)
      const before = applier.chainWrites();
      const counters = [];
      for (const [family, reader] of counterReaders) counters.push(...(await verdictCountersOfSave(await reader.save('filter', { counters: true }), family)));
      const after = applier.chainWrites();
      return counters.flatMap((counter) => {
        const key = `${counter.family}/${counter.chain}`;
        const generation = after.get(key);
        return generation === before.get(key) ? [{ ...counter, generation: generation ?? 0 }] : [];
      });
    },
    counts: () => applier.counts(),
    takeDrift: () => applier.takeDrift(),
  };
}

function nodeApplied(result: ApplyResult): NodeApplied {
  const failures = new Map<string, unknown>();
  for (const [family, error] of result.nodeFailures) failures.set(`node/${family}`, error);
  for (const [set, error] of result.setFailures) failures.set(`ipset/${set}`, error);
  for (const [chains, error] of result.chainFailures) failures.set(`stale-chains/${chains}`, error);
  const { chainsWritten, setsWritten, chainsDeleted, setsDestroyed } = result;
  return { enforcing: result.enforcing, failures, written: { chainsWritten, setsWritten, chainsDeleted, setsDestroyed } };
}
