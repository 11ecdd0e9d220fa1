// Connectivity probes, run inside a network namespace by pod-agent.mjs, probe-client.mjs and apps/lab's
// netns-client.mjs. Plain JavaScript so that `ip netns exec <netns> node <script>` needs no TypeScript loader.
/* global setTimeout, clearTimeout, setImmediate, performance */
import dgram from 'node:dgram';
import net from 'node:net';
import tls from 'node:tls';

/**
 * @typedef {{ host: string, port: number, protocol: 'TCP' | 'UDP', timeoutMs: number, tls?: boolean }} Probe
 *   tls (TCP): a TLS handshake instead of a line, its completion the answer (reply: the protocol and the certificate's
 *   CN), for a server that says nothing first.
 * @typedef {{ ok: boolean, reply?: string, error?: string, ms: number }} ProbeOutcome
 */

const answerGraceMs = 2_000;

/**
 * A timer that, when it fires, first lets the I/O that is already waiting be handled: after the process was not
 * scheduled for a while, timers run before pending I/O, and an answer that arrived in time would count as late.
 */
function expireAfterPendingIo(timeoutMs, expire) {
  return setTimeout(() => setImmediate(expire), timeoutMs);
}

/** @param {Probe[]} probes @returns {Promise<ProbeOutcome[]>} */
export function runProbes(probes) {
  return Promise.all(probes.map(runProbe));
}

/** @param {Probe} probe @returns {Promise<ProbeOutcome>} */
export function runProbe(probe) {
  if (probe.protocol === 'TCP') return probeTcp(probe);
  if (probe.protocol === 'UDP') return probeUdp(probe);
  return Promise.resolve({ ok: false, error: `unsupported protocol ${probe.protocol}`, ms: 0 });
}

/**
 * Connects and reads the first line the listener answers with. The timeout covers the handshake: a completed
 * handshake proves the path open, so the answer then gets a longer grace, which keeps a listener that a loaded
 * machine schedules late from looking like a dropped connection.
 */
function probeTcp({ host, port, timeoutMs, tls: handshake = false }) {
  const started = performance.now();
  return new Promise((resolve) => {
    let settled = false;
    let received = '';
    // TLS: whoever completes the handshake is a TLS server, which nothing on the way (a NAT, QEMU's user network that
    // accepts the TCP connection itself) can pretend to be. Its certificate is not checked: only that it answered.
    const socket = handshake ? tls.connect({ host, port, rejectUnauthorized: false }) : net.connect({ host, port });
    const finish = (outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ ...outcome, ms: Math.round(performance.now() - started) });
    };
    let connected = false;
    let timer = expireAfterPendingIo(timeoutMs, () => {
      if (!connected) finish({ ok: false, error: 'timeout' });
    });
    if (handshake) {
      socket.once('secureConnect', () => finish({ ok: true, reply: `TLS ${socket.getProtocol()}, certificate ${socket.getPeerCertificate().subject?.CN ?? '(no CN)'}` }));
    }
    socket.once('connect', () => {
      // A TLS handshake has not ended at the TCP connect: its deadline stays the whole probe's.
      if (handshake) return;
      connected = true;
      clearTimeout(timer);
      timer = expireAfterPendingIo(Math.max(timeoutMs, answerGraceMs), () =>
        finish({ ok: false, error: 'connected, but no answer' }),
      );
    });
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => {
      received += chunk;
      if (received.includes('\n')) finish({ ok: true, reply: received.split('\n')[0] });
    });
    socket.on('end', () => finish(received ? { ok: true, reply: received } : { ok: false, error: 'closed without an answer' }));
    socket.on('error', (error) => finish({ ok: false, error: error.code ?? error.message }));
  });
}

/** Sends one datagram on a connected socket (so that an ICMP port unreachable fails fast) and awaits the answer. */
function probeUdp({ host, port, timeoutMs }) {
  const started = performance.now();
  return new Promise((resolve) => {
    let settled = false;
    const socket = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
    const finish = (outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.close();
      resolve({ ...outcome, ms: Math.round(performance.now() - started) });
    };
    const timer = expireAfterPendingIo(timeoutMs, () => finish({ ok: false, error: 'timeout' }));
    socket.on('message', (message) => finish({ ok: true, reply: message.toString('utf8').split('\n')[0] }));
    socket.on('error', (error) => finish({ ok: false, error: error.code ?? error.message }));
    socket.connect(port, host, (error) => {
      // A connect the kernel refused (no route: ENETUNREACH) calls back with its error, and sending would throw.
      if (error) return finish({ ok: false, error: error.code ?? error.message });
      socket.send('probe\n', (sendError) => {
        if (sendError) finish({ ok: false, error: sendError.code ?? sendError.message });
      });
    });
  });
}
