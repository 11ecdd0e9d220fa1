#!/usr/bin/env -S npx tsx --conditions=@kube-router/source
// Runs the embedded API server until SIGINT/SIGTERM. Usage: npm run apiserver -w @kube-router/testkit -- --help
import { runApiServerCli } from '../src/apiserver/cli.js';

const server = await runApiServerCli(process.argv.slice(2));
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    server.close().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error(error);
        process.exit(1);
      },
    );
  });
}
