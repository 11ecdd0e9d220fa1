import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** kube-router's protocol number on the kernel routes route-sync injects. */
const ROUTE_SYNC_PROTOCOL = '17';

async function inNetns(netns: string, command: string, args: readonly string[]): Promise<string> {
  return (await run('ip', ['netns', 'exec', netns, command, ...args], { timeout: 15_000, maxBuffer: 64 * 1024 * 1024 })).stdout;
}

/** What the agent programs on a node, in a form two snapshots of the same state compare equal in. */
export interface NodeDataplane {
  /** Per family, table and chain (sorted by those), each chain's rules in their order: `ipv4 filter KUBE-ROUTER-INPUT: -A ...`. */
  rules: string[];
  /** `ipset save` sorted, without each set's random hash seed. */
  sets: string[];
  /** The route-sync routes (proto 17) of both families, sorted; ECMP next hops are part of their route's line. */
  routes: string[];
}

/** The rules of a saved ruleset (`iptables-save`) by table and chain; counters and comments of the dump left out. */
function savedRules(family: string, saved: string): string[] {
  const chains = new Map<string, string[]>();
  let table = '';
  for (const line of saved.split('\n')) {
    if (line.startsWith('*')) table = line.slice(1);
    else if (line.startsWith(':')) chains.set(`${family} ${table} ${line.slice(1).split(' ')[0]}`, []);
    else if (line.startsWith('-A ')) chains.get(`${family} ${table} ${line.split(' ')[1]}`)?.push(line);
  }
  return [...chains.keys()].sort().flatMap((chain) => [`${chain}:`, ...chains.get(chain)!.map((rule) => `${chain}: ${rule}`)]);
}

function routeLines(output: string): string[] {
  // ECMP next hops continue a route on indented lines: joined to it.
  return output.replace(/\n\s+/g, ' ').split('\n').filter(Boolean).map((line) => line.trim());
}

export async function nodeDataplane(netns: string): Promise<NodeDataplane> {
  const [rules4, rules6, sets, routes4, routes6] = await Promise.all([
    inNetns(netns, 'iptables-save', []),
    inNetns(netns, 'ip6tables-save', []),
    inNetns(netns, 'ipset', ['save']),
    inNetns(netns, 'ip', ['-4', 'route', 'show', 'proto', ROUTE_SYNC_PROTOCOL]),
    inNetns(netns, 'ip', ['-6', 'route', 'show', 'proto', ROUTE_SYNC_PROTOCOL]),
  ]);
  return {
    rules: [...savedRules('ipv4', rules4), ...savedRules('ipv6', rules6)],
    sets: sets.split('\n').filter(Boolean).map((line) => line.replace(/ initval 0x[0-9a-f]+/, '')).sort(),
    routes: [...routeLines(routes4), ...routeLines(routes6)].sort(),
  };
}

function repeated(keys: readonly string[]): string[] {
  const counts = new Map<string, number>();
  for (const key of keys) counts.set(key, (counts.get(key) ?? 0) + 1);
  return [...counts].filter(([, count]) => count > 1).map(([key, count]) => `${count}x ${key}`);
}

/**
 * What a node has twice that it should have once: a commented rule repeated within its chain (kube-router's rules
 * carry stable comments; the pod chain's uncommented mark reset is there twice by design, so a comparison with an
 * earlier snapshot covers those), a set created twice, or two route-sync routes to one destination. Something applied
 * twice, by a restart that did not adopt what was there or two writers at once, shows up here.
 */
export function duplicates(state: NodeDataplane): string[] {
  const destinations = state.routes.map((route) => route.split(' ')[0]!);
  return [
    ...repeated(state.rules.filter((rule) => rule.includes(' --comment '))).map((rule) => `rule: ${rule}`),
    ...repeated(state.sets.filter((line) => line.startsWith('create ')).map((line) => line.split(' ')[1]!)).map((set) => `ipset: ${set}`),
    ...repeated(destinations).map((route) => `route proto ${ROUTE_SYNC_PROTOCOL}: ${route}`),
  ];
}
