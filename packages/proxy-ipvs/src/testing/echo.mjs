/* global process, console */
// Runs inside a pod network namespace: answers every TCP connection (and UDP datagram) on the given ports with
// "<name> <client address>" and keeps the connection open until the client closes it, so that tests can hold one;
// what the client sends on it comes back (stream.mjs keeps a connection busy that way).
import { createServer } from 'node:net';
import { createSocket } from 'node:dgram';

const [name, ...ports] = process.argv.slice(2);
for (const port of ports.map(Number)) {
  createServer((socket) => {
    socket.on('error', () => {});
    socket.on('data', (chunk) => socket.write(chunk));
    socket.write(`${name} ${socket.remoteAddress}\n`);
  }).listen(port, '0.0.0.0');
  const udp = createSocket('udp4');
  udp.on('message', (_message, remote) => udp.send(`${name} ${remote.address}\n`, remote.port, remote.address));
  udp.bind(port, '0.0.0.0');
}
console.log('listening');
