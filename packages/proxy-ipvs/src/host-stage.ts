import type { SyncFailures } from '@kube-router/controller';
import { PROXY_SYSCTLS } from './dataplane.js';
import type { Dataplane } from './dataplane.js';
import type { ResolvedProxyIpvsOptions } from './options.js';

type HostOptions = Pick<ResolvedProxyIpvsOptions, 'setSysctls' | 'tcpTimeoutSeconds' | 'tcpFinTimeoutSeconds' | 'udpTimeoutSeconds'>;

/** The node-wide kernel settings of IPVS (on full syncs) and the node's own addresses as last read. */
export class HostStage {
  readonly #dataplane: Dataplane;
  readonly #options: HostOptions;
  #localAddresses: string[] | undefined;

  constructor(dataplane: Dataplane, options: HostOptions) {
    this.#dataplane = dataplane;
    this.#options = options;
  }

  /** The node's addresses outside kube-dummy-if as the last successful read found them; none before one. */
  get localAddresses(): readonly string[] {
    return this.#localAddresses ?? [];
  }

  /** kube-router's sysctls (unless told not to) and the IPVS connection timeouts given. */
  async configure(failures: SyncFailures): Promise<void> {
    const { setSysctls, tcpTimeoutSeconds, tcpFinTimeoutSeconds, udpTimeoutSeconds } = this.#options;
    if (setSysctls) {
      for (const [key, value] of PROXY_SYSCTLS) await failures.attempt(`sysctl/${key}`, () => this.#dataplane.setSysctl(key, value));
    }
    if (tcpTimeoutSeconds || tcpFinTimeoutSeconds || udpTimeoutSeconds) {
      await failures.attempt('ipvs-timeouts', () =>
        this.#dataplane.ipvs.setTimeouts({ tcpSeconds: tcpTimeoutSeconds, tcpFinSeconds: tcpFinTimeoutSeconds, udpSeconds: udpTimeoutSeconds }),
      );
    }
  }

  /** Reads the node's addresses again; a failed read keeps the last ones. */
  async readLocalAddresses(failures: SyncFailures): Promise<void> {
    this.#localAddresses = (await failures.attempt('local-addresses', () => this.#dataplane.localAddresses())) ?? this.#localAddresses;
  }
}
