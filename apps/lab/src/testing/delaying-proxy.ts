import { connect, createServer, type Socket } from 'node:net';

export interface DelayingProxy {
  /** The port it listens on. */
  readonly port: number;
  /** Connections accepted so far, by the client's address. */
  readonly connectionsFrom: ReadonlyMap<string, number>;
  /** Stops listening and ends every connection it carries. */
  close(): Promise<void>;
}

/**
 * A TCP proxy that holds every chunk `delayMs` in each direction before passing it on: a slow API server (or a slow
 * link to it) where the kernel has no netem. It forwards bytes only, so TLS passes through untouched.
 */
export async function startDelayingProxy(options: { host: string; target: { host: string; port: number }; delayMs: number }): Promise<DelayingProxy> {
  const sockets = new Set<Socket>();
  const connectionsFrom = new Map<string, number>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  // Timers of one duration fire in the order they were set, so every chunk keeps its place; so does the end.
  const forward = (from: Socket, to: Socket) => {
    from.on('data', (chunk) => setTimeout(() => to.writable && to.write(chunk), options.delayMs));
    from.once('end', () => setTimeout(() => to.end(), options.delayMs));
    from.once('close', () => setTimeout(() => to.destroy(), options.delayMs));
    from.on('error', () => undefined);
  };
  const server = createServer((client) => {
    const from = client.remoteAddress ?? 'unknown';
    connectionsFrom.set(from, (connectionsFrom.get(from) ?? 0) + 1);
    const upstream = connect(options.target.port, options.target.host);
    track(client);
    track(upstream);
    forward(client, upstream);
    forward(upstream, client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, options.host, () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the proxy has no TCP address');
  return {
    port: address.port,
    connectionsFrom,
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}
