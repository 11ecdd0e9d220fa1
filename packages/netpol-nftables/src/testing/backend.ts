import { nftTableLock, parseNftJson, toolLocks } from '@kube-router/netfilter';
import { compileNetworkPolicies, podChainName } from '@kube-router/netpol';
import type { IpFamily, NamespaceLike, PodLike } from '@kube-router/netpol';
import type { InNode, NetpolTestBackend } from '@kube-router/netpol-testing';
import { tableRef } from '../kernel-script.js';
import { INGRESS_MAP, TABLES, peerPodsSetName } from '../names.js';
import { createNetpolNftablesPlugin } from '../plugin.js';

const table = (family: IpFamily) => [TABLES[family].family, TABLES[family].name];

/** A family's table as nft lists it, or undefined when there is none. */
async function listed(inNode: InNode, family: IpFamily, ...flags: string[]): Promise<string | undefined> {
  if (!(await inNode('nft', ['list', 'tables'])).includes(tableRef(family))) return undefined;
  return inNode('nft', [...flags, 'list', 'table', ...table(family)]);
}

/** This backend for the shared suites of @kube-router/netpol-testing: one nftables table per family. */
export const nftablesBackend: NetpolTestBackend = {
  name: 'nftables',
  tools: ['nft'],
  createPlugin: (overrides) => createNetpolNftablesPlugin(overrides),
  // Each table's lock, and those of the iptables backend's leftovers' search.
  locks: [nftTableLock(tableRef('ipv4')), nftTableLock(tableRef('ipv6')), toolLocks.xtables, toolLocks.ipset],
  kernel: {
    async objects(inNode, family) {
      const listing = await listed(inNode, family, '-j');
      if (listing === undefined) return [];
      const { chains, sets, maps } = parseNftJson(listing);
      return [...chains, ...sets, ...maps].map((object) => object.name);
    },
    async snapshot(inNode) {
      // With handles: a chain flushed and refilled, or a set rebuilt, shows new ones.
      // Stateless (-s): what the rules' counters counted is traffic, not a change of ours.
      return `${await listed(inNode, 'ipv4', '-s', '-a')}${await listed(inNode, 'ipv6', '-s', '-a')}`;
    },
    async breakServerIngress({ inNode, lab }) {
      await inNode('nft', ['delete', 'element', ...table('ipv4'), INGRESS_MAP, `{ ${lab.pod('web/server').ipv4} }`]);
      await inNode('nft', ['flush', 'chain', ...table('ipv6'), podChainName('web/server', 'ingress', 'ipv6')]);
    },
    async chainRules(inNode, chain) {
      const listing = await inNode('nft', ['-s', 'list', 'chain', ...table('ipv4'), chain]);
      return listing.split('\n').map((line) => line.trim()).filter((line) => line !== '' && line !== '}' && !/^(table|chain) /.test(line));
    },
    async allowEverySource(inNode, chain) {
      const listing = parseNftJson(await inNode('nft', ['-a', '-j', 'list', 'chain', ...table('ipv4'), chain]));
      const [rule] = listing.rules;
      if (!rule) throw new Error(`${chain} has no rule to replace`);
      // Under the same comment, and so the same tag.
      await inNode('nft', ['replace', 'rule', ...table('ipv4'), chain, 'handle', String(rule.handle), 'meta', 'mark', 'set', 'meta', 'mark', '|', '0x10000', 'return', 'comment', `"${rule.comment}"`]);
    },
    async obstructPolicy({ inNode, lab, api }, { namespace, name, spec }) {
      // The policy's peer set already exists with room for one element: the kernel refuses the second (ENFILE). The
      // set is named by the rule's selectors, as the agent's compile of the cluster names them.
      const model = compileNetworkPolicies({
        nodeName: lab.nodeName,
        pods: api.list('v1', 'Pod') as PodLike[],
        namespaces: api.list('v1', 'Namespace') as NamespaceLike[],
        policies: [{ metadata: { namespace, name }, spec }],
      });
      const podsKey = model.policies[0]?.ingress.rules[0]?.peers.podsKey;
      if (!podsKey) throw new Error('the policy has no peer selection to obstruct');
      const object = peerPodsSetName('ingress', podsKey, 'ipv4');
      await inNode('nft', ['add', 'set', ...table('ipv4'), object, '{ type ipv4_addr; size 1; }']);
      return { object, refusal: /Could not process rule: Too many open files in system/ };
    },
    async referenceChain(inNode, chain) {
      await inNode('nft', ['add', 'chain', ...table('ipv4'), 'OTHER-TOOL']);
      await inNode('nft', ['add', 'rule', ...table('ipv4'), 'OTHER-TOOL', 'jump', chain]);
      return {
        failure: `stale/ipv4/${chain}`,
        referenced: async () => (await inNode('nft', ['list', 'chain', ...table('ipv4'), 'OTHER-TOOL'])).includes(`jump ${chain}`),
      };
    },
    disabledFamilyRemoval: {
      matches: (spec) => spec.command === 'nft' && spec.input === `delete table ${tableRef('ipv6')}\n`,
      failure: 'disabled-family-table',
    },
  },
};
