import { Command, InvalidArgumentError } from 'commander';
import { loadManifestFiles } from './seed.js';
import type { ApiServer } from './server.js';
import { startApiServer } from './server.js';

export interface ApiServerCliOptions {
  host: string;
  port: number;
  seed: string[];
  kubeconfig?: string;
  bookmarkIntervalMs: number;
  historyLimit: number;
  /** false with --no-validation. */
  validation: boolean;
}

function positiveInteger(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 0) throw new InvalidArgumentError('must be a non-negative integer');
  return parsed;
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

export function apiServerCommand(): Command {
  return new Command('apiserver')
    .description('Run the embedded Kubernetes API server (plain HTTP, no authentication) for local experiments and kubectl')
    .option('--host <address>', 'address to listen on', '127.0.0.1')
    .option('--port <port>', 'port to listen on (0 picks a free one)', positiveInteger, 8080)
    .option('--seed <file.yaml>', 'multi-document YAML of objects to create at start (repeatable)', collect, [])
    .option('--kubeconfig <path>', 'write a kubeconfig for the server to this path')
    .option('--bookmark-interval-ms <ms>', 'how often watches that allow bookmarks get one', positiveInteger, 1000)
    .option('--history-limit <n>', 'how many changes a watch can resume across', positiveInteger, 1000)
    .option('--no-validation', 'store objects as sent, without checking them against the Kubernetes schemas');
}

/** Parses the arguments, starts the server and returns it; the caller decides when to close it. */
export async function runApiServerCli(argv: readonly string[], log: (line: string) => void = console.log): Promise<ApiServer> {
  const command = apiServerCommand();
  command.parse([...argv], { from: 'user' });
  const options = command.opts<ApiServerCliOptions>();
  const server = await startApiServer({
    host: options.host,
    port: options.port,
    seed: await loadManifestFiles(options.seed),
    bookmarkIntervalMs: options.bookmarkIntervalMs,
    historyLimit: options.historyLimit,
    validation: options.validation,
  });
  log(`embedded Kubernetes API server listening on ${server.url}`);
  if (options.kubeconfig) {
    await server.writeKubeconfig(options.kubeconfig);
    log(`kubeconfig written to ${options.kubeconfig} (kubectl --kubeconfig ${options.kubeconfig} get pods -A)`);
  }
  return server;
}
