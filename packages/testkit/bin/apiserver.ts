#!/usr/bin/env -S npx tsx --conditions=@kube-router/source
// Runs the embedded API server until SIGINT/SIGTERM, or, started with an IPC channel, until its parent goes.
// Usage: npm run apiserver -w @kube-router/testkit -- --help
import { runApiServerCli } from '../src/apiserver/cli.js';

const server = await runApiServerCli(process.argv.slice(2));
const stop = () => {
  server.close().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
};
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, stop);
// Started by a Node process with an IPC channel (a bench): the server goes when its parent goes, however the parent
// ends, instead of outliving it with its port and its memory.
process.once('disconnect', stop);
