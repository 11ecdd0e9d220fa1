import type { SyncFailures } from '@kube-router/controller';
import type { IpFamily } from '@kube-router/netfilter';
import type { Dataplane } from './dataplane.js';
import type { ProxyModel } from './model.js';

const familyOf = (ip: string): IpFamily => (ip.includes(':') ? 'ipv6' : 'ipv4');

/** The VIPs on kube-dummy-if: read back on full syncs, then changed by the difference to what the Services want. */
export class VipStage {
  readonly #dataplane: Dataplane;
  readonly #families: readonly IpFamily[];
  readonly #isExcluded: (address: string) => boolean;
  /** The VIPs on the interface as far as this controller knows; undefined until a read back succeeds. */
  #applied: Record<IpFamily, Set<string>> | undefined;

  constructor(dataplane: Dataplane, families: readonly IpFamily[], isExcluded: (address: string) => boolean) {
    this.#dataplane = dataplane;
    this.#families = families;
    this.#isExcluded = isExcluded;
  }

  /** Whether the VIPs on the interface are known; until they are, every sync is a full one. */
  get known(): boolean {
    return this.#applied !== undefined;
  }

  /** Makes sure kube-dummy-if is there and up, and reads its VIPs. */
  async readBack(failures: SyncFailures): Promise<void> {
    this.#applied = await failures.attempt('dummy-interface', () => this.#dataplane.ensureDummyInterface());
  }

  /** Every desired VIP added, stale ones (outside --excluded-cidrs) removed; a failure belongs to its Services. */
  async reconcile(model: ProxyModel, failures: SyncFailures): Promise<void> {
    const applied = this.#applied;
    if (!applied) return;
    const add: string[] = [];
    const remove: string[] = [];
    for (const family of this.#families) {
      for (const ip of model.vips[family]) if (!applied[family].has(ip)) add.push(ip);
      for (const ip of applied[family]) if (!model.vips[family].has(ip) && !this.#isExcluded(ip)) remove.push(ip);
    }
    const vipFailures = (await failures.attempt('vips', () => this.#dataplane.changeVips(add, remove))) ?? new Map<string, Error>();
    for (const ip of add) if (!vipFailures.has(ip)) applied[familyOf(ip)].add(ip);
    for (const ip of remove) if (!vipFailures.has(ip)) applied[familyOf(ip)].delete(ip);
    for (const [ip, error] of vipFailures) {
      const owners = new Set([...model.virtualServers.values()].filter((server) => server.service.address === ip).map((server) => server.owner));
      if (owners.size === 0) failures.add(`vip-cleanup/${ip}`, error);
      for (const owner of owners) failures.add(`service/${owner}`, error);
    }
  }
}
