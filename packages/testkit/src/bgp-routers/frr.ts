import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import {
  canonicalPrefix,
  neighborFamilies,
  prefixFamily,
  validateRouterConfig,
  type BgpFamily,
  type BgpRouterConfig,
  type BgpRouterNeighbor,
} from './config.js';
import { canonicalAddress, cliRunner, DaemonRouter, makeWorkDir, sessionState, type BgpRoute, type BgpRouter, type BgpSession } from './router.js';

export const FRR_BGPD = '/usr/lib/frr/bgpd';

const familyWords = { ipv4: { afi: 'ipv4', match: 'ip' }, ipv6: { afi: 'ipv6', match: 'ipv6' } } as const;

/** The FRR bgpd configuration for a router. Exported for tests and for reading what a router runs. */
export function renderFrrConfig(config: BgpRouterConfig): string {
  validateRouterConfig(config);
  const statics = config.staticRoutes ?? [];
  const policies: string[] = [];
  const lines = [
    'frr defaults traditional',
    'hostname bgp-router',
    '!',
    `router bgp ${config.asn}`,
    ` bgp router-id ${config.routerId}`,
    // Policies are this harness's business: accept without one (RFC 8212 would block eBGP), and originate the static
    // routes although no zebra (bgpd runs without it) has them in a RIB.
    ' no bgp ebgp-requires-policy',
    ' no bgp network import-check',
    ' no bgp default ipv4-unicast',
    ` bgp graceful-restart restart-time ${config.gracefulRestartTimeSeconds ?? 120}`,
  ];
  if (config.neighbors.some((neighbor) => neighbor.routeReflectorClient)) lines.push(` bgp cluster-id ${config.clusterId ?? config.routerId}`);
  for (const neighbor of config.neighbors) {
    const n = ` neighbor ${neighbor.address}`;
    lines.push(`${n} remote-as ${neighbor.asn}`);
    if (neighbor.port !== undefined) lines.push(`${n} port ${neighbor.port}`);
    // A test's peer comes back within a second or two of a flap or restart, not after FRR's 120 s connect retry.
    lines.push(`${n} timers connect 2`);
    if (neighbor.password !== undefined) lines.push(`${n} password ${neighbor.password}`);
    if (neighbor.multihopTtl !== undefined && neighbor.asn !== config.asn) lines.push(`${n} ebgp-multihop ${neighbor.multihopTtl}`);
    if (neighbor.passive) lines.push(`${n} passive`);
    if (neighbor.localAddress !== undefined) lines.push(`${n} update-source ${neighbor.localAddress}`);
    if (neighbor.gracefulRestart) lines.push(`${n} graceful-restart`);
    if (neighbor.holdTimeSeconds !== undefined) {
      lines.push(`${n} timers ${Math.max(1, Math.floor(neighbor.holdTimeSeconds / 3))} ${neighbor.holdTimeSeconds}`);
    }
  }
  for (const family of ['ipv4', 'ipv6'] as const) {
    const { afi, match } = familyWords[family];
    const familyStatics = statics.filter((route) => prefixFamily(route.prefix) === family);
    const familyNeighbors = config.neighbors.map((neighbor, index) => ({ neighbor, index })).filter(({ neighbor }) => neighborFamilies(neighbor).includes(family));
    if (familyStatics.length === 0 && familyNeighbors.length === 0) continue;
    lines.push(' !', ` address-family ${afi} unicast`);
    familyStatics.forEach((route, index) => {
      const routeMap = `BL-STATIC-${family.toUpperCase()}-${index + 1}`;
      lines.push(`  network ${canonicalPrefix(route.prefix)} route-map ${routeMap}`);
      policies.push(`route-map ${routeMap} permit 10`);
      if (route.communities?.length) policies.push(` set community ${route.communities.join(' ')} additive`);
      if (route.largeCommunities?.length) policies.push(` set large-community ${route.largeCommunities.join(' ')} additive`);
      policies.push('!');
    });
    const staticList = `BL-STATIC-${family.toUpperCase()}`;
    familyStatics.forEach((route, index) => policies.push(`${match} prefix-list ${staticList} seq ${(index + 1) * 5} permit ${canonicalPrefix(route.prefix)}`));
    for (const { neighbor, index } of familyNeighbors) {
      lines.push(`  neighbor ${neighbor.address} activate`);
      if (neighbor.routeReflectorClient) lines.push(`  neighbor ${neighbor.address} route-reflector-client`);
      const importMap = frrImportRouteMap(neighbor, index, family, policies);
      if (importMap) lines.push(`  neighbor ${neighbor.address} route-map ${importMap} in`);
      const exportMap = frrExportRouteMap(neighbor, index, family, familyStatics.length > 0 ? staticList : undefined, policies);
      if (exportMap) lines.push(`  neighbor ${neighbor.address} route-map ${exportMap} out`);
    }
    lines.push(' exit-address-family');
  }
  lines.push('exit', '!', ...policies);
  if (config.extraConfig) lines.push(config.extraConfig);
  return `${lines.join('\n')}\n`;
}

function frrImportRouteMap(neighbor: BgpRouterNeighbor, index: number, family: BgpFamily, policies: string[]): string | undefined {
  const policy = neighbor.import ?? 'all';
  if (policy === 'all') return undefined;
  const name = `BL-IMPORT-${index + 1}-${family.toUpperCase()}`;
  if (policy === 'none') {
    policies.push(`route-map ${name} deny 10`, '!');
    return name;
  }
  const { match } = familyWords[family];
  const rejected = policy.reject.filter((prefix) => prefixFamily(prefix) === family);
  if (rejected.length === 0) return undefined;
  const list = `${name}-REJECT`;
  const maxLength = family === 'ipv4' ? 32 : 128;
  rejected.forEach((prefix, i) => {
    const length = Number(canonicalPrefix(prefix).split('/')[1]);
    policies.push(`${match} prefix-list ${list} seq ${(i + 1) * 5} permit ${canonicalPrefix(prefix)}${length < maxLength ? ` le ${maxLength}` : ''}`);
  });
  policies.push(`route-map ${name} deny 10`, ` match ${match} address prefix-list ${list}`, `route-map ${name} permit 20`, '!');
  return name;
}

function frrExportRouteMap(
  neighbor: BgpRouterNeighbor,
  index: number,
  family: BgpFamily,
  staticList: string | undefined,
  policies: string[],
): string | undefined {
  const policy = neighbor.export ?? 'static';
  if (policy === 'all') return undefined;
  const name = `BL-EXPORT-${index + 1}-${family.toUpperCase()}`;
  if (policy === 'none' || !staticList) policies.push(`route-map ${name} deny 10`, '!');
  else policies.push(`route-map ${name} permit 10`, ` match ${familyWords[family].match} address prefix-list ${staticList}`, '!');
  return name;
}

const frrNeighborsSchema = z.record(
  z.string(),
  z.looseObject({ remoteAs: z.number().optional(), bgpState: z.string().optional(), lastResetDueTo: z.string().optional() }),
);

/** Parses `show bgp neighbors json`. */
export function parseFrrNeighbors(json: string): Map<string, { remoteAsn: number | undefined; state: string; info: string }> {
  const neighbors = frrNeighborsSchema.parse(JSON.parse(json));
  return new Map(
    Object.entries(neighbors).map(([address, neighbor]) => {
      const state = neighbor.bgpState ?? 'Idle';
      const info = neighbor.lastResetDueTo && state !== 'Established' ? `${state} (last reset: ${neighbor.lastResetDueTo})` : state;
      return [canonicalAddress(address), { remoteAsn: neighbor.remoteAs, state, info }];
    }),
  );
}

const frrPathSchema = z.looseObject({
  aspath: z.looseObject({ segments: z.array(z.looseObject({ list: z.array(z.number()) })).optional() }).optional(),
  community: z.looseObject({ list: z.array(z.string()) }).optional(),
  largeCommunity: z.looseObject({ list: z.array(z.string()) }).optional(),
  nexthops: z.array(z.looseObject({ ip: z.string().optional(), scope: z.string().optional() })).optional(),
  peer: z.looseObject({ peerId: z.string().optional() }).optional(),
  bestpath: z.looseObject({ overall: z.boolean().optional() }).optional(),
  locPrf: z.number().optional(),
  lastUpdate: z.looseObject({ epoch: z.number().optional() }).optional(),
  metric: z.number().optional(),
  sourced: z.boolean().optional(),
  local: z.boolean().optional(),
});
const frrTableSchema = z.looseObject({ routes: z.record(z.string(), z.array(z.unknown())).optional() });

/**
 * Parses `show bgp <afi> unicast json detail`: the paths learned from neighbors. Each prefix's array starts with an
 * element describing the prefix itself (no next hops), which is skipped, as are the router's own routes.
 */
export function parseFrrRoutes(json: string): BgpRoute[] {
  const table = frrTableSchema.parse(JSON.parse(json));
  const routes: BgpRoute[] = [];
  for (const [prefix, entries] of Object.entries(table.routes ?? {})) {
    for (const entry of entries) {
      const parsed = frrPathSchema.safeParse(entry);
      if (!parsed.success || !parsed.data.nexthops || parsed.data.sourced || parsed.data.local) continue;
      const path = parsed.data;
      const from = path.peer?.peerId;
      if (!from || from === '0.0.0.0') continue;
      routes.push({
        prefix: canonicalPrefix(prefix),
        // IPv6 paths list the global next hop first, then the link-local one.
        nextHop: path.nexthops!.find((hop) => hop.scope !== 'link-local')?.ip ?? path.nexthops![0]?.ip,
        asPath: (path.aspath?.segments ?? []).flatMap((segment) => segment.list),
        communities: path.community?.list ?? [],
        largeCommunities: path.largeCommunity?.list ?? [],
        from: canonicalAddress(from),
        best: path.bestpath?.overall === true,
        localPref: path.locPrf,
        med: path.metric,
        receivedAt: path.lastUpdate?.epoch === undefined ? undefined : path.lastUpdate.epoch * 1000,
      });
    }
  }
  return routes;
}

class FrrRouter extends DaemonRouter {
  readonly kind = 'frr';

  constructor(config: BgpRouterConfig, dir: string, ownsDir: boolean) {
    super(config, dir, ownsDir);
  }

  async start(): Promise<void> {
    const configFile = join(this.dir, 'bgpd.conf');
    await writeFile(configFile, renderFrrConfig(this.config));
    const args = [
      '-f', configFile,
      '-i', join(this.dir, 'bgpd.pid'),
      // Its vty socket in our directory, no TCP vty, no zebra, no kernel routes, no switch to the frr user: runs as
      // root without systemd, and several can run at once.
      '--vty_socket', this.dir,
      '-P', '0',
      '-Z', '-n', '-S',
      '-p', String(this.config.listenPort ?? 179),
      '--log', 'stdout',
    ];
    await this.launch({ file: FRR_BGPD, args });
  }

  async cli(command: string): Promise<string> {
    const { stdout } = await cliRunner.run({ command: 'vtysh', args: ['--vty_socket', this.dir, '-d', 'bgpd', '-c', command] });
    return stdout;
  }

  protected async probeReady(): Promise<void> {
    parseFrrNeighbors(await this.cli('show bgp neighbors json'));
  }

  async sessions(): Promise<BgpSession[]> {
    const neighbors = parseFrrNeighbors(await this.cli('show bgp neighbors json'));
    return this.config.neighbors.map((neighbor) => {
      const found = neighbors.get(canonicalAddress(neighbor.address));
      const state = found?.state ?? 'Idle';
      return { neighbor: neighbor.address, remoteAsn: found?.remoteAsn ?? neighbor.asn, state: sessionState(state), info: found?.info ?? 'not configured' };
    });
  }

  async routes(): Promise<BgpRoute[]> {
    const families = new Set(this.config.neighbors.flatMap((neighbor) => neighborFamilies(neighbor)));
    const tables = await Promise.all([...families].map((family) => this.cli(`show bgp ${family} unicast json detail`)));
    return tables.flatMap((table) => parseFrrRoutes(table));
  }

  async resetSession(neighbor: string): Promise<void> {
    await this.cli(`clear bgp ${neighbor}`);
  }
}

/** Starts FRR's bgpd in `config.netns`, without zebra; resolves once vtysh gets answers. */
export async function startFrr(config: BgpRouterConfig): Promise<BgpRouter> {
  validateRouterConfig(config);
  if (config.installRoutes) throw new Error('installRoutes needs zebra, which the FRR router does not run: use BIRD');
  const { dir, owned } = await makeWorkDir(config, 'frr');
  const router = new FrrRouter(config, dir, owned);
  await router.start();
  return router;
}
