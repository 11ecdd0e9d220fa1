import { parseIpsetSave, parseIptablesSave, toolLocks } from '@kube-router/netfilter';
import type { NetpolTestBackend } from '@kube-router/netpol-testing';
import { TOP_CHAINS, isOwnChain, isOwnSet, targetSetName } from '../names.js';
import { createNetpolIptablesPlugin } from '../plugin.js';

const SAVE = { ipv4: 'iptables-save', ipv6: 'ip6tables-save' } as const;

/** This backend for the shared suites of @kube-router/netpol-testing: iptables chains and ipsets. */
export const iptablesBackend: NetpolTestBackend = {
  name: 'iptables',
  tools: ['iptables', 'ip6tables', 'ipset', 'iptables-restore', 'iptables-save'],
  createPlugin: (overrides) => createNetpolIptablesPlugin(overrides),
  locks: [toolLocks.xtables, toolLocks.ipset],
  kernel: {
    async objects(inNode, family) {
      const [filter] = parseIptablesSave(await inNode(SAVE[family], ['-t', 'filter']));
      const chains = (filter?.chains ?? []).filter((chain) => !chain.builtin && isOwnChain(chain.name));
      const sets = parseIpsetSave(await inNode('ipset', ['save'])).filter((set) => isOwnSet(set.name) && set.family === family);
      return [...chains, ...sets].map((object) => object.name);
    },
    async snapshot(inNode) {
      // Chains are written again under the same names; sets whose members match are adopted (a rebuilt set would
      // carry a new initval).
      const saved = `${await inNode('iptables-save', [])}\n${await inNode('ip6tables-save', [])}`;
      const chains = saved.split('\n').filter((line) => line.startsWith(':KUBE-')).map((line) => line.split(' ')[0]);
      return [...chains.sort(), await inNode('ipset', ['save'])].join('\n');
    },
    async breakServerIngress({ inNode }) {
      await inNode('iptables', ['-D', 'FORWARD', '-m', 'comment', '--comment', 'kube-router netpol', '-j', TOP_CHAINS.FORWARD]);
      await inNode('ip6tables', ['-F', TOP_CHAINS.FORWARD]);
    },
    async chainRules(inNode, chain) {
      return (await inNode('iptables-save', ['-t', 'filter'])).split('\n').filter((line) => line.startsWith(`-A ${chain} `));
    },
    async allowEverySource(inNode, chain) {
      await inNode('iptables', ['-R', chain, '1', '-j', 'MARK', '--set-xmark', '0x10000/0x10000']);
    },
    async obstructPolicy({ inNode }, { namespace, name }) {
      // A set of the wrong type under the name the policy's target set must have: the kernel refuses the swap.
      const object = targetSetName(`${namespace}/${name}`, 'ipv4');
      await inNode('ipset', ['create', object, 'hash:net', 'family', 'inet']);
      return { object };
    },
    async referenceChain(inNode, chain) {
      await inNode('iptables', ['-N', 'OTHER-TOOL']);
      await inNode('iptables', ['-A', 'OTHER-TOOL', '-j', chain]);
      return {
        failure: `stale-chains/ipv4/${chain}`,
        referenced: async () => (await inNode('iptables-save', ['-t', 'filter'])).includes(`-A OTHER-TOOL -j ${chain}`),
      };
    },
    disabledFamilyRemoval: {
      matches: (spec) => /^ip6tables(-nft|-legacy)?-restore$/.test(spec.command),
      failure: 'disabled-family/ipv6',
    },
  },
};
