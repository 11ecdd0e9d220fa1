/* global process, console */
// Runs inside a pod network namespace: answers every TCP connection and UDP datagram on the given ports, both
// families, with "<name> <client address>" (an IPv4 client as its IPv4 address), so that tests see which pod served
// them and whether their address was kept or masqueraded.
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';

const [name, ...ports] = process.argv.slice(2);
const plain = (address) => address.replace(/^::ffff:/, '');
for (const port of ports.map(Number)) {
  createServer((socket) => {
    socket.on('error', () => {});
    socket.end(`${name} ${plain(socket.remoteAddress ?? '')}\n`);
  }).listen({ port, host: '::', ipv6Only: false });
  const udp = createSocket({ type: 'udp6', ipv6Only: false });
  udp.on('message', (_message, remote) => udp.send(`${name} ${plain(remote.address)}\n`, remote.port, remote.address));
  udp.bind(port, '::');
}
console.log('listening');
