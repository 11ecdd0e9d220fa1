/* global process, console, performance, setTimeout, clearTimeout */
// Runs inside a client network namespace: `probe.mjs <json>` with {host, port, count, protocol, timeoutMs, source?,
// sourcePort?} makes <count> TCP connections (or UDP exchanges, each from a new port unless sourcePort is given) one
// after another and prints a JSON array of {ok, reply, error, ms}: reply is the first line the server sent.
import { createSocket } from 'node:dgram';
import { connect, isIPv6 } from 'node:net';

const request = JSON.parse(process.argv[2]);
const results = [];

function tcp() {
  return new Promise((resolve) => {
    const started = performance.now();
    const done = (result) => resolve({ ...result, ms: Math.round(performance.now() - started) });
    const socket = connect({ host: request.host, port: request.port, ...(request.source && { localAddress: request.source }) });
    socket.setTimeout(request.timeoutMs);
    let data = '';
    socket.on('data', (chunk) => {
      data += chunk;
      if (data.includes('\n')) {
        done({ ok: true, reply: data.trim() });
        socket.destroy();
      }
    });
    socket.on('timeout', () => {
      done({ ok: false, error: 'timeout' });
      socket.destroy();
    });
    socket.on('error', (error) => done({ ok: false, error: error.code ?? error.message }));
  });
}

function udp() {
  return new Promise((resolve) => {
    const started = performance.now();
    const socket = createSocket(isIPv6(request.host) ? 'udp6' : 'udp4');
    let timer;
    const done = (result) => {
      clearTimeout(timer);
      socket.close();
      resolve({ ...result, ms: Math.round(performance.now() - started) });
    };
    socket.on('message', (message) => done({ ok: true, reply: message.toString().trim() }));
    socket.on('error', (error) => done({ ok: false, error: error.code ?? error.message }));
    socket.bind({ port: request.sourcePort ?? 0, ...(request.source && { address: request.source }) }, () => {
      // Connected, so that an ICMP port unreachable comes back as ECONNREFUSED.
      socket.connect(request.port, request.host, () => socket.send('probe'));
      timer = setTimeout(() => done({ ok: false, error: 'timeout' }), request.timeoutMs);
    });
  });
}

for (let i = 0; i < request.count; i++) results.push(await (request.protocol === 'udp' ? udp() : tcp()));
console.log(JSON.stringify(results));
