import { readFileSync } from 'node:fs';
import { peersFromLists, type PeerListName, type RoutingBgpOptions } from '@kube-router/routing-bgp';
import type { AgentConfig } from './config.js';

type PeerRouterFlags = Omit<AgentConfig['routing']['peers'], 'multihopTtl'>;

/**
 * The external peers of --peer-router-ips, -asns, -ports and -passwords (base64; else those of
 * --peer-router-passwords-file, comma-separated base64 as in kube-router), with kube-router's checks: the lists
 * pair by index, ASNs outside the reserved ranges, ports 1-65535, passwords base64, no address twice. Each problem
 * names its flag.
 */
export function peerRoutersOfFlags(
  flags: PeerRouterFlags,
  readFile: (path: string) => string = (path) => readFileSync(path, 'utf8'),
): { peerRouters: NonNullable<RoutingBgpOptions['peerRouters']>; problems: string[] } {
  const problems: string[] = [];
  let passwords = flags.passwords;
  let passwordsFlag = '--peer-router-passwords';
  if (passwords.length === 0 && flags.passwordsFile !== '') {
    passwordsFlag = '--peer-router-passwords-file';
    try {
      passwords = readFile(flags.passwordsFile).split(',');
    } catch (error) {
      problems.push(`--peer-router-passwords-file ${flags.passwordsFile}: ${(error as Error).message}`);
    }
  }
  const flagOf: Record<PeerListName, string> = {
    ips: '--peer-router-ips',
    asns: '--peer-router-asns',
    ports: '--peer-router-ports',
    passwords: passwordsFlag,
    localIps: '--peer-router-ips',
  };
  const parsed = peersFromLists({
    ips: flags.ips,
    asns: flags.asns.map(String),
    ports: flags.ports.map(String),
    passwords: problems.length > 0 ? [] : passwords,
  });
  for (const problem of parsed.problems) {
    const entry = problem.index === undefined ? '' : ` (entry ${problem.index + 1}, for ${flags.ips[problem.index]})`;
    problems.push(`${flagOf[problem.list]}${entry}: ${problem.message}`);
  }
  // kube-router would add the second as the first again; here a peer listed twice is refused, not guessed at.
  const first = new Map<string, number>();
  parsed.peers.forEach(({ address }, i) => {
    const earlier = first.get(address);
    if (earlier === undefined) first.set(address, i);
    else problems.push(`--peer-router-ips: ${address} is listed twice (entries ${earlier + 1} and ${i + 1}); give each peer once`);
  });
  return {
    peerRouters: parsed.peers.map(({ address, asn, port, password }) => ({
      address,
      asn,
      ...(port !== undefined && { port }),
      ...(password !== undefined && { password }),
    })),
    problems,
  };
}
