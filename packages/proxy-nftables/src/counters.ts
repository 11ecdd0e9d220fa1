import type { ServiceTraffic } from '@kube-router/metrics';
import type { ServiceCounter } from './render.js';

/** One named counter's count as the kernel has it. */
export interface CounterValue {
  readonly packets: number;
  readonly bytes: number;
}

/** About this much of the listing is parsed between two yields to the event loop (a few ms each). */
const PARSE_SLICE_CHARS = 256 * 1024;
/** Between two counter objects of nft's JSON: a counter object holds no deeper object, so this never splits one. */
const BETWEEN_COUNTERS = '}}, {"counter": ';

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Parses `nft -j list counters table …`: name → count. At 10,000 Services the listing holds some 30,000 counters (about
 * 4 MiB); one JSON.parse of it would hold the event loop (health probes, the API watch) for 100 ms or more on a busy
 * node, so the array is parsed a slice of objects at a time, cut between two counter objects, with yields in between.
 * Anything that is not a well-formed counter is skipped.
 */
export async function parseCounterListing(json: string): Promise<Map<string, CounterValue>> {
  const counters = new Map<string, CounterValue>();
  const add = (items: unknown[]) => {
    for (const item of items) {
      const counter = (item as { counter?: { name?: unknown; packets?: unknown; bytes?: unknown } } | null)?.counter;
      if (!counter || typeof counter.name !== 'string' || typeof counter.packets !== 'number' || typeof counter.bytes !== 'number') continue;
      counters.set(counter.name, { packets: counter.packets, bytes: counter.bytes });
    }
  };
  const trimmed = json.trim();
  if (trimmed === '') return counters;
  const open = trimmed.indexOf('[');
  const close = trimmed.lastIndexOf(']');
  if (!/^\{\s*"nftables"\s*:\s*\[/.test(trimmed) || close < open) throw new SyntaxError('nft JSON output has no "nftables" array');
  let from = open + 1;
  while (from < close) {
    const boundary = close - from > PARSE_SLICE_CHARS ? trimmed.indexOf(BETWEEN_COUNTERS, from + PARSE_SLICE_CHARS) : -1;
    // Up to and with the `}}` that closes the last object of the slice; the next slice starts at its `{"counter"`.
    const to = boundary < 0 || boundary > close ? close : boundary + 2;
    add(JSON.parse(`[${trimmed.slice(from, to)}]`) as unknown[]);
    if (to === close) break;
    from = to + 2;
    await yieldToLoop();
  }
  return counters;
}

/**
 * The series of each Service address from its three counters (connections: the packets of the one the nat chain
 * counts; in and out: packets and bytes per direction). Counters the plugin did not write, or no longer has, are left
 * out; an address shows once any of its counters was read.
 */
export function serviceTraffic(written: ReadonlyMap<string, ServiceCounter>, values: ReadonlyMap<string, CounterValue>): ServiceTraffic[] {
  const byAddress = new Map<string, Mutable<ServiceTraffic>>();
  for (const [name, value] of values) {
    const counter = written.get(name);
    if (!counter) continue;
    const key = `${counter.owner}|${counter.address}|${counter.protocol}|${counter.port}`;
    let traffic = byAddress.get(key);
    if (!traffic) {
      const slash = counter.owner.indexOf('/');
      traffic = {
        labels: {
          svc_namespace: counter.owner.slice(0, slash),
          service_name: counter.owner.slice(slash + 1),
          service_vip: counter.address,
          protocol: counter.protocol,
          port: String(counter.port),
        },
        connections: 0,
        packetsIn: 0,
        packetsOut: 0,
        bytesIn: 0,
        bytesOut: 0,
      };
      byAddress.set(key, traffic);
    }
    if (counter.kind === 'connections') traffic.connections = value.packets;
    else if (counter.kind === 'in') {
      traffic.packetsIn = value.packets;
      traffic.bytesIn = value.bytes;
    } else {
      traffic.packetsOut = value.packets;
      traffic.bytesOut = value.bytes;
    }
  }
  return [...byAddress.values()];
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };
