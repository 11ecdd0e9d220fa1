// The one long-lived process of a lab pod, started as
// `ip netns exec <pod netns> node pod-agent.mjs <netns> <namespace/name> <config>`.
// It listens on the pod's container ports (TCP or UDP, IPv4 and IPv6) and answers every connection or datagram with
// the pod's identity; it also runs probes sent to it on stdin, so that probing needs no process per probe.
// It exits when its stdin closes, so a crashed lab never leaves it behind.
/* global process */
import dgram from 'node:dgram';
import net from 'node:net';
import { createInterface } from 'node:readline';
import { runProbes } from './probe-core.mjs';

/** @type {{ identity: string, ports: { port: number, protocol: 'TCP' | 'UDP' }[] }} */
const config = JSON.parse(process.argv[4] ?? '{}');
const answer = `${config.identity}\n`;
const families = [
  { host: '0.0.0.0', udpType: 'udp4' },
  { host: '::', udpType: 'udp6' },
];

function send(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

function listenTcp(port, host) {
  return new Promise((resolve, reject) => {
    const server = net.createServer((socket) => {
      socket.on('error', () => undefined);
      socket.end(answer);
    });
    server.once('error', reject);
    server.listen({ port, host, ipv6Only: host === '::' }, () => resolve());
  });
}

function listenUdp(port, host, type) {
  return new Promise((resolve, reject) => {
    const socket = dgram.createSocket({ type, ipv6Only: type === 'udp6' });
    socket.on('message', (_message, sender) => socket.send(answer, sender.port, sender.address));
    socket.once('error', reject);
    socket.bind({ port, address: host }, () => {
      socket.on('error', () => undefined);
      resolve();
    });
  });
}

try {
  const listeners = [];
  for (const { port, protocol } of config.ports) {
    for (const { host, udpType } of families) {
      listeners.push(protocol === 'UDP' ? listenUdp(port, host, udpType) : listenTcp(port, host));
    }
  }
  await Promise.all(listeners);
} catch (error) {
  send({ type: 'error', message: `listening failed: ${error.message}` });
  process.exit(1);
}

// One probe of each kind against itself before reporting ready: the first probe a cold process runs is slow enough
// to miss a short timeout on a loaded machine.
const warmUps = ['TCP', 'UDP'].flatMap((kind) => config.ports.filter(({ protocol }) => protocol === kind).slice(0, 1));
await runProbes(warmUps.map(({ port, protocol }) => ({ host: '127.0.0.1', port, protocol, timeoutMs: 5_000 })));

const requests = createInterface({ input: process.stdin });
requests.on('line', async (line) => {
  const request = JSON.parse(line);
  send({ type: 'probed', id: request.id, results: await runProbes(request.probes) });
});
requests.on('close', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
send({ type: 'ready', pid: process.pid });
