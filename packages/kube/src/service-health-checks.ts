import { createServer, type Server } from 'node:http';
import type { Logger } from 'pino';

/** One healthCheckNodePort to serve: the Service (`namespace/name`) and how many ready endpoints it has on this node. */
export interface HealthCheckPort {
  readonly owner: string;
  readonly port: number;
  readonly localEndpoints: number;
}

/**
 * The healthCheckNodePort servers of externalTrafficPolicy Local LoadBalancers, as kube-proxy and kube-router serve
 * them: 200 while this node has a ready local endpoint, 503 otherwise, so that the load balancer sends traffic only
 * to nodes that can keep the client's address. Shared by both service proxies.
 */
export class HealthCheckServers {
  readonly #servers = new Map<number, { server: Server; state: HealthCheckPort }>();
  readonly #bindAddress: string;
  readonly #logger: Logger;

  constructor(bindAddress: string, logger: Logger) {
    this.#bindAddress = bindAddress;
    this.#logger = logger;
  }

  ports(): number[] {
    return [...this.#servers.keys()];
  }

  /** Starts, updates and stops servers to match; returns the failures by owning Service. */
  async reconcile(wanted: readonly HealthCheckPort[]): Promise<Map<string, Error>> {
    const failures = new Map<string, Error>();
    const byPort = new Map(wanted.map((check) => [check.port, check]));
    for (const [port, entry] of this.#servers) {
      if (byPort.has(port)) continue;
      this.#servers.delete(port);
      await new Promise<void>((resolve) => entry.server.close(() => resolve()));
    }
    for (const check of wanted) {
      const entry = this.#servers.get(check.port);
      if (entry) {
        entry.state = check;
        continue;
      }
      try {
        this.#servers.set(check.port, await this.#listen(check));
      } catch (error) {
        failures.set(check.owner, new Error(`healthCheckNodePort ${check.port}: ${(error as Error).message}`));
      }
    }
    return failures;
  }

  async close(): Promise<void> {
    await this.reconcile([]);
  }

  async #listen(check: HealthCheckPort): Promise<{ server: Server; state: HealthCheckPort }> {
    const entry = { server: undefined as unknown as Server, state: check };
    entry.server = createServer((_request, response) => {
      const [namespace, name] = entry.state.owner.split('/');
      const healthy = entry.state.localEndpoints > 0;
      response.writeHead(healthy ? 200 : 503, { 'content-type': 'application/json', 'x-content-type-options': 'nosniff' });
      response.end(JSON.stringify({ service: { namespace, name }, localEndpoints: entry.state.localEndpoints }));
    });
    await new Promise<void>((resolve, reject) => {
      entry.server.once('error', reject);
      entry.server.listen(check.port, this.#bindAddress, () => {
        entry.server.off('error', reject);
        resolve();
      });
    });
    entry.server.on('error', (error) => this.#logger.warn({ err: error, port: check.port }, 'health check server error'));
    return entry;
  }
}
