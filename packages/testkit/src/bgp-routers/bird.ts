import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  canonicalPrefix,
  neighborFamilies,
  prefixFamily,
  validateRouterConfig,
  type BgpExportPolicy,
  type BgpFamily,
  type BgpImportPolicy,
  type BgpRouterConfig,
  type BgpRouterNeighbor,
} from './config.js';
import { cliRunner, DaemonRouter, makeWorkDir, sessionState, type BgpRoute, type BgpRouter, type BgpSession } from './router.js';

/** The BIRD protocol name of the i-th neighbor. */
export function birdProtocolName(index: number): string {
  return `peer${index + 1}`;
}

/** The BIRD 2 configuration for a router. Exported for tests and for reading what a router runs. */
export function renderBirdConfig(config: BgpRouterConfig): string {
  validateRouterConfig(config);
  const lines = [
    `router id ${config.routerId};`,
    // Unix seconds: one token per column in `show protocols`, whatever the date.
    'timeformat protocol "%s";',
    // Route times to the microsecond: a benchmark reads when the last path arrived from them.
    'timeformat route "%s.%6f";',
    'log stderr all;',
    // Interfaces and connected routes: BIRD resolves BGP next hops against them.
    'protocol device { scan time 1; }',
    'protocol direct { ipv4; ipv6; }',
  ];
  for (const family of ['ipv4', 'ipv6'] as const) {
    // Without export the kernel protocol only keeps BIRD aware of routes the test added with `ip route`
    // (a multihop neighbor's route); with installRoutes it also installs the best BGP routes, equal ones as ECMP.
    const exportRule = config.installRoutes ? 'export where source = RTS_BGP' : 'export none';
    lines.push(`protocol kernel kernel_${family} { ${family} { import all; ${exportRule}; }; learn; scan time 1;${config.installRoutes ? ' merge paths on;' : ''} }`);
  }
  for (const family of ['ipv4', 'ipv6'] as const) {
    const routes = (config.staticRoutes ?? []).filter((route) => prefixFamily(route.prefix) === family);
    if (routes.length === 0) continue;
    lines.push(`protocol static static_${family} {`, `  ${family};`);
    for (const route of routes) {
      const attributes = [
        ...(route.communities ?? []).map((community) => `bgp_community.add((${community.replace(':', ',')}));`),
        ...(route.largeCommunities ?? []).map((community) => `bgp_large_community.add((${community.replaceAll(':', ',')}));`),
      ];
      lines.push(`  route ${canonicalPrefix(route.prefix)} blackhole${attributes.length > 0 ? ` { ${attributes.join(' ')} }` : ''};`);
    }
    lines.push('}');
  }
  config.neighbors.forEach((neighbor, index) => lines.push(...birdProtocol(config, neighbor, birdProtocolName(index))));
  if (config.extraConfig) lines.push(config.extraConfig);
  return `${lines.join('\n')}\n`;
}

function birdProtocol(config: BgpRouterConfig, neighbor: BgpRouterNeighbor, name: string): string[] {
  const local = [neighbor.localAddress, config.listenPort !== undefined && `port ${config.listenPort}`, `as ${config.asn}`].filter(Boolean).join(' ');
  const lines = [
    `protocol bgp ${name} {`,
    `  local ${local};`,
    `  neighbor ${neighbor.address}${neighbor.port !== undefined ? ` port ${neighbor.port}` : ''} as ${neighbor.asn};`,
    // A test's peer comes back within a second or two of a flap or restart, not after BIRD's 5 s and 120 s waits.
    '  connect delay time 1;',
    '  connect retry time 2;',
    '  error wait time 1, 10;',
  ];
  if (neighbor.password !== undefined) lines.push(`  password "${neighbor.password}";`);
  if (neighbor.multihopTtl !== undefined) lines.push(`  multihop ${neighbor.multihopTtl};`);
  if (neighbor.passive) lines.push('  passive on;');
  if (neighbor.routeReflectorClient) lines.push('  rr client;', `  rr cluster id ${config.clusterId ?? config.routerId};`);
  if (neighbor.gracefulRestart) lines.push('  graceful restart on;', `  graceful restart time ${config.gracefulRestartTimeSeconds ?? 120};`);
  if (neighbor.holdTimeSeconds !== undefined) {
    lines.push(`  hold time ${neighbor.holdTimeSeconds};`, `  keepalive time ${Math.max(1, Math.floor(neighbor.holdTimeSeconds / 3))};`);
  }
  for (const family of neighborFamilies(neighbor)) {
    lines.push(`  ${family} { import ${birdImport(neighbor.import ?? 'all', family)}; export ${birdExport(neighbor.export ?? 'static')}; };`);
  }
  lines.push('}');
  return lines;
}

function birdImport(policy: BgpImportPolicy, family: BgpFamily): string {
  if (policy === 'all' || policy === 'none') return policy;
  const prefixes = policy.reject.filter((prefix) => prefixFamily(prefix) === family).map((prefix) => `${canonicalPrefix(prefix)}+`);
  return prefixes.length === 0 ? 'all' : `where !(net ~ [ ${prefixes.join(', ')} ])`;
}

function birdExport(policy: BgpExportPolicy): string {
  switch (policy) {
    case 'none':
      return 'none';
    case 'static':
      return 'where source = RTS_STATIC';
    case 'all':
      return 'where source ~ [ RTS_STATIC, RTS_BGP ]';
  }
}

/** Parses `birdc show protocols`: the BGP protocols by name. */
export function parseBirdProtocols(output: string): Map<string, { state: string; info: string }> {
  const protocols = new Map<string, { state: string; info: string }>();
  for (const line of output.split('\n')) {
    // Name Proto Table State Since Info
    const match = /^(\S+)\s+BGP\s+\S+\s+(\S+)\s+\S+\s*(.*)$/.exec(line);
    if (match) protocols.set(match[1]!, { state: match[2]!, info: match[3]!.trim() });
  }
  return protocols;
}

/**
 * Parses `birdc show route all`: the BGP paths, named by protocol. A path starts with a line that has the prefix
 * (or, for the second path of the same prefix, only indentation) and the protocol in brackets; its attributes follow
 * on tab-indented lines.
 */
export function parseBirdRoutes(output: string): (Omit<BgpRoute, 'from'> & { protocol: string })[] {
  const routes: (Omit<BgpRoute, 'from'> & { protocol: string })[] = [];
  let prefix: string | undefined;
  let current:
    | { prefix: string; protocol: string; best: boolean; receivedAt: number | undefined; attributes: Map<string, string>; bgp: boolean }
    | undefined;
  const finish = () => {
    if (!current?.bgp) return;
    const attribute = (name: string) => current!.attributes.get(name);
    const number = (name: string) => {
      const value = attribute(name);
      return value === undefined ? undefined : Number.parseInt(value, 10);
    };
    routes.push({
      prefix: current.prefix,
      protocol: current.protocol,
      best: current.best,
      nextHop: attribute('BGP.next_hop')?.split(/\s+/)[0],
      asPath: (attribute('BGP.as_path') ?? '').split(/\s+/).filter(Boolean).map(Number),
      communities: [...(attribute('BGP.community') ?? '').matchAll(/\((\d+),\s*(\d+)\)/g)].map((m) => `${m[1]}:${m[2]}`),
      largeCommunities: [...(attribute('BGP.large_community') ?? '').matchAll(/\((\d+),\s*(\d+),\s*(\d+)\)/g)].map((m) => `${m[1]}:${m[2]}:${m[3]}`),
      localPref: number('BGP.local_pref'),
      med: number('BGP.med'),
      receivedAt: current.receivedAt,
    });
  };
  for (const line of output.split('\n')) {
    const path = /^(\S+)?\s+(?:unicast|unreachable|blackhole|prohibited)\s+\[(\S+)(?:\s+(\d+(?:\.\d+)?))?[^\]]*\]\s*(\*)?/.exec(line);
    if (path && !line.startsWith('\t')) {
      finish();
      if (path[1]) prefix = canonicalPrefix(path[1]);
      const receivedAt = path[3] === undefined ? undefined : Math.round(Number(path[3]) * 1000);
      current = prefix === undefined ? undefined : { prefix, protocol: path[2]!, best: path[4] === '*', receivedAt, attributes: new Map(), bgp: false };
      continue;
    }
    const attribute = /^\t(\S+):\s*(.*)$/.exec(line);
    if (attribute && current) {
      if (attribute[1] === 'Type') current.bgp = attribute[2]!.startsWith('BGP');
      else current.attributes.set(attribute[1]!, attribute[2]!);
    }
  }
  finish();
  return routes;
}

class BirdRouter extends DaemonRouter {
  readonly kind = 'bird';
  readonly #socket: string;
  /** BIRD protocol name -> neighbor address. */
  readonly #neighbors: Map<string, string>;

  constructor(config: BgpRouterConfig, dir: string, ownsDir: boolean) {
    super(config, dir, ownsDir);
    this.#socket = join(dir, 'bird.ctl');
    this.#neighbors = new Map(config.neighbors.map((neighbor, index) => [birdProtocolName(index), neighbor.address]));
  }

  async start(): Promise<void> {
    const configFile = join(this.dir, 'bird.conf');
    await writeFile(configFile, renderBirdConfig(this.config));
    await this.launch({ file: 'bird', args: ['-c', configFile, '-s', this.#socket, '-P', join(this.dir, 'bird.pid'), '-f'] });
  }

  async cli(command: string): Promise<string> {
    // birdc reaches the daemon over its Unix socket, which no network namespace separates.
    const { stdout } = await cliRunner.run({ command: 'birdc', args: ['-s', this.#socket, ...command.split(/\s+/)] });
    return stdout;
  }

  protected async probeReady(): Promise<void> {
    await this.cli('show status');
  }

  async sessions(): Promise<BgpSession[]> {
    const protocols = parseBirdProtocols(await this.cli('show protocols'));
    return this.config.neighbors.map((neighbor, index) => {
      const protocol = protocols.get(birdProtocolName(index));
      const info = protocol?.info ?? 'not running';
      return { neighbor: neighbor.address, remoteAsn: neighbor.asn, state: sessionState(info.split(/\s+/)[0] ?? ''), info };
    });
  }

  async routes(): Promise<BgpRoute[]> {
    return parseBirdRoutes(await this.cli('show route all')).flatMap(({ protocol, ...route }) => {
      const from = this.#neighbors.get(protocol);
      return from === undefined ? [] : [{ ...route, from }];
    });
  }

  async resetSession(neighbor: string): Promise<void> {
    const index = this.config.neighbors.findIndex((candidate) => candidate.address === neighbor);
    if (index < 0) throw new Error(`${neighbor} is not a neighbor of this router`);
    await this.cli(`restart ${birdProtocolName(index)}`);
  }
}

/** Starts BIRD 2 in `config.netns` (`bird -f` under `ip netns exec`); resolves once birdc gets answers. */
export async function startBird(config: BgpRouterConfig): Promise<BgpRouter> {
  validateRouterConfig(config);
  const { dir, owned } = await makeWorkDir(config, 'bird');
  const router = new BirdRouter(config, dir, owned);
  await router.start();
  return router;
}
