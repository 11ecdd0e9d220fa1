/* global process, console, setInterval, performance */
// Runs inside a client network namespace: `stream.mjs <ip> <port> <interval-ms>` opens one TCP connection, reads the
// server's greeting, then sends a numbered line every <interval-ms> and expects it back. One line per event, times in
// milliseconds of the kernel's uptime (ProxyWorld.uptime() reads the same clock from the test):
//   hello <t> <greeting>   sent <seq> <t>   answer <seq> <t>   error <code> <t>   closed <t>
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';

const [host, port, intervalMs] = process.argv.slice(2);
const origin = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * 1000 - performance.now();
const now = () => Math.round(origin + performance.now());

const socket = connect({ host, port: Number(port) });
let buffered = '';
let greeted = false;
let seq = 0;
socket.setNoDelay(true);
socket.on('data', (chunk) => {
  buffered += chunk;
  let newline;
  while ((newline = buffered.indexOf('\n')) >= 0) {
    const line = buffered.slice(0, newline);
    buffered = buffered.slice(newline + 1);
    if (!greeted) {
      greeted = true;
      console.log(`hello ${now()} ${line}`);
      setInterval(() => {
        seq++;
        socket.write(`${seq}\n`);
        console.log(`sent ${seq} ${now()}`);
      }, Number(intervalMs));
    } else console.log(`answer ${line} ${now()}`);
  }
});
socket.on('error', (error) => {
  console.log(`error ${error.code ?? error.message} ${now()}`);
  process.exit(1);
});
socket.on('close', () => {
  console.log(`closed ${now()}`);
  process.exit(1);
});
