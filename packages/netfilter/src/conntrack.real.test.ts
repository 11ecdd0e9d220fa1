import { beforeAll, describe, expect, it } from 'vitest';
import { deleteConntrackEntries, listConntrackEntries } from './conntrack.js';
import { missingForRealTests, useTestNetns } from './testing/netns.js';

const missing = missingForRealTests('conntrack', 'iptables', 'python3');

/**
 * Real UDP through a DNAT rule in a namespace, so the kernel tracks it with the reply source rewritten, as a proxy's
 * VIP-to-endpoint flow is tracked; the entries are then deleted by the same filters a proxy uses.
 */
describe.skipIf(missing !== undefined)(`conntrack in a network namespace ${missing ? `(skipped: ${missing})` : ''}`, () => {
  const netns = useTestNetns();
  const vip = '10.96.0.10';

  const sh = (script: string) => netns.runner.run({ command: 'ip', args: ['netns', 'exec', netns.name, 'sh', '-c', script] });
  const sendUdp = (port: number, sourcePort: number) =>
    sh(`python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", ${sourcePort})); s.sendto(b"x", ("${vip}", ${port}))'`);
  const entries = async (): Promise<string[]> =>
    (await netns.runner.run({ command: 'conntrack', args: ['-L', '-p', 'udp'], netns: netns.name })).stdout.split('\n').filter((line) => line.includes(`dst=${vip}`));

  beforeAll(async () => {
    await sh(
      [
        'ip link set lo up',
        `ip addr add ${vip}/32 dev lo`,
        `iptables -t nat -A OUTPUT -p udp -d ${vip} --dport 53 -j DNAT --to-destination 127.0.0.1:5353`,
        `iptables -t nat -A OUTPUT -p udp -d ${vip} --dport 54 -j DNAT --to-destination 127.0.0.2:5353`,
      ].join(' && '),
    );
  });

  it('deletes the UDP entries that point at one endpoint and leaves the others', async () => {
    await sendUdp(53, 40001);
    await sendUdp(54, 40002);
    expect(await entries()).toHaveLength(2);
    // The listing names where each flow went after DNAT: the endpoint.
    const listed = await listConntrackEntries(netns.runner, { protocol: 'udp', family: 'ipv4', originalDestination: vip, originalPort: 54 }, { netns: netns.name });
    expect(listed.map((entry) => [entry.original.sourcePort, entry.reply.source, entry.reply.sourcePort])).toEqual([[40002, '127.0.0.2', 5353]]);
    const started = performance.now();
    const result = await deleteConntrackEntries(netns.runner, { protocol: 'udp', family: 'ipv4', originalDestination: vip, originalPort: 53, replySource: '127.0.0.1' }, { netns: netns.name });
    const tookMs = performance.now() - started;
    expect(result).toEqual({ deleted: 1 });
    const left = await entries();
    expect(left).toHaveLength(1);
    expect(left[0]).toMatch(/src=127\.0\.0\.2 /);
    console.log(`conntrack -D of 1 entry among 2: ${tookMs.toFixed(1)} ms`);
  });

  it('answers 0 when nothing matches, and deletes every entry to a VIP port', async () => {
    expect(await deleteConntrackEntries(netns.runner, { protocol: 'udp', family: 'ipv4', replySource: '127.0.0.9' }, { netns: netns.name })).toEqual({ deleted: 0 });
    expect(await deleteConntrackEntries(netns.runner, { protocol: 'tcp', family: 'ipv4', originalDestination: vip, originalPort: 54 }, { netns: netns.name })).toEqual({ deleted: 0 });
    expect(await deleteConntrackEntries(netns.runner, { protocol: 'udp', family: 'ipv4', originalDestination: vip, originalPort: 54 }, { netns: netns.name })).toEqual({ deleted: 1 });
    expect(await entries()).toEqual([]);
  });
});
