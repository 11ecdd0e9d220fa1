import { describe, expect, it } from 'vitest';
import { CommandError } from './command.js';
import { conntrackDeleteArgs, deleteConntrackEntries, listConntrackEntries, parseConntrackList } from './conntrack.js';
import { RecordingRunner } from './recording-runner.js';

const stderrOf = (count: number): string => `conntrack v1.4.7 (conntrack-tools): ${count} flow entries have been deleted.\n`;

describe('deleteConntrackEntries', () => {
  it('runs conntrack -D with the filter it is given, in the namespace, with a timeout', async () => {
    const runner = new RecordingRunner().on('conntrack', { stderr: stderrOf(2) });
    const result = await deleteConntrackEntries(
      runner,
      { protocol: 'udp', family: 'ipv4', originalDestination: '10.96.0.10', originalPort: 53, replySource: '10.244.1.5', replySourcePort: 5353 },
      { netns: 'krt-x', timeoutMs: 1234 },
    );
    expect(result).toEqual({ deleted: 2 });
    expect(runner.invocations).toMatchObject([
      {
        line: 'conntrack -D -p udp -f ipv4 --orig-dst 10.96.0.10 --orig-port-dst 53 --reply-src 10.244.1.5 --reply-port-src 5353',
        netns: 'krt-x',
        timeoutMs: 1234,
      },
    ]);
  });

  it('takes exit status 1 with "0 flow entries have been deleted" as nothing to delete', async () => {
    const runner = new RecordingRunner().on('conntrack', { exitCode: 1, stderr: stderrOf(0) });
    expect(await deleteConntrackEntries(runner, { protocol: 'udp', family: 'ipv6', originalDestination: 'fd00::a' })).toEqual({ deleted: 0 });
    expect(runner.lines()).toEqual(['conntrack -D -p udp -f ipv6 --orig-dst fd00::a']);
  });

  it('fails with conntrack’s stderr for any other exit status 1 and for other codes', async () => {
    const other = new RecordingRunner().on('conntrack', { exitCode: 1, stderr: 'conntrack v1.4.7 (conntrack-tools): Operation failed: invalid parameters\n' });
    const error = await deleteConntrackEntries(other, { protocol: 'udp', family: 'ipv4', replySource: '10.0.0.1' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CommandError);
    expect((error as CommandError).message).toMatch(/conntrack -D .*exited with code 1.*invalid parameters/);
    const crashed = new RecordingRunner().on('conntrack', { exitCode: 2, stderr: 'no such file' });
    await expect(deleteConntrackEntries(crashed, { protocol: 'tcp', family: 'ipv4', replySource: '10.0.0.1' })).rejects.toThrow(/exited with code 2.*no such file/);
    const hung = new RecordingRunner().on('conntrack', { timedOut: true });
    await expect(deleteConntrackEntries(hung, { protocol: 'tcp', family: 'ipv4', replySource: '10.0.0.1' })).rejects.toThrow(/timed out/);
  });

  it('refuses a filter that would match more than it says, before running anything', async () => {
    const runner = new RecordingRunner();
    await expect(deleteConntrackEntries(runner, { protocol: 'udp', family: 'ipv4' })).rejects.toThrow(/needs an address or port/);
    await expect(deleteConntrackEntries(runner, { protocol: 'udp', family: 'ipv4', originalDestination: 'fd00::1' })).rejects.toThrow(/not an ipv4 address/);
    await expect(deleteConntrackEntries(runner, { protocol: 'udp', family: 'ipv6', replySource: '10.0.0.1' })).rejects.toThrow(/not an ipv6 address/);
    await expect(deleteConntrackEntries(runner, { protocol: 'udp', family: 'ipv4', replySource: '10.0.0.1 -F' })).rejects.toThrow(/not an ipv4 address/);
    await expect(deleteConntrackEntries(runner, { protocol: 'udp', family: 'ipv4', originalPort: 70000 })).rejects.toThrow(/not a port/);
    await expect(deleteConntrackEntries(runner, { protocol: 'icmp' as 'udp', family: 'ipv4', originalPort: 1 })).rejects.toThrow(/unsupported protocol/);
    expect(runner.invocations).toEqual([]);
  });

  it('leaves out what the filter does not name', () => {
    expect(conntrackDeleteArgs({ protocol: 'sctp', family: 'ipv4', originalPort: 9000 })).toEqual(['-D', '-p', 'sctp', '-f', 'ipv4', '--orig-port-dst', '9000']);
  });
});

describe('parseConntrackList', () => {
  it('reads the original and reply tuples and the state of TCP, UDP and IPv6 lines, and skips the rest', () => {
    const text = [
      'tcp      6 431999 ESTABLISHED src=10.244.0.5 dst=10.96.0.10 sport=40000 dport=80 src=10.244.1.7 dst=10.244.0.5 sport=8080 dport=40000 [ASSURED] mark=0 use=1',
      'udp      17 29 src=10.244.0.5 dst=10.96.0.10 sport=5353 dport=53 [UNREPLIED] src=10.244.1.8 dst=10.244.0.5 sport=53 dport=5353 mark=0 use=1',
      'tcp      6 118 TIME_WAIT src=fd00::5 dst=fd00:96::10 sport=41000 dport=80 src=fd00:1::7 dst=fd00::5 sport=8080 dport=41000 [ASSURED] mark=0 use=1',
      'icmp     1 29 src=10.0.0.1 dst=10.0.0.2 type=8 code=0 id=1 src=10.0.0.2 dst=10.0.0.1 type=0 code=0 id=1 mark=0 use=1',
      'conntrack v1.4.7 (conntrack-tools): 3 flow entries have been shown.',
      '',
    ].join('\n');
    expect(parseConntrackList(text)).toEqual([
      {
        protocol: 'tcp',
        state: 'ESTABLISHED',
        original: { source: '10.244.0.5', destination: '10.96.0.10', sourcePort: 40000, destinationPort: 80 },
        reply: { source: '10.244.1.7', destination: '10.244.0.5', sourcePort: 8080, destinationPort: 40000 },
      },
      {
        protocol: 'udp',
        state: 'UDP',
        original: { source: '10.244.0.5', destination: '10.96.0.10', sourcePort: 5353, destinationPort: 53 },
        reply: { source: '10.244.1.8', destination: '10.244.0.5', sourcePort: 53, destinationPort: 5353 },
      },
      {
        protocol: 'tcp',
        state: 'TIME_WAIT',
        original: { source: 'fd00::5', destination: 'fd00:96::10', sourcePort: 41000, destinationPort: 80 },
        reply: { source: 'fd00:1::7', destination: 'fd00::5', sourcePort: 8080, destinationPort: 41000 },
      },
    ]);
  });
});

describe('listConntrackEntries', () => {
  it('lists the flows to one address and port, and refuses a filter that is not one', async () => {
    const runner = new RecordingRunner().on('conntrack', { stdout: '' });
    expect(await listConntrackEntries(runner, { protocol: 'tcp', family: 'ipv4', originalDestination: '10.96.0.10', originalPort: 80 }, { netns: 'n1' })).toEqual([]);
    expect(runner.lines()).toEqual(['conntrack -L -p tcp -f ipv4 --orig-dst 10.96.0.10 --orig-port-dst 80']);
    await expect(listConntrackEntries(runner, { protocol: 'tcp', family: 'ipv4', originalDestination: 'fd00::1', originalPort: 80 })).rejects.toThrow(/not an ipv4 address/);
  });
});
