import { describe, expect, it } from 'vitest';
import { CommandError, type CommandSpec } from './command.js';
import { DryRunRunner, isReadCommand } from './dry-run-runner.js';
import { RecordingRunner } from './recording-runner.js';

const spec = (line: string, extra: Partial<CommandSpec> = {}): CommandSpec => {
  const [command = '', ...args] = line.split(' ');
  return { command, args, ...extra };
};

describe('isReadCommand', () => {
  it.each([
    'iptables-save -t filter',
    'ip6tables-nft-save -t filter',
    'iptables-legacy-save',
    'iptables -S KUBE-ROUTER-INPUT',
    'iptables -C FORWARD -j KUBE-ROUTER-FORWARD',
    'ipset save',
    'ipset list -n',
    'nft -j list ruleset',
    'nft list table ip kube-router-filter-ipv4',
    'ip route show table main',
    'ip -j addr show dev kube-bridge',
    'ipvsadm -S -n',
  ])('reads: %s', (line) => {
    expect(isReadCommand(spec(line))).toBe(true);
  });

  it.each([
    'iptables-restore --noflush',
    'ip6tables-nft-restore --noflush',
    'iptables -A FORWARD -j KUBE-ROUTER-FORWARD',
    'iptables -D FORWARD 1',
    'iptables -F KUBE-ROUTER-INPUT',
    'iptables -L -Z',
    'ipset restore',
    'ipset create KUBE-SRC-X hash:ip',
    'ipset destroy KUBE-SRC-X',
    'ipset swap A B',
    'nft -f -',
    'nft delete table ip kube-router-filter-ipv4',
    'nft flush ruleset',
    'ip route replace 10.0.0.0/24 via 192.0.2.1',
    'ip -batch -',
    'ipvsadm -R',
    'ipvsadm -A -t 10.0.0.1:80',
    'conntrack -D -d 10.0.0.1',
    'tc qdisc add dev eth0 root noqueue',
  ])('writes, or may: %s', (line) => {
    expect(isReadCommand(spec(line))).toBe(false);
  });

  it('counts any command given input as a write, whatever its name', () => {
    expect(isReadCommand(spec('nft list ruleset', { input: 'flush ruleset' }))).toBe(false);
  });
});

describe('DryRunRunner', () => {
  it('runs reads, runs anything in its scratch namespace, and refuses every other command without running it', async () => {
    const inner = new RecordingRunner();
    const runner = new DryRunRunner(inner, { scratchNetns: 'krt-diff-abc', reason: 'kube-router diff changes nothing in the kernel' });
    await runner.run(spec('iptables-save -t filter'));
    await runner.run(spec('iptables-restore --noflush', { input: '*filter\nCOMMIT\n', netns: 'krt-diff-abc' }));
    const refused = runner.run(spec('iptables-restore --noflush', { input: '*filter\nCOMMIT\n' }));
    await expect(refused).rejects.toBeInstanceOf(CommandError);
    await expect(refused).rejects.toThrow(/iptables-restore --noflush was not run: kube-router diff changes nothing in the kernel/);
    await expect(runner.run(spec('ipset destroy KUBE-SRC-X', { netns: 'krt-node' }))).rejects.toThrow(/netns krt-node/);
    expect(inner.lines()).toEqual(['iptables-save -t filter', 'iptables-restore --noflush']);
    expect(runner.refused).toEqual(['iptables-restore --noflush', 'ipset destroy KUBE-SRC-X (netns krt-node)']);
  });

  it('without a scratch namespace runs reads only', async () => {
    const inner = new RecordingRunner();
    const runner = new DryRunRunner(inner);
    await runner.run(spec('nft -j list ruleset'));
    await expect(runner.run(spec('nft -f -', { input: 'add table ip x', netns: 'krt-diff-abc' }))).rejects.toThrow(
      /was not run: a dry run changes nothing in the kernel and this is not a command known to be a read/,
    );
    expect(inner.lines()).toEqual(['nft -j list ruleset']);
  });
});
