/* global process, console, setInterval, performance */
// Runs inside a client network namespace: `udp-stream.mjs <ip> <port> <interval-ms>` sends a datagram every
// <interval-ms> from one socket (one source port, so one conntrack entry and one IPVS connection all along) and prints
// `answer <t> <pod> <client address>` for each reply, times in milliseconds of the kernel's uptime.
import { readFileSync } from 'node:fs';
import { createSocket } from 'node:dgram';

const [host, port, intervalMs] = process.argv.slice(2);
const origin = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * 1000 - performance.now();
const now = () => Math.round(origin + performance.now());

const socket = createSocket('udp4');
socket.on('message', (message) => console.log(`answer ${now()} ${message.toString().trim()}`));
socket.on('error', (error) => console.log(`error ${now()} ${error.code ?? error.message}`));
socket.bind(0, () => {
  console.log(`bound ${now()} ${socket.address().port}`);
  setInterval(() => socket.send('ping', Number(port), host), Number(intervalMs));
});
