import ipaddr from 'ipaddr.js';

export type BgpFamily = 'ipv4' | 'ipv6';

/** What a router accepts from one neighbor. */
export type BgpImportPolicy =
  | 'all'
  | 'none'
  /** Everything except these prefixes and every prefix inside them. */
  | { readonly reject: readonly string[] };

/**
 * What a router sends to one neighbor: `static` its own `staticRoutes` (with their communities), `all` those plus
 * everything it learned (a transit router or a route reflector), `none` nothing.
 */
export type BgpExportPolicy = 'static' | 'all' | 'none';

export interface BgpRouterNeighbor {
  readonly address: string;
  readonly asn: number;
  /** The neighbor's BGP port. Default 179. */
  readonly port?: number;
  /** TCP MD5 signature (RFC 2385) password. */
  readonly password?: string;
  /** eBGP multihop with this TTL; iBGP sessions are multihop anyway. */
  readonly multihopTtl?: number;
  /** Never opens the connection, only accepts it. */
  readonly passive?: boolean;
  /** This router reflects the neighbor's routes to its other iBGP neighbors (and theirs to it). */
  readonly routeReflectorClient?: boolean;
  /**
   * Announces graceful restart as a restarting speaker: when this router restarts, the neighbor keeps its routes. (Both
   * daemons keep the routes of a restarting neighbor that announces graceful restart, with or without this.)
   */
  readonly gracefulRestart?: boolean;
  /** The address the session is opened from. */
  readonly localAddress?: string;
  /** Address families of the session. Default: the family of `address`. */
  readonly families?: readonly BgpFamily[];
  /** Default 'all'. */
  readonly import?: BgpImportPolicy;
  /** Default 'static'. */
  readonly export?: BgpExportPolicy;
  /** Hold time in seconds (keepalives every third of it). Default: the daemon's (240 s BIRD, 180 s FRR). */
  readonly holdTimeSeconds?: number;
}

/** A route the router originates; sent to neighbors whose export policy is 'static' or 'all'. */
export interface BgpStaticRoute {
  readonly prefix: string;
  /** Standard communities, "65000:100". */
  readonly communities?: readonly string[];
  /** Large communities, "65000:1:2". */
  readonly largeCommunities?: readonly string[];
}

export interface BgpRouterConfig {
  /** The network namespace the daemon runs in (it must exist). */
  readonly netns: string;
  readonly routerId: string;
  readonly asn: number;
  readonly neighbors: readonly BgpRouterNeighbor[];
  readonly staticRoutes?: readonly BgpStaticRoute[];
  /** The port it listens on. Default 179. */
  readonly listenPort?: number;
  /** Graceful restart time in seconds, announced to neighbors with `gracefulRestart`. Default 120. */
  readonly gracefulRestartTimeSeconds?: number;
  /** Route reflector cluster id (an IPv4 address); default the router id. */
  readonly clusterId?: string;
  /** Installs the best learned routes into the namespace's kernel table (BIRD only: FRR runs without zebra). */
  readonly installRoutes?: boolean;
  /** Daemon configuration appended verbatim, for what the typed config does not cover. */
  readonly extraConfig?: string;
  /** Where its configuration, control socket, pid file and log go. Default: a new directory under the OS temp dir. */
  readonly workDir?: string;
}

/** Checks what would otherwise become a confusing daemon configuration error. */
export function validateRouterConfig(config: BgpRouterConfig): void {
  const problems: string[] = [];
  const checkAddress = (what: string, value: string, v4Only = false) => {
    if (!ipaddr.isValid(value)) problems.push(`${what} "${value}" is not an IP address`);
    else if (v4Only && ipaddr.parse(value).kind() !== 'ipv4') problems.push(`${what} "${value}" must be an IPv4 address`);
  };
  const checkAsn = (what: string, value: number) => {
    if (!Number.isInteger(value) || value < 1 || value > 4_294_967_295) problems.push(`${what} ${value} is not an ASN`);
  };
  checkAddress('routerId', config.routerId, true);
  if (config.clusterId !== undefined) checkAddress('clusterId', config.clusterId, true);
  checkAsn('asn', config.asn);
  const seen = new Set<string>();
  for (const neighbor of config.neighbors) {
    checkAddress('neighbor address', neighbor.address);
    checkAsn(`neighbor ${neighbor.address} asn`, neighbor.asn);
    if (neighbor.localAddress !== undefined) checkAddress(`neighbor ${neighbor.address} localAddress`, neighbor.localAddress);
    if (seen.has(neighbor.address)) problems.push(`neighbor ${neighbor.address} is listed twice`);
    seen.add(neighbor.address);
    if (neighbor.password !== undefined && /["\\\n]/.test(neighbor.password)) {
      problems.push(`neighbor ${neighbor.address} password must not contain quotes, backslashes or newlines`);
    }
    if (neighbor.import !== undefined && typeof neighbor.import === 'object') {
      for (const prefix of neighbor.import.reject) checkPrefix(`neighbor ${neighbor.address} import reject`, prefix, problems);
    }
  }
  for (const route of config.staticRoutes ?? []) {
    checkPrefix('static route', route.prefix, problems);
    for (const community of route.communities ?? []) {
      if (!/^\d+:\d+$/.test(community)) problems.push(`community "${community}" of ${route.prefix} is not "asn:value"`);
    }
    for (const community of route.largeCommunities ?? []) {
      if (!/^\d+:\d+:\d+$/.test(community)) problems.push(`large community "${community}" of ${route.prefix} is not "asn:a:b"`);
    }
  }
  if (problems.length > 0) throw new Error(`invalid BGP router config: ${problems.join('; ')}`);
}

function checkPrefix(what: string, prefix: string, problems: string[]): void {
  try {
    ipaddr.parseCIDR(prefix);
  } catch {
    problems.push(`${what} "${prefix}" is not a CIDR`);
  }
}

export function familyOf(address: string): BgpFamily {
  return ipaddr.parse(address).kind() === 'ipv4' ? 'ipv4' : 'ipv6';
}

export function prefixFamily(prefix: string): BgpFamily {
  return ipaddr.parseCIDR(prefix)[0].kind() === 'ipv4' ? 'ipv4' : 'ipv6';
}

/** A prefix in its canonical form ("10.0.0.0/24", "fd00::/64"): routes are compared by it. */
export function canonicalPrefix(prefix: string): string {
  const [address, length] = ipaddr.parseCIDR(prefix);
  return `${address.toString()}/${length}`;
}

export function neighborFamilies(neighbor: BgpRouterNeighbor): readonly BgpFamily[] {
  return neighbor.families ?? [familyOf(neighbor.address)];
}
