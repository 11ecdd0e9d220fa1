import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { CommandRegistry } from './exec-runner.js';
import { killLeftoverNflogReaders, startNflogReader } from './nflog.js';
import type { NflogPacket, NflogReader } from './nflog.js';
import { missingForRealTests, useTestNetns } from './testing/netns.js';

const missing = missingForRealTests('iptables', 'ip6tables', 'tcpdump');
const run = promisify(execFile);

/** Sends `count` UDP datagrams and opens one TCP connection per address from inside the namespace, with Node. */
async function sendTraffic(netns: string, count: number): Promise<void> {
  // A socket per datagram: the REJECT's ICMP error fails the next send on the same socket.
  const script = `
    const dgram = require('node:dgram'); const net = require('node:net');
    (async () => {
      for (const [type, host] of [['udp4', '127.0.0.1'], ['udp6', '::1']]) {
        for (let i = 0; i < ${count}; i++) {
          const socket = dgram.createSocket(type).on('error', () => {});
          await new Promise((done) => socket.send('x', 9999, host, done));
          socket.close();
        }
      }
      for (const host of ['127.0.0.1', '::1']) {
        await new Promise((done) => net.connect(9998, host).on('error', done).on('connect', done));
      }
    })();`;
  await run('ip', ['netns', 'exec', netns, process.execPath, '-e', script], { timeout: 10_000 });
}

describe.skipIf(missing !== undefined)(`NFLOG reader through tcpdump${missing ? ` (skipped: ${missing})` : ''}`, () => {
  const netns = useTestNetns();
  let reader: NflogReader | undefined;

  afterEach(async () => {
    await reader?.stop();
    reader = undefined;
  });

  it('sees every packet that an NFLOG rule logs, in both families, decoded', async () => {
    await netns.runner.run({ command: 'ip', args: ['link', 'set', 'lo', 'up'], netns: netns.name });
    for (const iptables of ['iptables', 'ip6tables']) {
      for (const rule of [
        ['-p', 'udp', '--dport', '9999', '-j', 'NFLOG', '--nflog-group', '100', '--nflog-prefix', 'krt-test'],
        ['-p', 'udp', '--dport', '9999', '-j', 'REJECT'],
        ['-p', 'tcp', '--dport', '9998', '--syn', '-j', 'NFLOG', '--nflog-group', '100'],
        // Another group's packets are not this reader's.
        ['-p', 'udp', '--dport', '9999', '-j', 'NFLOG', '--nflog-group', '101'],
      ]) {
        await netns.runner.run({ command: iptables, args: ['-A', 'OUTPUT', '-o', 'lo', ...rule], netns: netns.name });
      }
    }
    const packets: NflogPacket[] = [];
    const started = performance.now();
    reader = startNflogReader({ group: 100, netns: netns.name, onPacket: (packet) => packets.push(packet) });
    await reader.listening;
    const listeningMs = performance.now() - started;

    await sendTraffic(netns.name, 5);
    const deadline = Date.now() + 5_000;
    while (packets.length < 12 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    const summary = packets.map(({ family, protocol, dst, dstPort, prefix, group }) => `${group} ${family} ${protocol} ${dst}:${dstPort} ${prefix ?? '-'}`);
    const count = (line: string) => summary.filter((entry) => entry === line).length;
    expect(count('100 ipv4 udp 127.0.0.1:9999 krt-test'), summary.join('\n')).toBe(5);
    expect(count('100 ipv6 udp ::1:9999 krt-test')).toBe(5);
    expect(count('100 ipv4 tcp 127.0.0.1:9998 -')).toBe(1);
    expect(count('100 ipv6 tcp ::1:9998 -')).toBe(1);
    expect(packets).toHaveLength(12);
    for (const packet of packets) expect(Math.abs(packet.time.getTime() - Date.now())).toBeLessThan(10_000);
    console.info(`nflog reader: listening after ${Math.round(listeningMs)} ms, ${packets.length} packets read`);

    // tcpdump ends on the SIGTERM with code 0: a SIGKILL after the grace would end it with that signal instead.
    const end = await reader.stop();
    expect(end).toMatchObject({ stopped: true, signal: null, code: 0 });
  }, 30_000);

  it('ends, saying why, when tcpdump cannot read the group', async () => {
    // The kernel binds a group to one socket: a second reader of the same group is refused.
    const first = startNflogReader({ group: 100, netns: netns.name, onPacket: () => undefined });
    reader = first;
    await first.listening;
    const second = startNflogReader({ group: 100, netns: netns.name, onPacket: () => undefined });
    await expect(second.listening).rejects.toThrow();
    const end = await second.ended;
    expect(end.stopped).toBe(false);
    expect(end.code).not.toBe(0);
    expect(end.reason).toMatch(/tcpdump -i nflog:100 .*exited with code \d+; stderr: .+/);
  }, 30_000);

  it('kills the reader an earlier agent left on the group, and only that one, so that a new reader can listen', async () => {
    // What an agent killed with SIGKILL leaves: its tcpdump, detached in its own group, still holding the group.
    const orphan = startNflogReader({ group: 100, netns: netns.name, onPacket: () => undefined, registry: new CommandRegistry() });
    await orphan.listening;
    // An operator's own capture of another group, with other arguments, is none of ours.
    const operator = spawn('ip', ['netns', 'exec', netns.name, 'tcpdump', '-i', 'nflog:101', '-w', '/dev/null'], { stdio: 'ignore', detached: true });
    try {
      const refused = startNflogReader({ group: 100, netns: netns.name, onPacket: () => undefined });
      await expect(refused.listening).rejects.toThrow();
      const killed = await killLeftoverNflogReaders(100, netns.name);
      expect(killed).toHaveLength(1);
      expect((await orphan.ended).signal).toBe('SIGKILL');
      expect(operator.exitCode).toBeNull();
      reader = startNflogReader({ group: 100, netns: netns.name, onPacket: () => undefined });
      await reader.listening;
      // Another namespace's reader of the same group is not this namespace's leftover.
      expect(await killLeftoverNflogReaders(100)).toEqual([]);
    } finally {
      operator.kill('SIGKILL');
    }
  }, 30_000);

  it('ends at once with the reason when tcpdump is missing, and is stopped by its registry', async () => {
    const absent = await startNflogReader({ group: 100, tcpdump: '/nonexistent/tcpdump', onPacket: () => undefined }).ended;
    expect(absent).toMatchObject({ stopped: false, code: null });
    expect(absent.reason).toMatch(/could not start: .*ENOENT/);

    const registry = new CommandRegistry();
    reader = startNflogReader({ group: 100, netns: netns.name, registry, onPacket: () => undefined });
    await reader.listening;
    expect(registry.size).toBe(1);
    expect(registry.halt('the agent is stopping')).toBe(1);
    await expect(reader.ended).resolves.toMatchObject({ stopped: true });
    expect(registry.size).toBe(0);
    await expect(startNflogReader({ group: 100, registry, onPacket: () => undefined }).ended).resolves.toMatchObject({
      reason: expect.stringMatching(/was not run: the agent is stopping/),
    });
  }, 30_000);
});
