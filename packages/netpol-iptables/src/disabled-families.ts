import type { PluginContext } from '@kube-router/controller';
import { Iptables } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import type { DataplaneSync, IpFamily } from '@kube-router/netpol';
import { removeOwnFilterRules } from './cleanup.js';
import type { KernelApplier } from './kernel.js';
import type { ResolvedNetpolIptablesOptions } from './options.js';

/**
 * A family enforced before and disabled now (--enable-ipv6=false after a run with it): its chains are no longer
 * kept up to date, and left in place they would go on isolating pods by policies long gone, and hold the family's
 * ipsets, which the stale-set sweep could then never destroy. A kernel without the family, or a node without its
 * tools, holds none of it.
 */
export class DisabledFamilies {
  readonly #pending: Iptables[];
  readonly #applier: KernelApplier;
  readonly #logger: PluginContext['logger'];

  constructor(options: ResolvedNetpolIptablesOptions, enabled: readonly IpFamily[], runner: CommandRunner, applier: KernelApplier, logger: PluginContext['logger']) {
    this.#pending = (['ipv4', 'ipv6'] as const)
      .filter((family) => !enabled.includes(family))
      .map((family) => new Iptables({ runner, family, backend: options.iptablesBackend, netns: options.netns, timeoutMs: options.commandTimeoutMs }))
      .filter((disabled) => disabled.canSaveAndRestore());
    this.#applier = applier;
    this.#logger = logger;
  }

  /**
   * Removes their jumps and chains, before the apply: its stale-set sweep then destroys the released family's sets,
   * on which nothing matches any more. A failed removal keeps the family's sets and is tried again next sync.
   */
  async remove({ failures }: DataplaneSync): Promise<void> {
    if (this.#pending.length === 0) return;
    const removals = await Promise.allSettled(this.#pending.map(removeOwnFilterRules));
    const failed: Iptables[] = [];
    removals.forEach((removal, index) => {
      const disabled = this.#pending[index] as Iptables;
      if (removal.status === 'rejected') {
        failures.add(`disabled-family/${disabled.family}`, removal.reason);
        failed.push(disabled);
        return;
      }
      this.#applier.releaseFamily(disabled.family);
      if (removal.value > 0) this.#logger.info({ family: disabled.family, removed: removal.value }, 'removed the netpol chains of a family that is not enabled');
    });
    // All or nothing again next time, as before: a family removed already has nothing left to remove.
    if (failed.length === 0) this.#pending.length = 0;
  }
}
