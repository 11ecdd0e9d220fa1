/* global process, console, setInterval, setTimeout, clearTimeout, performance */
// Runs inside a client network namespace: `prober.mjs <ip> <port> <interval-ms> <timeout-ms>` opens a new TCP
// connection every <interval-ms> (whether or not the last one has answered) and prints one line per connection, times
// in milliseconds of the guest's uptime as stream.mjs:
//   ok <started> <ms> <greeting>   fail <started> <reason>
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';

const [host, port, intervalMs, timeoutMs] = process.argv.slice(2);
const origin = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * 1000 - performance.now();
const now = () => Math.round(origin + performance.now());

function probe() {
  const started = now();
  const socket = connect({ host, port: Number(port) });
  let data = '';
  let done = false;
  const finish = (line) => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    console.log(line);
    socket.destroy();
  };
  const timer = setTimeout(() => finish(`fail ${started} timeout`), Number(timeoutMs));
  socket.on('data', (chunk) => {
    data += chunk;
    const newline = data.indexOf('\n');
    if (newline >= 0) finish(`ok ${started} ${now() - started} ${data.slice(0, newline)}`);
  });
  socket.on('error', (error) => finish(`fail ${started} ${error.code ?? error.message}`));
  socket.on('close', () => finish(`fail ${started} closed before the greeting`));
}

setInterval(probe, Number(intervalMs));
probe();
