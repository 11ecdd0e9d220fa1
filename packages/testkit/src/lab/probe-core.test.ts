// The probes the lab's helpers run in network namespaces, here on loopback: what each kind of server makes of them.
import { createServer as createTcpServer, type AddressInfo, type Server } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServingCertificate } from '../apiserver/tls.js';
// @ts-expect-error: plain JavaScript (run by `node` inside namespaces), no declarations.
import { runProbe } from './probe-core.mjs';

type Outcome = { ok: boolean; reply?: string; error?: string; ms: number };
const probe = runProbe as (probe: { host: string; port: number; protocol: 'TCP' | 'UDP'; timeoutMs: number; tls?: boolean }) => Promise<Outcome>;

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

describe('probe-core', () => {
  const servers: Server[] = [];
  let tlsPort: number;
  let silentPort: number;
  let linePort: number;

  beforeAll(async () => {
    // As the embedded API server: TLS with the certificate it serves, saying nothing before the client's request.
    const certificate = await createServingCertificate(['127.0.0.1']);
    const tlsServer = createTlsServer({ key: certificate.key, cert: certificate.cert }, (socket) => socket.on('error', () => undefined));
    const silent = createTcpServer((socket) => socket.on('error', () => undefined));
    const line = createTcpServer((socket) => socket.end('demo/web 127.0.0.1\n'));
    servers.push(tlsServer, silent, line);
    [tlsPort, silentPort, linePort] = await Promise.all([listen(tlsServer), listen(silent), listen(line)]);
  }, 30_000);
  afterAll(() => servers.forEach((server) => server.close()));

  it('answers a TLS probe with the protocol and the certificate of the server that completed the handshake', async () => {
    const outcome = await probe({ protocol: 'TCP', host: '127.0.0.1', port: tlsPort, timeoutMs: 5_000, tls: true });
    expect(outcome).toMatchObject({ ok: true, reply: expect.stringMatching(/^TLS TLSv1\.[23], certificate kube-apiserver$/) });
  });

  it('fails a TLS probe that a plain TCP server accepts: a connection is not a handshake', async () => {
    const outcome = await probe({ protocol: 'TCP', host: '127.0.0.1', port: silentPort, timeoutMs: 1_000, tls: true });
    expect(outcome).toMatchObject({ ok: false, error: 'timeout' });
  });

  it("reads a plain probe's answer line, and fails one to a server that answers nothing", async () => {
    expect(await probe({ protocol: 'TCP', host: '127.0.0.1', port: linePort, timeoutMs: 1_000 })).toMatchObject({ ok: true, reply: 'demo/web 127.0.0.1' });
    expect(await probe({ protocol: 'TCP', host: '127.0.0.1', port: silentPort, timeoutMs: 500 })).toMatchObject({ ok: false, error: 'connected, but no answer' });
  });
});
