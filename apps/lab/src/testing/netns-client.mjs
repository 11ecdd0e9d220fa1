// The Services scenarios' helper in one network namespace (a pod's, a node's, the external router's), started as
// `ip netns exec <netns> node netns-client.mjs <netns>`: it runs what is asked of it on stdin, one JSON line each, and
// answers on stdout. Plain JavaScript so that it needs no TypeScript loader inside the namespace.
//   probe:  `count` requests one after another (a new connection or a new socket each), each with its outcome.
//   serve:  a TCP or UDP listener on both families answering `<identity> <client address>`: what the server side of
//           a connection saw, for the scenarios about the client's address (externalTrafficPolicy Local, ...).
//   stream: a UDP client that keeps sending from one source port, as conntrack.go's `nc -u -p 12345` loop, and
//           reports every answer as it comes.
// It exits when its stdin closes or its namespace is deleted, so a crashed test never leaves it behind.
/* global process, setInterval, clearInterval, URL */
import dgram from 'node:dgram';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { createInterface } from 'node:readline';
// testkit's probes, beside this file in the QEMU guest; on the host the launcher names testkit's copy (PROBE_CORE).
const { runProbe } = await import(process.env.PROBE_CORE ?? new URL('./probe-core.mjs', import.meta.url).href);

const netns = process.argv[2] ?? '';
const streams = new Map();
const servers = [];

function send(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

async function probe(request) {
  const results = [];
  for (let i = 0; i < (request.count ?? 1); i++) {
    results.push(await runProbe(request));
  }
  return results;
}

function serve({ protocol, port, identity }) {
  const listeners = [
    { host: '0.0.0.0', type: 'udp4' },
    { host: '::', type: 'udp6' },
  ].map(
    ({ host, type }) =>
      new Promise((resolve, reject) => {
        if (protocol === 'UDP') {
          const socket = dgram.createSocket({ type, ipv6Only: type === 'udp6' });
          socket.on('message', (_message, sender) => socket.send(`${identity} ${sender.address}\n`, sender.port, sender.address));
          socket.once('error', reject);
          socket.bind({ port, address: host }, () => resolve(socket));
        } else {
          const server = net.createServer((socket) => {
            socket.on('error', () => undefined);
            socket.end(`${identity} ${socket.remoteAddress}\n`);
          });
          server.once('error', reject);
          server.listen({ port, host, ipv6Only: host === '::' }, () => resolve(server));
        }
      }),
  );
  return Promise.all(listeners).then((made) => {
    servers.push(...made);
  });
}

function stream({ id, host, port, localPort, intervalMs }) {
  const socket = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
  socket.on('message', (message) => send({ id, event: 'reply', reply: message.toString('utf8').split('\n')[0], at: Date.now() }));
  // An ICMP error for one datagram must not end the stream: the next one may find the new backend.
  socket.on('error', () => undefined);
  return new Promise((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(localPort, () => {
      const timer = setInterval(() => socket.send('hostname\n', port, host, () => undefined), intervalMs);
      streams.set(id, { socket, timer });
      resolve();
    });
  });
}

function stop({ target }) {
  const running = streams.get(target);
  if (running === undefined) return;
  clearInterval(running.timer);
  running.socket.close();
  streams.delete(target);
}

const requests = createInterface({ input: process.stdin });
requests.on('line', async (line) => {
  let request;
  try {
    request = JSON.parse(line);
  } catch {
    return;
  }
  try {
    if (request.op === 'probe') send({ id: request.id, results: await probe(request) });
    else if (request.op === 'serve') send({ id: request.id, ok: true, pid: process.pid, netns, ...(await serve(request)) });
    else if (request.op === 'stream') send({ id: request.id, ok: true, ...(await stream(request)) });
    else if (request.op === 'stop') send({ id: request.id, ok: true, ...stop(request) });
    else send({ id: request.id, error: `unknown op ${request.op}` });
  } catch (error) {
    send({ id: request.id, error: error.message });
  }
});
requests.on('close', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
// A pod deleted under it takes its namespace's name away: the helper must not keep the namespace alive.
if (netns !== '') setInterval(() => existsSync(`/run/netns/${netns}`) || process.exit(0), 1_000).unref();
send({ ready: true, pid: process.pid });
