import { inCidrs, parseCidrs } from '@kube-router/kube';
import { CommandError, IpRoute2 } from '@kube-router/netfilter';
import type { CommandRunner, IpLinkAddresses } from '@kube-router/netfilter';
import { POD_BRIDGE } from './names.js';

/*
 * Why hairpin_mode: a pod that connects to its own Service address is DNATed (by IPVS) back to itself, so the reply
 * frame has to leave the bridge through the very port it came in by; a bridge never does that unless the port has
 * hairpin_mode on. kube-router turned it on per local endpoint of a hairpin Service (hairpin_controller.go,
 * ensureHairpinEnabledForPodInterface) and since 2024 leaves it to the CNI bridge plugin's `"hairpinMode": true`;
 * this does what the former did, for nodes whose CNI configuration does not say so.
 *
 * How the pod's port is found, without a container runtime: kube-router asked the CRI for the pod's container, read
 * /proc/<pid>/root/sys/class/net/eth0/iflink and took the host interface with that index, which needs the runtime
 * socket, hostPID and an eth0 in the pod. Every answer needed here is already in the node's own network namespace,
 * in the tables the bridge and the node's IP stack keep for the pods on it:
 *
 *   pod IP --(neighbour table of kube-bridge)--> pod MAC --(bridge FDB, learned entries)--> bridge port (the veth).
 *
 * That is two `ip`/`bridge` listings with the privileges the proxy already has (NET_ADMIN, host network), for both
 * families alike, whatever the runtime, the netns paths or the pod's interface name. Both tables are caches, so an
 * entry can be missing: a neighbour entry appears once the node and the pod exchanged a packet (a probe, the pod's
 * first packet to its gateway), an FDB entry ages out after the bridge's ageing_time of silence. So a missing entry is
 * asked for from the kernel, not guessed: with no MAC the neighbour becomes a `managed` one (Linux 5.16: the kernel
 * resolves it at once, its ARP/ND reply from the pod teaches the bridge the pod's port), with a MAC but no FDB entry
 * the neighbour is set to `probe` (a unicast probe whose reply is learned the same way). The managed flag is dropped
 * again once the port is known, so no entry is kept probing. What is still not found is a failure of that address,
 * retried at the next sync.
 *
 * Rejected: the host-local IPAM files (IP -> container ID) need the runtime as well to get to a netns; the named netns
 * under /run/netns need that directory mounted into the agent and depend on the runtime's naming; matching the veth
 * peer's ifindex needs the pod's netns entered anyway.
 *
 * Hairpin is never turned off here: the CNI plugin's hairpinMode (this project's CNI file sets it) or an operator
 * may have turned it on, and a port left on costs nothing but a pod seeing its own broadcasts.
 */

export interface BridgeHairpinOptions {
  readonly runner: CommandRunner;
  /** The node's network namespace, when the agent runs outside it (tests, the lab). */
  readonly netns?: string;
  readonly timeoutMs: number;
  /** The pods' bridge; kube-router's kube-bridge. */
  readonly bridge?: string;
  /** How long to wait for the kernel to resolve what was asked for before looking again in the same sync. */
  readonly settleMs?: number;
}

export interface BridgeHairpinReport {
  /** False when the node has no such bridge: a routed pod network needs no hairpin_mode, and nothing was done. */
  readonly bridgePresent: boolean;
  /** Ports whose hairpin_mode this run turned on. */
  readonly enabled: readonly string[];
  /** The bridge port of each endpoint found on the bridge, by address. */
  readonly ports: ReadonlyMap<string, string>;
  /** Addresses whose port was not found or could not be changed; retried at the next sync. */
  readonly failures: ReadonlyMap<string, Error>;
}

interface BridgePort {
  readonly ifname: string;
  readonly hairpin: boolean;
}

interface Neighbour {
  readonly dst: string;
  readonly lladdr?: string;
  readonly state?: readonly string[];
  readonly managed?: unknown;
}

interface FdbEntry {
  readonly mac: string;
  readonly ifname: string;
  readonly master?: string;
  readonly state?: string;
  readonly flags?: readonly string[];
}

interface LinkDetails {
  readonly ifname: string;
  readonly linkinfo?: { readonly info_slave_kind?: string; readonly info_slave_data?: { readonly hairpin?: boolean } };
}

const DEFAULT_SETTLE_MS = 300;

/** Turns hairpin_mode on for the bridge ports of given pod addresses; one job, one instance per controller. */
export class BridgeHairpin {
  readonly bridge: string;
  readonly #ip: IpRoute2;
  readonly #options: BridgeHairpinOptions;

  constructor(options: BridgeHairpinOptions) {
    this.#options = options;
    this.bridge = options.bridge ?? POD_BRIDGE;
    this.#ip = new IpRoute2({ runner: options.runner, timeoutMs: options.timeoutMs, ...(options.netns !== undefined && { netns: options.netns }) });
  }

  /**
   * Ensures hairpin_mode on the bridge port of every address that lies in the bridge's subnets; others (host-network
   * endpoints, pods of another CNI) are not on the bridge and are left alone. Rejects only when the tables cannot
   * be read at all.
   */
  async ensure(addresses: Iterable<string>): Promise<BridgeHairpinReport> {
    const wanted = [...new Set(addresses)];
    const enabled: string[] = [];
    const found = new Map<string, string>();
    const failures = new Map<string, Error>();
    const none = (bridgePresent: boolean): BridgeHairpinReport => ({ bridgePresent, enabled, ports: found, failures });
    if (wanted.length === 0) return none(true);

    const ports = await this.#ports();
    if (ports === undefined) return none(false);
    const subnets = parseCidrs(
      (await this.#ip.addresses(this.bridge)).flatMap((link: IpLinkAddresses) =>
        link.addr_info.filter((info) => info.scope !== 'link').map((info) => `${info.local}/${info.prefixlen}`),
      ),
    );
    let pending = wanted.filter((address) => inCidrs(address, subnets));
    const problems = new Map<string, string>();
    const askFailures = new Map<string, Error>();

    for (let round = 0; round < 2 && pending.length > 0; round++) {
      const askKernel = round === 0;
      const neighbours = await this.#neighbours();
      const portOfMac = await this.#learnedPorts();
      const commands: { address: string; command: string }[] = [];
      const unresolved: string[] = [];
      for (const address of pending) {
        const neighbour = neighbours.get(address);
        const mac = usableMac(neighbour);
        const port = mac === undefined ? undefined : portOfMac.get(mac);
        if (mac !== undefined && port !== undefined && ports.has(port)) {
          found.set(address, port);
          if (!(ports.get(port) as BridgePort).hairpin && !enabled.includes(port)) {
            commands.push({ address, command: `link set dev ${port} type bridge_slave hairpin on` });
            enabled.push(port);
          }
          // Known now: no longer a managed entry that the kernel would keep re-resolving for us.
          if (neighbour?.managed !== undefined) commands.push({ address, command: `neigh replace ${address} dev ${this.bridge} lladdr ${mac} nud stale` });
          continue;
        }
        unresolved.push(address);
        problems.set(
          address,
          mac === undefined
            ? `no neighbour entry with a MAC address on ${this.bridge}`
            : `MAC ${mac} is not learned on any port of ${this.bridge}${port !== undefined ? ` (it is on ${port})` : ''}`,
        );
        if (!askKernel) continue;
        commands.push({
          address,
          command: mac === undefined ? `neigh replace ${address} dev ${this.bridge} managed` : `neigh replace ${address} dev ${this.bridge} lladdr ${mac} nud probe`,
        });
      }
      if (askKernel) {
        // Managed entries left by an earlier run (a pod that went away before it answered) would be probed forever.
        for (const neighbour of neighbours.values()) {
          if (neighbour.managed !== undefined && !pending.includes(neighbour.dst)) commands.push({ address: neighbour.dst, command: `neigh del ${neighbour.dst} dev ${this.bridge}` });
        }
      }
      for (const failure of await this.#ip.batchEach(commands.map((entry) => entry.command))) {
        const entry = commands[failure.line - 1];
        if (entry === undefined) continue;
        const port = found.get(entry.address);
        if (port === undefined && pending.includes(entry.address)) {
          // A kernel before 5.16 has no managed neighbours: the address is then found once the node and the pod talk.
          askFailures.set(entry.address, failure.error);
          continue;
        }
        if (port !== undefined && entry.command.startsWith('link set')) enabled.splice(enabled.indexOf(port), 1);
        failures.set(entry.address, failure.error);
      }
      pending = unresolved;
      if (pending.length > 0 && askKernel) await new Promise((resolve) => setTimeout(resolve, this.#options.settleMs ?? DEFAULT_SETTLE_MS));
    }
    for (const address of pending) {
      const asked = askFailures.get(address);
      const detail = [problems.get(address) ?? 'unknown', ...(asked ? [`asking the kernel to resolve it failed: ${asked.message}`] : [])].join('; ');
      failures.set(address, new Error(`bridge port of ${address} not found yet: ${detail}; hairpin_mode is set at the next sync`));
    }
    return { bridgePresent: true, enabled, ports: found, failures };
  }

  /** The bridge's ports with their hairpin flag; undefined when the bridge does not exist. */
  async #ports(): Promise<Map<string, BridgePort> | undefined> {
    let links: LinkDetails[];
    try {
      links = await this.#ip.json<LinkDetails[]>(['-d', 'link', 'show', 'master', this.bridge]);
    } catch (error) {
      if (error instanceof CommandError && /does not exist/i.test(error.stderr)) return undefined;
      throw error;
    }
    const ports = new Map<string, BridgePort>();
    for (const link of links) {
      if (link.linkinfo?.info_slave_kind !== 'bridge') continue;
      ports.set(link.ifname, { ifname: link.ifname, hairpin: link.linkinfo.info_slave_data?.hairpin === true });
    }
    return ports;
  }

  async #neighbours(): Promise<Map<string, Neighbour>> {
    const entries = await this.#ip.json<Neighbour[]>(['neigh', 'show', 'dev', this.bridge]);
    return new Map(entries.map((entry) => [entry.dst, entry]));
  }

  /** MAC -> port of the entries the bridge learned (not the ports' own permanent ones, not the bridge's). */
  async #learnedPorts(): Promise<Map<string, string>> {
    const { stdout } = await this.#options.runner.run({
      command: 'bridge',
      args: ['-j', 'fdb', 'show', 'br', this.bridge],
      timeoutMs: this.#options.timeoutMs,
      ...(this.#options.netns !== undefined && { netns: this.#options.netns }),
    });
    const trimmed = stdout.trim();
    const entries = (trimmed === '' ? [] : JSON.parse(trimmed)) as FdbEntry[];
    const out = new Map<string, string>();
    for (const entry of entries) {
      if (entry.master !== this.bridge || entry.ifname === this.bridge || entry.state === 'permanent' || entry.flags?.includes('self')) continue;
      out.set(entry.mac.toLowerCase(), entry.ifname);
    }
    return out;
  }
}

/** The MAC of a neighbour entry the kernel still trusts; INCOMPLETE and FAILED entries have none worth using. */
function usableMac(neighbour: Neighbour | undefined): string | undefined {
  if (!neighbour?.lladdr) return undefined;
  if (neighbour.state?.some((state) => state === 'FAILED' || state === 'INCOMPLETE')) return undefined;
  return neighbour.lladdr.toLowerCase();
}
