import { randomBytes } from 'node:crypto';
import { open, readFile, realpath, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { SyncFailures } from '@kube-router/controller';
import { parseIp } from '@kube-router/kube';
import type { IpLinkAddresses, IpRoute2 } from '@kube-router/netfilter';
import type { Logger } from 'pino';
import { editCniConfig } from './cni-config.js';

/** The bridge kube-router's CNI configuration attaches pods to. */
export const KUBE_BRIDGE = 'kube-bridge';
const ZERO_MAC = '00:00:00:00:00:00';

/** A random unicast, locally administered MAC address. */
function randomLocalMac(): string {
  const bytes = randomBytes(6);
  bytes[0] = (bytes[0]! & 0xfe) | 0x02;
  return [...bytes].map((byte) => byte.toString(16).padStart(2, '0')).join(':');
}

/** The link that holds the node's address (kube-router's node interface), read from `ip -j address`. */
export async function nodeLink(ip: IpRoute2, nodeAddress: string): Promise<IpLinkAddresses> {
  const wanted = parseIp(nodeAddress)?.text;
  const links = await ip.addresses();
  const link = links.find((l) => l.addr_info.some((a) => parseIp(a.local)?.text === wanted));
  if (!link) throw new Error(`no interface holds the node's address ${nodeAddress}`);
  return link;
}

/** kube-router's default for KUBE_ROUTER_CNI_CONF_FILE. */
export const DEFAULT_CNI_CONF_FILE = '/etc/cni/net.d/10-kuberouter.conf';

export interface PodNetworkOptions {
  readonly ip: IpRoute2;
  readonly logger: Logger;
  /** --enable-cni: the CNI configuration file to keep (KUBE_ROUTER_CNI_CONF_FILE); undefined with --enable-cni=false. */
  readonly cniConfFile?: string | undefined;
  /** --auto-mtu: kube-bridge and the CNI bridge take the MTU of the interface that holds the node's address. */
  readonly autoMtu: boolean;
}

/**
 * The node side of pod networking that kube-router's routing controller sets up: kube-bridge exists and is up (with
 * the node's MTU under --auto-mtu), and the CNI file lists the node's pod CIDRs as host-local ranges. kube-router
 * does this once at start and exits when it fails; here every sync checks it, so a pod CIDR assigned after start or
 * a file put back by the install-cni init container is taken up, and a failure is a failed step that is retried.
 */
export class PodNetwork {
  readonly #options: PodNetworkOptions;
  /** The ifindex of the kube-bridge whose address this process has set: a bridge made anew is pinned again. */
  #pinnedBridge: number | undefined;

  constructor(options: PodNetworkOptions) {
    this.#options = options;
  }

  /** One pass; each failing part is joined (`auto-mtu`, `kube-bridge`, `kube-bridge/mtu`, `cni-conf`), the rest still runs. */
  async sync(podCidrs: readonly string[], nodeAddress: string): Promise<void> {
    const failures = new SyncFailures();
    const nodeMtu = this.#options.autoMtu ? await failures.attempt('auto-mtu', () => this.#nodeMtu(nodeAddress)) : undefined;
    const bridgeMtu = await failures.attempt(KUBE_BRIDGE, () => this.#ensureBridge(nodeMtu, failures));
    const { cniConfFile } = this.#options;
    if (cniConfFile !== undefined) {
      // kube-router falls back to the bridge's own MTU when it cannot set the node's: pods and bridge must agree.
      const mtu = nodeMtu === undefined ? undefined : (bridgeMtu ?? nodeMtu);
      await failures.attempt('cni-conf', () => this.#ensureCniConf(cniConfFile, podCidrs, mtu));
    }
    failures.throwIfAny('pod network');
  }

  /** kube-router's GetNodeMTU: the MTU of the link that holds the node's primary address. */
  async #nodeMtu(nodeAddress: string): Promise<number> {
    return (await nodeLink(this.#options.ip, nodeAddress)).mtu;
  }

  /**
   * Creates kube-bridge when missing (one made meanwhile by the bridge plugin is taken as it is), pins its MAC, brings
   * it up and sets the MTU; each of those is an attempt of its own (`kube-bridge/mac`, `/up`, `/mtu`). Returns the
   * MTU the bridge has afterwards.
   */
  async #ensureBridge(mtu: number | undefined, failures: SyncFailures): Promise<number> {
    const { ip, logger } = this.#options;
    const find = async () => (await ip.links()).find((link) => link.ifname === KUBE_BRIDGE);
    let bridge = await find();
    if (!bridge) {
      try {
        await ip.batch([`link add name ${KUBE_BRIDGE} type bridge`]);
        logger.info({ bridge: KUBE_BRIDGE }, 'created kube-bridge');
      } catch (error) {
        if (!(await find())) throw error;
      }
      bridge = await find();
      if (!bridge) throw new Error(`${KUBE_BRIDGE} is not there after ip link add`);
    }
    const { ifindex, address } = bridge;
    if (ifindex !== this.#pinnedBridge || address === undefined || address === ZERO_MAC) {
      // A bridge whose address is not set takes its lowest port's, and all zeros once its last port has gone: a pod
      // refused before the CNI file had ranges leaves it so, and the bridge plugin then fails every later pod
      // ("could not set bridge's mac"). Setting the address pins it, as the bridge plugin itself does on success;
      // a bridge made anew (another ifindex) is pinned again.
      const mac = address === undefined || address === ZERO_MAC ? randomLocalMac() : address;
      const pinned = await failures.attempt(`${KUBE_BRIDGE}/mac`, () => ip.batch([`link set dev ${KUBE_BRIDGE} address ${mac}`]).then(() => true));
      if (pinned) {
        if (address === ZERO_MAC) logger.warn({ bridge: KUBE_BRIDGE, mac }, 'kube-bridge had no MAC address (its ports are gone); gave it one');
        this.#pinnedBridge = ifindex;
      }
    }
    if (!bridge.flags.includes('UP')) await failures.attempt(`${KUBE_BRIDGE}/up`, () => ip.batch([`link set dev ${KUBE_BRIDGE} up`]));
    if (mtu === undefined || bridge.mtu === mtu) return bridge.mtu;
    const set = await failures.attempt(`${KUBE_BRIDGE}/mtu`, () => ip.batch([`link set dev ${KUBE_BRIDGE} mtu ${mtu}`]).then(() => true));
    if (!set) return bridge.mtu;
    logger.info({ bridge: KUBE_BRIDGE, mtu }, 'set the MTU of kube-bridge');
    return mtu;
  }

  async #ensureCniConf(path: string, podCidrs: readonly string[], mtu: number | undefined): Promise<void> {
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
      throw new Error(
        missing
          ? `CNI conf file ${path} does not exist: kube-router's install-cni init container writes it (set KUBE_ROUTER_CNI_CONF_FILE to where it is, or --enable-cni=false)`
          : `cannot read CNI conf file ${path}: ${(error as Error).message}`,
        { cause: error },
      );
    }
    const edited = editCniConfig(text, path, { podCidrs, mtu });
    if (!edited.changed) return;
    await writeAtomically(path, edited.text);
    this.#options.logger.info({ file: path, ranges: edited.ranges, ...(mtu !== undefined && { mtu }) }, 'wrote the pod CIDRs into the CNI configuration');
  }
}

/**
 * Writes a file so that a reader (the container runtime loading CNI configurations) sees the old content or the
 * new one, never a part: a temporary file beside it with the same mode, flushed, renamed over it, the directory
 * flushed. A symbolic link is followed, so it stays a link. Where a rename cannot replace the file (a file
 * bind-mounted by itself: EBUSY, EXDEV), it is written in place, as kube-router always writes it.
 */
async function writeAtomically(path: string, text: string): Promise<void> {
  const target = await realpath(path).catch(() => path);
  const mode = (await stat(target).catch(() => undefined))?.mode ?? 0o644;
  const temporary = join(dirname(target), `.${basename(target)}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    await writeAndFlush(temporary, text, 'wx', mode & 0o7777);
    try {
      await rename(temporary, target);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'EBUSY' && code !== 'EXDEV') throw error;
      await writeAndFlush(target, text, 'w');
      await rm(temporary, { force: true });
      return;
    }
    const directory = await open(dirname(target), 'r');
    await directory.sync().finally(() => directory.close());
  } catch (error) {
    await rm(temporary, { force: true }).catch(() => undefined);
    throw new Error(`cannot write CNI conf file ${path}: ${(error as Error).message}`, { cause: error });
  }
}

async function writeAndFlush(path: string, text: string, flags: 'w' | 'wx', mode?: number): Promise<void> {
  const file = await open(path, flags, mode);
  try {
    // open's mode is narrowed by the umask; the copy must keep the file's own.
    if (mode !== undefined) await file.chmod(mode);
    await file.writeFile(text);
    await file.sync();
  } finally {
    await file.close();
  }
}
