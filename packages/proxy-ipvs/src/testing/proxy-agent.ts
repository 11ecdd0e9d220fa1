// The proxy as an agent process runs it, for tests that kill it: `node --conditions=@kube-router/source --import tsx
// proxy-agent.ts '<ProxyAgentConfig as JSON>'`, forked by ProxyAgentProcess with an IPC channel. Its kernel commands
// go back over IPC to the test process, which runs them (in the QEMU guest) and answers.
import { SyncScheduler } from '@kube-router/controller';
import type { SyncOutcome } from '@kube-router/healthcheck';
import type { CommandResult, CommandRunner } from '@kube-router/netfilter';
import pino from 'pino';
import { assembleProxy } from './assembly.js';
import { driftCount } from './drift.js';
import { deserializeError, DRIFT_OBJECTS } from './proxy-agent-protocol.js';
import type { FromProxyAgent, ProxyAgentConfig, SyncedMessage, ToProxyAgent } from './proxy-agent-protocol.js';

const channel = process.send?.bind(process);
if (!channel) throw new Error('proxy-agent.ts runs as a child process with an IPC channel (ProxyAgentProcess)');
const send = (message: FromProxyAgent): void => {
  channel(message);
};
// Whoever started it is gone: no orphan keeps programming the kernel.
process.once('disconnect', () => process.exit(1));

const config = JSON.parse(process.argv[2] ?? '') as ProxyAgentConfig;
const logger = pino({ level: config.logLevel ?? 'warn', base: { controller: 'proxy', pid: process.pid } }, pino.destination(2));

const waiting = new Map<number, { resolve: (result: CommandResult) => void; reject: (error: Error) => void }>();
let nextCommand = 1;
const runner: CommandRunner = {
  run: (spec) =>
    new Promise((resolve, reject) => {
      const id = nextCommand++;
      waiting.set(id, { resolve, reject });
      send({ type: 'run', id, spec });
    }),
};

const proxy = await assembleProxy({ kubeconfig: config.kubeconfig, runner, options: config.options, logger });
const stopping = new AbortController();

const report = async (reason: string, outcome: SyncOutcome, id?: number): Promise<void> => {
  const drift: Record<string, number> = {};
  for (const object of DRIFT_OBJECTS) drift[object] = await driftCount(proxy.metrics, object);
  const report = proxy.controller.lastSync();
  const message: SyncedMessage = {
    type: 'synced',
    ...(id !== undefined && { id }),
    reason,
    ok: outcome.ok,
    ...(!outcome.ok && { error: String(outcome.error) }),
    durationMs: Math.round(outcome.durationMs),
    ...(report && { report }),
    drift,
  };
  send(message);
};
const scheduler = new SyncScheduler(proxy.controller, { onSync: (reason, outcome) => void report(reason, outcome) });

process.on('message', (message: ToProxyAgent) => {
  switch (message.type) {
    case 'ran':
    case 'failed': {
      const waiter = waiting.get(message.id);
      waiting.delete(message.id);
      if (message.type === 'ran') waiter?.resolve(message.result);
      else waiter?.reject(deserializeError(message.error));
      break;
    }
    case 'sync':
      void proxy.controller.runObservedSync(message.reason).then((outcome) => report(message.reason, outcome, message.id));
      break;
    case 'stop':
      stopping.abort(new Error('agent stopping'));
      void scheduler
        .stop()
        .then(() => proxy.kube.informers.stop())
        .finally(() => process.exit(0));
      break;
  }
});

// The agent's order (createAgent): start the controller, wait for the informers' caches, then the scheduler's loop
// with its initial sync.
await proxy.controller.start({ requestSync: (reason) => scheduler.requestSync(reason), signal: stopping.signal });
await proxy.kube.informers.start({ cacheSyncTimeoutMs: 30_000 });
proxy.health.restartClocks();
scheduler.start();
send({ type: 'started' });
