import ipaddr from 'ipaddr.js';
import type { IpFamily } from './family.js';

/** The transport protocols of an IPVS virtual service. Firewall-mark services are not modelled: no one here makes them. */
export type IpvsProtocol = 'tcp' | 'udp' | 'sctp';

/** How IPVS forwards to a real server: NAT (`-m`), direct routing (`-g`) or an IP-in-IP tunnel (`-i`, for DSR). */
export type IpvsForwarding = 'masquerade' | 'gatewaying' | 'tunnel';

/** A virtual service's identity: what `-t`/`-u`/`--sctp-service` names. */
export interface IpvsServiceKey {
  readonly protocol: IpvsProtocol;
  /** Canonical text: IPv4 dotted, IPv6 compressed lower case (as ipvsadm prints it). */
  readonly address: string;
  readonly port: number;
}

export interface IpvsService extends IpvsServiceKey {
  readonly scheduler: string;
  /** Scheduler flags (`-b`), such as sh-port and sh-fallback; compared as a set. */
  readonly flags: readonly string[];
  /** ClientIP affinity: `-p <seconds>`; undefined when not persistent. */
  readonly persistentSeconds?: number;
  /** The persistence netmask (`-M`); undefined for the default (a single client address). */
  readonly persistentNetmask?: string;
}

export interface IpvsDestination {
  readonly address: string;
  readonly port: number;
  readonly forwarding: IpvsForwarding;
  readonly weight: number;
}

/** One virtual service as the kernel holds it (or as it should hold it), with its real servers. */
export interface IpvsVirtualServer {
  readonly service: IpvsService;
  readonly destinations: readonly IpvsDestination[];
}

/** Connection counts of one real server, from `ipvsadm -Ln`: what graceful termination waits on. */
export interface IpvsDestinationConnections {
  readonly service: IpvsServiceKey;
  readonly address: string;
  readonly port: number;
  readonly activeConnections: number;
  readonly inactiveConnections: number;
}

/**
 * One entry of IPVS's connection table (`ipvsadm -Lcn`): which real server a client's connection to a virtual service
 * went to. Persistence templates (ClientIP affinity) are entries too, with the client's port 0 (state `NONE`, or
 * `ASSURED` on recent kernels).
 */
export interface IpvsConnectionEntry {
  readonly protocol: IpvsProtocol;
  /** The state IPVS tracks (`ESTABLISHED`, `TIME_WAIT`, `UDP`, `NONE` or `ASSURED` for a persistence template, ...). */
  readonly state: string;
  /** Seconds until the entry expires. */
  readonly expiresInSeconds: number;
  readonly client: { readonly address: string; readonly port: number };
  readonly virtual: { readonly address: string; readonly port: number };
  readonly destination: { readonly address: string; readonly port: number };
}

/** Traffic counters of one virtual service, from `ipvsadm -Ln --stats --exact`. */
export interface IpvsServiceStats {
  readonly service: IpvsServiceKey;
  readonly connections: number;
  readonly packetsIn: number;
  readonly packetsOut: number;
  readonly bytesIn: number;
  readonly bytesOut: number;
}

/** A string that identifies a virtual service: `tcp/10.96.0.1/443`, `udp/fd00::a/53`. */
export function ipvsServiceId(key: IpvsServiceKey): string {
  return `${key.protocol}/${key.address}/${key.port}`;
}

/** `10.1.0.2:8080` or `[fd00::2]:8080`: a real server's identity within its service. */
export function ipvsDestinationId(destination: { readonly address: string; readonly port: number }): string {
  return hostPort(destination.address, destination.port);
}

/** The canonical text of an address, so that desired and saved state compare as strings. */
export function canonicalIpvsAddress(address: string): string {
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6') {
    const v6 = parsed as ipaddr.IPv6;
    return v6.isIPv4MappedAddress() ? v6.toIPv4Address().toString() : v6.toString();
  }
  return parsed.toString();
}

export function ipvsAddressFamily(address: string): IpFamily {
  return address.includes(':') ? 'ipv6' : 'ipv4';
}

const PROTOCOL_FLAG: Record<IpvsProtocol, string> = { tcp: '-t', udp: '-u', sctp: '--sctp-service' };
const FLAG_PROTOCOL: Record<string, IpvsProtocol> = {
  '-t': 'tcp',
  '--tcp-service': 'tcp',
  '-u': 'udp',
  '--udp-service': 'udp',
  '--sctp-service': 'sctp',
};
const FORWARDING_FLAG: Record<IpvsForwarding, string> = { masquerade: '-m', gatewaying: '-g', tunnel: '-i' };
const FLAG_FORWARDING: Record<string, IpvsForwarding> = {
  '-m': 'masquerade',
  '--masquerading': 'masquerade',
  '-g': 'gatewaying',
  '--gatewaying': 'gatewaying',
  '-i': 'tunnel',
  '--ipip': 'tunnel',
};

function hostPort(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}

function serviceArgs(key: IpvsServiceKey): string {
  return `${PROTOCOL_FLAG[key.protocol]} ${hostPort(key.address, key.port)}`;
}

/** The `ipvsadm -R` lines that change IPVS; each is one kernel operation. */
export const ipvsRestoreLine = {
  addService: (service: IpvsService): string => `-A ${serviceArgs(service)}${serviceOptions(service)}`,
  editService: (service: IpvsService): string => `-E ${serviceArgs(service)}${serviceOptions(service)}`,
  deleteService: (key: IpvsServiceKey): string => `-D ${serviceArgs(key)}`,
  addDestination: (key: IpvsServiceKey, destination: IpvsDestination): string =>
    `-a ${serviceArgs(key)} -r ${hostPort(destination.address, destination.port)} ${FORWARDING_FLAG[destination.forwarding]} -w ${destination.weight}`,
  editDestination: (key: IpvsServiceKey, destination: IpvsDestination): string =>
    `-e ${serviceArgs(key)} -r ${hostPort(destination.address, destination.port)} ${FORWARDING_FLAG[destination.forwarding]} -w ${destination.weight}`,
  deleteDestination: (key: IpvsServiceKey, destination: { readonly address: string; readonly port: number }): string =>
    `-d ${serviceArgs(key)} -r ${hostPort(destination.address, destination.port)}`,
};

function serviceOptions(service: IpvsService): string {
  let out = ` -s ${service.scheduler}`;
  if (service.persistentSeconds !== undefined) out += ` -p ${service.persistentSeconds}`;
  if (service.persistentNetmask !== undefined) out += ` -M ${service.persistentNetmask}`;
  if (service.flags.length > 0) out += ` -b ${[...service.flags].sort().join(',')}`;
  return out;
}

/** Whether two services differ in anything `-E` would change (scheduler, flags, persistence). */
export function ipvsServiceOptionsEqual(a: IpvsService, b: IpvsService): boolean {
  return (
    a.scheduler === b.scheduler &&
    a.persistentSeconds === b.persistentSeconds &&
    a.persistentNetmask === b.persistentNetmask &&
    [...a.flags].sort().join(',') === [...b.flags].sort().join(',')
  );
}

function parseHostPort(text: string, line: string): { address: string; port: number } {
  const match = /^\[([^\]]+)\]:(\d+)$/.exec(text) ?? /^([^:]+):(\d+)$/.exec(text);
  if (!match) throw new Error(`ipvsadm: cannot parse address ${JSON.stringify(text)} in line ${JSON.stringify(line)}`);
  return { address: canonicalIpvsAddress(match[1] as string), port: Number(match[2]) };
}

/**
 * Parses `ipvsadm -Sn` (save, numeric). Firewall-mark services (`-f`) are skipped with their real servers: they are
 * someone else's. Destinations are attached to the service line that names them, wherever it appears.
 */
export function parseIpvsSave(text: string): IpvsVirtualServer[] {
  const services = new Map<string, { service: IpvsService; destinations: IpvsDestination[] }>();
  const orphans: { id: string; destination: IpvsDestination }[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    const words = line.split(/\s+/);
    const command = words[0];
    const protocol = FLAG_PROTOCOL[words[1] ?? ''];
    if (!protocol) continue; // -f <fwmark>, or a line this parser does not know
    const key = { protocol, ...parseHostPort(words[2] ?? '', line) };
    const options = optionMap(words.slice(3));
    if (command === '-A') {
      const netmask = options.get('-M');
      const persistent = options.get('-p');
      const service: IpvsService = {
        ...key,
        scheduler: options.get('-s') ?? 'wlc',
        flags: (options.get('-b') ?? '').split(',').filter(Boolean).sort(),
        ...(persistent !== undefined && { persistentSeconds: Number(persistent) }),
        ...(netmask !== undefined && netmask !== '255.255.255.255' && netmask !== '128' && { persistentNetmask: netmask }),
      };
      services.set(ipvsServiceId(key), { service, destinations: [] });
    } else if (command === '-a') {
      const real = parseHostPort(options.get('-r') ?? '', line);
      const forwarding = [...options.keys()].map((flag) => FLAG_FORWARDING[flag]).find(Boolean) ?? 'gatewaying';
      const destination: IpvsDestination = { ...real, forwarding, weight: Number(options.get('-w') ?? 1) };
      const entry = services.get(ipvsServiceId(key));
      if (entry) entry.destinations.push(destination);
      else orphans.push({ id: ipvsServiceId(key), destination });
    }
  }
  for (const { id, destination } of orphans) services.get(id)?.destinations.push(destination);
  return [...services.values()];
}

/** Flags of ipvsadm's save output that take a value; the others (-m, -g, -i) stand alone. */
const VALUED = new Set(['-s', '-p', '-M', '-b', '-r', '-w', '-x', '-y', '--tun-type', '--tun-port', '--tun-nocsum', '--pe']);

function optionMap(words: readonly string[]): Map<string, string> {
  const options = new Map<string, string>();
  for (let i = 0; i < words.length; i++) {
    const word = words[i] as string;
    if (VALUED.has(word) && i + 1 < words.length && !(word === '-p' && (words[i + 1] as string).startsWith('-'))) {
      options.set(word, words[++i] as string);
    } else {
      options.set(word, '');
    }
  }
  return options;
}

const LIST_PROTOCOL: Record<string, IpvsProtocol> = { TCP: 'tcp', UDP: 'udp', SCTP: 'sctp' };

/** Parses `ipvsadm -Ln`: the active and inactive connection counts of every real server. */
export function parseIpvsConnections(text: string): IpvsDestinationConnections[] {
  const out: IpvsDestinationConnections[] = [];
  let service: IpvsServiceKey | undefined;
  for (const line of text.split('\n')) {
    const words = line.trim().split(/\s+/);
    const protocol = LIST_PROTOCOL[words[0] ?? ''];
    if (protocol) {
      service = { protocol, ...parseHostPort(words[1] ?? '', line) };
    } else if (words[0] === '->' && service && words[1] !== 'RemoteAddress:Port' && words.length >= 6) {
      out.push({
        service,
        ...parseHostPort(words[1] as string, line),
        activeConnections: Number(words[4]),
        inactiveConnections: Number(words[5]),
      });
    } else if (!protocol && words[0] !== '->') {
      service = words[0] === 'FWM' ? undefined : service;
    }
  }
  return out;
}

/**
 * Parses `ipvsadm -Lcn`: the connection table, one entry per line after the two heading lines. Lines of protocols
 * this model does not know (firewall-mark templates print `IP`) are skipped, and so, with `virtual`, are the entries
 * of other virtual services.
 */
export function parseIpvsConnectionTable(text: string, virtual?: IpvsServiceKey): IpvsConnectionEntry[] {
  const out: IpvsConnectionEntry[] = [];
  // ipvsadm prints the virtual address as canonicalIpvsAddress spells it: a line without it is skipped unparsed.
  const needle = virtual && ` ${virtual.address.includes(':') ? `[${virtual.address}]` : virtual.address}:${virtual.port} `;
  for (const line of text.split('\n')) {
    if (needle !== undefined && !line.includes(needle)) continue;
    const words = line.trim().split(/\s+/);
    const protocol = LIST_PROTOCOL[words[0] ?? ''];
    if (!protocol || words.length < 6) continue;
    if (virtual && protocol !== virtual.protocol) continue;
    const [minutes = '0', seconds = '0'] = (words[1] as string).split(':');
    out.push({
      protocol,
      expiresInSeconds: Number(minutes) * 60 + Number(seconds),
      state: words[2] as string,
      client: parseHostPort(words[3] as string, line),
      virtual: parseHostPort(words[4] as string, line),
      destination: parseHostPort(words[5] as string, line),
    });
  }
  return out;
}

/** Parses `ipvsadm -Ln --stats --exact`: per virtual service counters (real server lines are skipped). */
export function parseIpvsStats(text: string): IpvsServiceStats[] {
  const out: IpvsServiceStats[] = [];
  for (const line of text.split('\n')) {
    const words = line.trim().split(/\s+/);
    const protocol = LIST_PROTOCOL[words[0] ?? ''];
    if (!protocol || words.length < 7) continue;
    out.push({
      service: { protocol, ...parseHostPort(words[1] as string, line) },
      connections: Number(words[2]),
      packetsIn: Number(words[3]),
      packetsOut: Number(words[4]),
      bytesIn: Number(words[5]),
      bytesOut: Number(words[6]),
    });
  }
  return out;
}
