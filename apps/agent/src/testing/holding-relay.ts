import { connect, createServer, type Socket } from 'node:net';

/** One HTTP/1.1 request as a client sent it, whole: head and body. */
export interface RelayedRequest {
  method: string;
  path: string;
  body: Buffer;
  /** The request's bytes exactly as sent (head, framing and body). */
  raw: Buffer;
}

/**
 * A request the relay caught and holds, with whatever its connection sent after it: the network carrying a write
 * that has not reached the server yet.
 */
export interface HeldRequest {
  request: RelayedRequest;
  /**
   * Sends the request, alone, on a new connection to the server, and resolves with the status code of the answer:
   * a request that arrives late, after its sender may have died (a held connection's own upstream may meanwhile have
   * been closed by the server's keep-alive timeout).
   */
  deliverLate(): Promise<number>;
  /** Passes the request on over its own connection, and the connection's traffic after it, as if never held. */
  release(): void;
}

export interface HoldingRelay {
  readonly port: number;
  readonly url: string;
  /** Holds the next request any connection sends that `match` accepts; resolves once it is caught whole. */
  holdNext(match: (request: RelayedRequest) => boolean): Promise<HeldRequest>;
  /** Stops listening and ends every connection it carries. */
  close(): Promise<void>;
}

const HEAD_END = Buffer.from('\r\n\r\n');

/** The length of the first whole request in `buffer`, or undefined while it is incomplete. */
function requestLength(buffer: Buffer): { length: number; method: string; path: string; bodyStart: number; chunked: boolean } | undefined {
  const headEnd = buffer.indexOf(HEAD_END);
  if (headEnd < 0) return undefined;
  const head = buffer.subarray(0, headEnd).toString('latin1');
  const [requestLine = '', ...headerLines] = head.split('\r\n');
  const [method = '', path = ''] = requestLine.split(' ');
  const headers = new Map(headerLines.map((line) => [line.slice(0, line.indexOf(':')).trim().toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
  const bodyStart = headEnd + HEAD_END.length;
  if (/\bchunked\b/i.test(headers.get('transfer-encoding') ?? '')) {
    // Chunks: "<hex size>\r\n<data>\r\n", ending with a zero-size chunk and an empty trailer.
    let offset = bodyStart;
    for (;;) {
      const lineEnd = buffer.indexOf('\r\n', offset, 'latin1');
      if (lineEnd < 0) return undefined;
      const size = Number.parseInt(buffer.subarray(offset, lineEnd).toString('latin1'), 16);
      if (size === 0) {
        const end = buffer.indexOf(HEAD_END, lineEnd, 'latin1');
        return end < 0 ? undefined : { length: end + HEAD_END.length, method, path, bodyStart, chunked: true };
      }
      offset = lineEnd + 2 + size + 2;
      if (offset > buffer.length) return undefined;
    }
  }
  const length = bodyStart + Number(headers.get('content-length') ?? 0);
  return length <= buffer.length ? { length, method, path, bodyStart, chunked: false } : undefined;
}

function dechunk(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let offset = 0;
  for (;;) {
    const lineEnd = body.indexOf('\r\n', offset, 'latin1');
    const size = Number.parseInt(body.subarray(offset, lineEnd).toString('latin1'), 16);
    if (!(size > 0)) return Buffer.concat(parts);
    parts.push(body.subarray(lineEnd + 2, lineEnd + 2 + size));
    offset = lineEnd + 2 + size + 2;
  }
}

/**
 * A relay between API clients and a plain-HTTP API server that can hold one request in flight: the client has sent
 * it, the server has not received it. Requests are passed on whole (HTTP/1.1 framing: Content-Length or chunked);
 * answers flow back untouched. A test points an agent's kubeconfig at it to delay one chosen write for as long as it
 * likes, which no in-process hook can do to a real agent process.
 */
export async function startHoldingRelay(target: { host: string; port: number }): Promise<HoldingRelay> {
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.once('close', () => sockets.delete(socket));
  };
  let pending: { match: (request: RelayedRequest) => boolean; caught: (held: HeldRequest) => void } | undefined;

  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    track(client);
    track(upstream);
    upstream.pipe(client);
    upstream.once('close', () => client.destroy());
    let buffered = Buffer.alloc(0);
    let holding = false;
    client.once('close', () => {
      // A held connection's request may still be delivered late on a connection of its own.
      upstream.destroy();
    });
    const forward = () => {
      while (!holding) {
        const frame = requestLength(buffered);
        if (!frame) return;
        const raw = buffered.subarray(0, frame.length);
        buffered = buffered.subarray(frame.length);
        const bodyBytes = raw.subarray(frame.bodyStart);
        const request: RelayedRequest = { method: frame.method, path: frame.path, body: frame.chunked ? dechunk(bodyBytes) : bodyBytes, raw };
        const wanted = pending;
        if (wanted && wanted.match(request)) {
          pending = undefined;
          holding = true;
          wanted.caught({
            request,
            deliverLate: () => deliverAlone(target, raw, track),
            release: () => {
              holding = false;
              upstream.write(raw);
              forward();
            },
          });
          return;
        }
        upstream.write(raw);
      }
    };
    client.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      forward();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the relay has no TCP address');
  return {
    port: address.port,
    url: `http://127.0.0.1:${address.port}`,
    holdNext(match) {
      if (pending) throw new Error('the relay already waits for a request to hold');
      return new Promise((caught) => (pending = { match, caught }));
    },
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}

/** Sends one request's bytes on a fresh connection and resolves with the answer's status code. */
function deliverAlone(target: { host: string; port: number }, raw: Buffer, track: (socket: Socket) => void): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(target.port, target.host, () => socket.write(raw));
    track(socket);
    let answer = '';
    socket.on('data', (chunk: Buffer) => {
      answer += chunk.toString('latin1');
      const status = /^HTTP\/1\.[01] (\d{3}) /.exec(answer);
      if (status) {
        socket.destroy();
        resolve(Number(status[1]));
      }
    });
    socket.once('error', reject);
    socket.once('close', () => reject(new Error(`the server closed the connection without an answer: ${JSON.stringify(answer.slice(0, 200))}`)));
  });
}
