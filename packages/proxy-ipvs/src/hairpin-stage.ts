import { messageOf } from '@kube-router/controller';
import type { SyncFailures } from '@kube-router/controller';
import type { Logger } from 'pino';
import { BridgeHairpin } from './bridge-hairpin.js';
import type { BridgeHairpinOptions } from './bridge-hairpin.js';
import type { ProxyModel } from './model.js';

/**
 * hairpin_mode on the kube-bridge port of each local endpoint of a hairpin Service, so that the SNATed reply to a
 * pod reaching itself through its Service gets back out of the port it came in by. Checked at every sync: a
 * restarted pod keeps its address but gets a new port. Nothing runs without hairpin Services or without the bridge.
 */
export class HairpinStage {
  readonly #bridgeHairpin: BridgeHairpin;
  readonly #logger: Logger;

  constructor(options: BridgeHairpinOptions, logger: Logger) {
    this.#bridgeHairpin = new BridgeHairpin(options);
    this.#logger = logger;
  }

  async reconcile(model: ProxyModel, failures: SyncFailures): Promise<void> {
    if (model.hairpinEndpoints.size === 0) return;
    const hairpin = await failures.attempt('bridge-hairpin', () => this.#bridgeHairpin.ensure(model.hairpinEndpoints.keys()));
    for (const [address, error] of hairpin?.failures ?? []) {
      const owners = model.hairpinEndpoints.get(address) ?? [];
      failures.add(`bridge-hairpin/${address}`, owners.length > 0 ? new Error(`${messageOf(error)} (endpoint of ${owners.join(', ')})`, { cause: error }) : error);
    }
    if (hairpin && hairpin.enabled.length > 0) {
      this.#logger.info({ ports: hairpin.enabled, bridge: this.#bridgeHairpin.bridge }, 'hairpin_mode turned on for bridge ports of hairpin Service endpoints');
    }
  }
}
