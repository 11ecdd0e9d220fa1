import { beforeAll, describe, expect, it } from 'vitest';
import { CommandError } from './command.js';
import type { IpFamily } from './family.js';
import { Iptables } from './iptables.js';
import type { IptablesBackend } from './iptables.js';
import { renderIptablesRestore } from './iptables-restore.js';
import type { SavedTable } from './iptables-save.js';
import { missingForRealTests, useTestNetns } from './testing/netns.js';

const missing = missingForRealTests('iptables-restore', 'ip6tables-restore', 'iptables-legacy-restore');

const cases: { family: IpFamily; backend: IptablesBackend; address: string; other: string }[] = [
  { family: 'ipv4', backend: 'default', address: '192.0.2.10/32', other: '198.51.100.7/32' },
  { family: 'ipv6', backend: 'default', address: '2001:db8::10/128', other: '2001:db8:1::7/128' },
  { family: 'ipv4', backend: 'legacy', address: '192.0.2.10/32', other: '198.51.100.7/32' },
  { family: 'ipv6', backend: 'legacy', address: '2001:db8::10/128', other: '2001:db8:1::7/128' },
];

function rulesOf(table: SavedTable, chain: string): string[] | undefined {
  return table.chains.find((candidate) => candidate.name === chain)?.rules.map((rule) => rule.spec);
}

describe.skipIf(missing !== undefined)(
  `iptables restores in a network namespace ${missing ? `(skipped: ${missing})` : ''}`,
  () => {
    const netns = useTestNetns();

    it('runs the nf_tables backend as plain iptables, with legacy also present', async () => {
      const iptables = new Iptables({ runner: netns.runner, netns: netns.name });
      await expect(iptables.version()).resolves.toMatchObject({ backend: 'nf_tables' });
      const legacy = new Iptables({ runner: netns.runner, netns: netns.name, backend: 'legacy' });
      await expect(legacy.version()).resolves.toMatchObject({ backend: 'legacy' });
    });

    describe.each(cases)('$family with the $backend backend', ({ family, backend, address, other }) => {
      const prefix = `KRT-${family === 'ipv4' ? '4' : '6'}${backend === 'legacy' ? 'L' : 'N'}-`;
      const forward = `${prefix}FWD`;
      const policy = `${prefix}POL`;
      let iptables: Iptables;

      beforeAll(async () => {
        iptables = new Iptables({ runner: netns.runner, netns: netns.name, family, backend });
        // Another tool's state in the same table: a chain of its own, rules in built-in chains.
        await iptables.run(['-t', 'filter', '-N', 'FOREIGN-CHAIN']);
        await iptables.run(['-t', 'filter', '-A', 'FOREIGN-CHAIN', '-s', other, '-j', 'DROP']);
        await iptables.run(['-t', 'filter', '-A', 'INPUT', '-j', 'FOREIGN-CHAIN']);
        await iptables.run(['-t', 'filter', '-A', 'FORWARD', '-s', other, '-j', 'DROP']);
      });

      it('creates our chains and leaves the foreign ones alone', async () => {
        await iptables.restore(
          renderIptablesRestore([
            {
              table: 'filter',
              chains: [
                { name: forward, rules: [`-d ${address} -m comment --comment "to policy chain" -j ${policy}`] },
                { name: policy, rules: ['-p tcp -m tcp --dport 80 -j ACCEPT', '-j DROP'] },
              ],
              lines: [`-I FORWARD 1 -m comment --comment "kube-router test" -j ${forward}`],
            },
          ]),
        );
        const own = await iptables.ownChains('filter', prefix);
        expect(own.chains.map((chain) => chain.name)).toEqual([forward, policy]);
        expect(own.chains[0]!.rules[0]).toMatchObject({ target: policy, comment: 'to policy chain' });
        expect(own.chains[1]!.rules.map((rule) => rule.spec)).toEqual([
          '-p tcp -m tcp --dport 80 -j ACCEPT',
          '-j DROP',
        ]);
        expect(own.jumpsIn.map((rule) => [rule.chain, rule.comment])).toEqual([['FORWARD', 'kube-router test']]);

        const table = await iptables.saveParsed('filter');
        expect(rulesOf(table, 'FOREIGN-CHAIN')).toEqual([`-s ${other} -j DROP`]);
        expect(rulesOf(table, 'INPUT')).toEqual(['-j FOREIGN-CHAIN']);
        expect(rulesOf(table, 'FORWARD')).toEqual([
          `-m comment --comment "kube-router test" -j ${forward}`,
          `-s ${other} -j DROP`,
        ]);
      });

      it('replaces the rules of our chains on the next --noflush restore, and only those', async () => {
        await iptables.restore(
          renderIptablesRestore([
            {
              table: 'filter',
              chains: [
                { name: forward, rules: [`-d ${address} -j ${policy}`] },
                { name: policy, rules: ['-p udp -m udp --dport 53 -j ACCEPT'] },
              ],
            },
          ]),
        );
        const table = await iptables.saveParsed('filter');
        expect(rulesOf(table, forward)).toEqual([`-d ${address} -j ${policy}`]);
        expect(rulesOf(table, policy)).toEqual(['-p udp -m udp --dport 53 -j ACCEPT']);
        expect(rulesOf(table, 'FOREIGN-CHAIN')).toEqual([`-s ${other} -j DROP`]);
        expect(rulesOf(table, 'INPUT')).toEqual(['-j FOREIGN-CHAIN']);
        expect(rulesOf(table, 'FORWARD')).toHaveLength(2);
        await expect(
          iptables.hasRule('filter', policy, ['-p', 'udp', '-m', 'udp', '--dport', '53', '-j', 'ACCEPT']),
        ).resolves.toBe(true);
        await expect(iptables.hasRule('filter', policy, ['-j', 'DROP'])).resolves.toBe(false);
      });

      it('rejects a bad restore as a whole, with stderr and the blamed line in the error', async () => {
        const input = renderIptablesRestore([
          { table: 'filter', chains: [{ name: policy, rules: ['-j ACCEPT', `-j ${prefix}MISSING`] }] },
        ]);
        const error = (await iptables.restore(input).catch((e: unknown) => e)) as CommandError;
        expect(error).toBeInstanceOf(CommandError);
        expect(error.exitCode).not.toBe(0);
        expect(error.stderr).not.toBe('');
        expect(error.message).toContain(`stderr: ${error.stderr.trim().slice(0, 40)}`);
        expect(error.message).toContain(`input line 4: -A ${policy} -j ${prefix}MISSING`);
        const table = await iptables.saveParsed('filter');
        expect(rulesOf(table, policy)).toEqual(['-p udp -m udp --dport 53 -j ACCEPT']);
      });

      it('removes our chains and our jump, leaving the foreign state', async () => {
        await iptables.restore(
          renderIptablesRestore([
            {
              table: 'filter',
              chains: [],
              lines: [`-D FORWARD -m comment --comment "kube-router test" -j ${forward}`],
              deleteChains: [forward, policy],
            },
          ]),
        );
        const own = await iptables.ownChains('filter', prefix);
        expect(own).toEqual({ table: 'filter', chains: [], jumpsIn: [] });
        const table = await iptables.saveParsed('filter');
        expect(rulesOf(table, 'FORWARD')).toEqual([`-s ${other} -j DROP`]);
        expect(rulesOf(table, 'FOREIGN-CHAIN')).toEqual([`-s ${other} -j DROP`]);
      });
    });
  },
);
