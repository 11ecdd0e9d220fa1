import { Backoff } from '@kube-router/kube';
import { killLeftoverNflogReaders, startNflogReader } from '@kube-router/netfilter';
import type { NflogPacket, NflogReader, NflogReaderOptions } from '@kube-router/netfilter';
import { parseIp } from '../cidr.js';
import { actionablePodsByIp } from '../pods.js';
import type { PodLike } from '../types.js';
import { NFLOG_GROUP } from './names.js';

/** The Event reason of a drop, on the pod it was meant for. */
export const POLICY_DROP_REASON = 'PolicyDrop';
/** At most this many pairs are held in the rate limit at once; drops of further pairs are counted, not logged. */
const MAX_TRACKED_PAIRS = 10_000;
/** A tcpdump that read this long before it ended starts again after the shortest delay. */
const HEALTHY_RUN_MS = 30_000;

/** What the drop log writes with: the plugin's logger. */
export interface DropLogLogger {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
}

export interface DropLogOptions {
  /** Reads the NFLOG group of this network namespace (the backend's `netns`). */
  readonly netns?: string;
  /** Records a Warning Event (reason PolicyDrop) on the pod each logged drop was meant for. */
  readonly events: boolean;
  /** Per (source, destination, port, protocol): one line at once, then at most one per this window. 0: every drop. */
  readonly intervalMs: number;
}

export interface DropLogDeps {
  readonly logger: DropLogLogger;
  /** This node: an Event goes on the pod here whose chain rejected the packet. */
  readonly nodeName?: string;
  /** The cluster's pods: the drop's addresses are named by them. */
  pods(): readonly PodLike[];
  /** Calls `handler` after pods changed; returns a function that removes it. */
  onChange(handler: () => void): () => void;
  /** Records a Warning Event on a pod (the informer's object when known). Needed with `events`. */
  warnPod?(namespace: string, name: string, reason: string, message: string): void;
  /** @internal A test's reader in place of tcpdump. */
  readonly startReader?: (options: NflogReaderOptions) => NflogReader;
  /** @internal Restart delays. */
  readonly backoff?: Backoff;
  /** @internal The clock of the rate limit's windows (milliseconds, monotonic). */
  readonly now?: () => number;
}

/** One drop as the log writes it. */
export interface DropRecord {
  readonly src: string;
  readonly dst: string;
  readonly srcPod?: string;
  readonly dstPod?: string;
  readonly protocol: string;
  readonly port?: number;
  readonly srcPort?: number;
  readonly family: string;
  readonly prefix?: string;
}

/** A pod as the drop log names it, and where it runs. */
interface PodName {
  readonly id: string;
  readonly node: string | undefined;
}

interface Window {
  readonly record: DropRecord;
  readonly closesAt: number;
  suppressed: number;
}

/**
 * The drop log (--netpol-drop-log): every packet the pod chains reject is logged to NFLOG group 100 (rate-limited by
 * the rule, 10/minute with a burst of 10 per chain); this reads the group through tcpdump, names each side by the
 * cluster's pods, and writes one structured line per drop, rate-limited per (source, destination, port, protocol)
 * pair, with a summary of the drops it held back. A tcpdump that ends is started again with backoff and logged; it
 * never touches the firewall. Nothing of it runs until start().
 */
export class DropLog {
  readonly #options: DropLogOptions;
  readonly #deps: DropLogDeps;
  readonly #backoff: Backoff;
  readonly #now: () => number;
  /** Open windows by pair, in the order they opened: every window is as long, so the first closes first. */
  readonly #windows = new Map<string, Window>();
  /** One timer for the first window to close, not one per pair. */
  #windowTimer: NodeJS.Timeout | undefined;
  #overflow = 0;
  #podsByIp: Map<string, PodName> | undefined;
  #unsubscribe: (() => void) | undefined;
  #reader: NflogReader | undefined;
  #restartTimer: NodeJS.Timeout | undefined;
  #running = false;

  constructor(options: DropLogOptions, deps: DropLogDeps) {
    this.#options = options;
    this.#deps = deps;
    this.#backoff = deps.backoff ?? new Backoff({ initialMs: 1_000, maxMs: 60_000 });
    this.#now = deps.now ?? (() => performance.now());
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#unsubscribe = this.#deps.onChange(() => (this.#podsByIp = undefined));
    if (this.#deps.startReader) {
      this.#startReader();
      return;
    }
    // The kernel gives a group to one reader: one an agent killed with SIGKILL left behind must go first.
    const where = this.#options.netns === undefined ? {} : { netns: this.#options.netns };
    void killLeftoverNflogReaders(NFLOG_GROUP, this.#options.netns)
      .then(
        (killed) => killed.length > 0 && this.#deps.logger.info({ killed, ...where }, 'drop log: killed the NFLOG reader an earlier agent left'),
        (error: unknown) => this.#deps.logger.warn({ err: error, ...where }, 'drop log: could not look for a leftover NFLOG reader'),
      )
      .finally(() => this.#startReader());
  }

  /** Stops tcpdump and writes the summaries still held back. */
  async stop(): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    clearTimeout(this.#restartTimer);
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    // Pod events are not followed while stopped: a later start names pods afresh.
    this.#podsByIp = undefined;
    const reader = this.#reader;
    this.#reader = undefined;
    await reader?.stop();
    this.#closeWindows(Infinity);
  }

  /** One packet of the group: logged, or counted into its pair's window. */
  record(packet: NflogPacket): void {
    const src = parseIp(packet.src)?.text ?? packet.src;
    const dst = parseIp(packet.dst)?.text ?? packet.dst;
    const pods = this.#pods();
    const srcPod = pods.get(src)?.id;
    const dstPod = pods.get(dst)?.id;
    const record: DropRecord = {
      src,
      dst,
      ...(srcPod === undefined ? {} : { srcPod }),
      ...(dstPod === undefined ? {} : { dstPod }),
      protocol: packet.protocol,
      ...(packet.dstPort === undefined ? {} : { port: packet.dstPort }),
      ...(packet.srcPort === undefined ? {} : { srcPort: packet.srcPort }),
      family: packet.family,
      ...(packet.prefix ? { prefix: packet.prefix } : {}),
    };
    if (this.#options.intervalMs <= 0) {
      this.#write(record);
      return;
    }
    const key = `${src} ${dst} ${packet.dstPort ?? ''} ${packet.protocol}`;
    const window = this.#windows.get(key);
    if (window) {
      window.suppressed++;
      return;
    }
    if (this.#windows.size >= MAX_TRACKED_PAIRS) {
      // Told with the summaries of the first window to close.
      this.#overflow++;
      return;
    }
    this.#write(record);
    this.#windows.set(key, { record, closesAt: this.#now() + this.#options.intervalMs, suppressed: 0 });
    this.#scheduleWindows();
  }

  #scheduleWindows(): void {
    if (this.#windowTimer !== undefined) return;
    const first = this.#windows.values().next();
    if (first.done) return;
    this.#windowTimer = setTimeout(() => {
      this.#windowTimer = undefined;
      this.#closeWindows(this.#now());
      this.#scheduleWindows();
    }, Math.max(0, first.value.closesAt - this.#now()));
    this.#windowTimer.unref();
  }

  #write(record: DropRecord): void {
    this.#deps.logger.info({ ...record }, 'packet dropped by network policy');
    if (!this.#options.events) return;
    // On the pod whose chain on this node rejected it: the destination's (ingress) when it runs here, else the
    // source's (egress; a pod elsewhere allowed it, and a drop on its way out of the cluster is the sender's).
    const pods = this.#pods();
    const here = (ip: string) => {
      const pod = pods.get(ip);
      return pod !== undefined && (this.#deps.nodeName === undefined || pod.node === this.#deps.nodeName) ? pod.id : undefined;
    };
    const target = here(record.dst) ?? here(record.src) ?? record.dstPod ?? record.srcPod;
    if (target === undefined || !this.#deps.warnPod) return;
    const [namespace = '', name = ''] = target.split('/');
    const port = record.port === undefined ? '' : `:${record.port}`;
    const from = record.srcPod === undefined ? record.src : `${record.src} (${record.srcPod})`;
    const to = record.dstPod === undefined ? record.dst : `${record.dst} (${record.dstPod})`;
    this.#deps.warnPod(namespace, name, POLICY_DROP_REASON, `network policy dropped ${record.protocol.toUpperCase()} from ${from} to ${to}${port}`);
  }

  /** Closes the windows that close by `now`, each with a summary of what it held back. */
  #closeWindows(now: number): void {
    for (const [key, window] of this.#windows) {
      if (window.closesAt > now) break;
      this.#windows.delete(key);
      if (window.suppressed === 0) continue;
      // The pair, without the first packet's source port: the summary counts packets from any.
      const { srcPort: _srcPort, ...pair } = window.record;
      this.#deps.logger.info(
        { ...pair, suppressed: window.suppressed, windowMs: this.#options.intervalMs },
        'more packets of this pair dropped by network policy (not logged one by one)',
      );
    }
    if (now === Infinity) {
      clearTimeout(this.#windowTimer);
      this.#windowTimer = undefined;
    }
    if (this.#overflow === 0) return;
    this.#deps.logger.warn(
      { suppressed: this.#overflow, trackedPairs: MAX_TRACKED_PAIRS },
      'packets dropped by network policy not logged: too many pairs at once',
    );
    this.#overflow = 0;
  }

  /** Pod addresses to `namespace/name`, rebuilt after pods changed (only when drops come). */
  #pods(): Map<string, PodName> {
    if (this.#podsByIp) return this.#podsByIp;
    const byIp = new Map<string, PodName>();
    for (const [ip, pod] of actionablePodsByIp(this.#deps.pods())) {
      byIp.set(ip, { id: `${pod.metadata?.namespace}/${pod.metadata?.name}`, node: pod.spec?.nodeName });
    }
    this.#podsByIp = byIp;
    return byIp;
  }

  #startReader(): void {
    if (!this.#running) return;
    const startReader = this.#deps.startReader ?? startNflogReader;
    let listeningSince: number | undefined;
    const reader = startReader({
      group: NFLOG_GROUP,
      ...(this.#options.netns === undefined ? {} : { netns: this.#options.netns }),
      onPacket: (packet) => this.record(packet),
      onSkipped: (error) => this.#deps.logger.warn({ err: error }, 'drop log: skipped an NFLOG record'),
    });
    this.#reader = reader;
    reader.listening.then(
      () => {
        listeningSince = performance.now();
        this.#deps.logger.info({ group: NFLOG_GROUP, ...(this.#options.netns && { netns: this.#options.netns }) }, 'drop log reading NFLOG group');
      },
      () => undefined,
    );
    void reader.ended.then((end) => {
      if (end.stopped || !this.#running || this.#reader !== reader) return;
      if (listeningSince !== undefined && performance.now() - listeningSince >= HEALTHY_RUN_MS) this.#backoff.reset();
      const restartInMs = this.#backoff.next();
      this.#deps.logger.warn({ reason: end.reason, restartInMs }, 'drop log: tcpdump ended; starting it again');
      this.#restartTimer = setTimeout(() => this.#startReader(), restartInMs);
      this.#restartTimer.unref();
    });
  }
}
