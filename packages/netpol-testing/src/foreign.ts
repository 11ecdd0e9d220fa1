import { hasTool } from '@kube-router/netfilter';
import type { InNode } from './backend.js';

/** Another tool's nftables table: a set and a base chain of its own. */
const FOREIGN_TABLE = `table inet tnf-foreign-tool {
\tset blocked {
\t\ttype ipv4_addr
\t\telements = { 192.0.2.9 }
\t}

\tchain input {
\t\ttype filter hook input priority filter + 10; policy accept;
\t\tip saddr @blocked tcp dport 9 drop comment "foreign rule"
\t}
}
`;

/** Our names in iptables-save output: what is left out of the foreign state. */
const OURS = /KUBE-(ROUTER|POD-FW|NWPLCY)|KUBE-(SRC|DST)-|kube-router-/;

/**
 * Puts other tools' objects beside ours, with every tool installed here: an iptables chain jumped to from FORWARD
 * and an INPUT rule in both families, an ipset, an nftables table. Resolves with a function that reads them all
 * back, so that a test can tell that none of them changed.
 */
export async function addForeignObjects(inNode: InNode): Promise<() => Promise<string>> {
  for (const tool of ['iptables', 'ip6tables'].filter(hasTool)) {
    await inNode(tool, ['-N', 'FOREIGN-TOOL']);
    await inNode(tool, ['-A', 'FOREIGN-TOOL', '-p', 'tcp', '--dport', '9', '-m', 'comment', '--comment', 'foreign rule', '-j', 'DROP']);
    await inNode(tool, ['-A', 'FORWARD', '-j', 'FOREIGN-TOOL']);
    await inNode(tool, ['-A', 'INPUT', '-p', 'tcp', '--dport', '9999', '-j', 'ACCEPT']);
  }
  if (hasTool('ipset')) await inNode('ipset', ['create', 'foreign-set', 'hash:ip']);
  if (hasTool('nft')) await inNode('nft', ['-f', '-'], FOREIGN_TABLE);
  return async () => {
    const parts: string[] = [];
    for (const tool of ['iptables-save', 'ip6tables-save'].filter(hasTool)) {
      const lines = (await inNode(tool, [])).split('\n').filter((line) => line !== '' && !line.startsWith('#') && !OURS.test(line));
      // Without counters: they move with the traffic.
      parts.push(...lines.map((line) => line.replace(/\[\d+:\d+\]/, '')));
    }
    if (hasTool('ipset')) parts.push(...(await inNode('ipset', ['list', '-n'])).split('\n').filter((name) => name !== '' && !OURS.test(name)));
    if (hasTool('nft')) parts.push(await inNode('nft', ['list', 'table', 'inet', 'tnf-foreign-tool']));
    return parts.join('\n');
  };
}
