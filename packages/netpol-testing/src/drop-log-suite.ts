import { readFile } from 'node:fs/promises';
import { Writable } from 'node:stream';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Controller } from '@kube-router/controller';
import type { KubeContext } from '@kube-router/kube';
import { POLICY_DROP_REASON } from '@kube-router/netpol';
import { waitFor } from '@kube-router/testkit';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { NetpolTestBackend } from './backend.js';
import { testPluginContext } from './context.js';
import { addServerAndClients, missingForRealTests, startWorld } from './world.js';
import type { World } from './world.js';

const run = promisify(execFile);
const PROBES = 5;

/** The fields of a core/v1 Event that the suite reads. */
interface PodEvent {
  readonly involvedObject: { readonly kind: string; readonly name: string };
  readonly type: string;
  readonly reason: string;
  readonly count: number;
  readonly message: string;
}

/** One line of the plugin's log, as pino wrote it. */
type LogLine = Record<string, unknown> & { msg: string; level: number };

interface DropLogEnforcer {
  readonly controller: Controller;
  readonly kube: KubeContext;
  readonly lines: LogLine[];
  readonly tools: readonly string[];
  stop(): Promise<void>;
}

/** The tcpdump processes in a network namespace, by pid: the drop log's reader, when it runs. */
async function tcpdumpsIn(netns: string): Promise<number[]> {
  const { stdout } = await run('ip', ['netns', 'pids', netns]);
  const pids = stdout.split('\n').filter(Boolean).map(Number);
  const comms = await Promise.all(pids.map((pid) => readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')));
  return pids.filter((_, index) => comms[index]?.trim() === 'tcpdump');
}

/**
 * --netpol-drop-log against real traffic in a lab node: a policy lets nothing reach web/server, other/client probes
 * it N times, and the drop log (tcpdump on NFLOG group 100 in the node's namespace) writes N lines naming both pods,
 * or the first line and a summary of the rest with the rate limit's window; with the option off, no tcpdump runs and
 * nothing is logged. Each case runs its own controller over the same kernel, its log captured.
 */
export function runNetpolDropLogSuite(backend: NetpolTestBackend): void {
  const missing = missingForRealTests(backend, 'tcpdump');
  describe.skipIf(missing !== undefined)(`netpol-${backend.name} drop log in a lab node${missing ? ` (skipped: ${missing})` : ''}`, () => {
    let world: World;
    let server: { ipv4?: string; ipv6?: string } = {};
    let client: { ipv4?: string; ipv6?: string } = {};
    let enforcer: DropLogEnforcer | undefined;

    /** The backend's plugin with these options, logging into `lines`, synced once over the lab's cluster. */
    const startEnforcer = async (options: Record<string, unknown>): Promise<DropLogEnforcer> => {
      const lines: LogLine[] = [];
      const { ctx, kube } = testPluginContext(world.kubeconfig, world.lab.nodeName);
      const sink = new Writable({
        write(chunk: Buffer, _encoding, done) {
          for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(line) as LogLine);
          done();
        },
      });
      const logger = pino({ level: 'info' }, sink).child({ controller: 'netpol' });
      const plugin = backend.createPlugin();
      const parsed = plugin.options.parse({ enableIpv6: true, syncPeriodMs: 60_000, syncTimeoutMs: 30_000, ...options, netns: world.lab.nodeNetns });
      const controller = await plugin.create({ ...ctx, logger }, parsed);
      await controller.start({ requestSync: () => undefined, signal: new AbortController().signal });
      await kube.informers.start({ cacheSyncTimeoutMs: 20_000 });
      await waitFor('the informers to hold the lab pods and the policy', () => kube.informers.pods().list().length === 3 && kube.informers.networkPolicies().list().length === 1, 10_000);
      const outcome = await controller.runObservedSync('test');
      expect(outcome.ok, outcome.ok ? '' : String(outcome.error)).toBe(true);
      let stopped = false;
      return {
        controller,
        kube,
        lines,
        tools: plugin.tools?.(parsed) ?? [],
        async stop() {
          if (stopped) return;
          stopped = true;
          await controller.stop();
          await kube.informers.stop();
          await kube.events.flush();
        },
      };
    };
    const probeTimes = async (family: 4 | 6) => {
      for (let attempt = 0; attempt < PROBES; attempt++) {
        expect(await world.lab.probe('other/client', 'web/server', 80, 'TCP', { family, timeoutMs: 2_000 })).toBe(false);
      }
    };
    const dropLines = (lines: LogLine[]) => lines.filter((line) => line.msg === 'packet dropped by network policy');
    const summaries = (lines: LogLine[]) => lines.filter((line) => line.suppressed !== undefined);

    beforeAll(async () => {
      world = await startWorld(backend);
      const [serverPod, , otherClient] = await addServerAndClients(world);
      server = serverPod ?? {};
      client = otherClient ?? {};
      // Nothing reaches web/server: every probe is rejected in its ingress chain, and logged there first.
      world.policy('web', 'server-deny-all', { podSelector: { matchLabels: { app: 'server' } }, policyTypes: ['Ingress'] });
    }, 90_000);

    afterEach(async () => {
      await enforcer?.stop();
      enforcer = undefined;
    }, 30_000);

    afterAll(async () => {
      await world?.close();
    }, 60_000);

    it(`logs each of ${PROBES} rejected probes per family with both pods, and records Events on the target pod`, async () => {
      enforcer = await startEnforcer({ dropLog: true, dropLogEvents: true, dropLogIntervalMs: 0 });
      expect(enforcer.tools).toContain('tcpdump');
      await waitFor('the drop log to read NFLOG group 100', () => enforcer!.lines.some((line) => line.msg === 'drop log reading NFLOG group'), 10_000);
      expect(await tcpdumpsIn(world.lab.nodeNetns)).toHaveLength(1);

      const started = performance.now();
      await probeTimes(4);
      await probeTimes(6);
      const lines = enforcer.lines;
      await waitFor(`the drop lines of ${PROBES * 2} probes`, () => new Set(dropLines(lines).map((line) => `${line.family} ${line.srcPort}`)).size >= PROBES * 2, 10_000);
      const logMs = performance.now() - started;
      // Every line is a packet of the probes (no other traffic is rejected), with the pods and the port; each probe is
      // one connection, its own source port. An IPv4 probe is one packet: the reject's ICMP error ends the connect. An
      // IPv6 connect (kernel 6.18) does not end on the error to its first SYN, only on the error to the SYN it sends
      // again a second later: each SYN is a rejected packet and a line of its own.
      const pair = (line: LogLine) => `${line.family} ${line.src} (${line.srcPod}) -> ${line.dst} (${line.dstPod}):${line.port}/${line.protocol}`;
      const connections = new Map<string, Set<unknown>>();
      for (const line of dropLines(lines)) connections.set(pair(line), (connections.get(pair(line)) ?? new Set()).add(line.srcPort));
      expect(Object.fromEntries([...connections].map(([key, ports]) => [key, ports.size]))).toEqual({
        [`ipv4 ${client.ipv4} (other/client) -> ${server.ipv4} (web/server):80/tcp`]: PROBES,
        [`ipv6 ${client.ipv6} (other/client) -> ${server.ipv6} (web/server):80/tcp`]: PROBES,
      });
      const ipv4Lines = dropLines(lines).filter((line) => line.family === 'ipv4');
      expect(ipv4Lines).toHaveLength(PROBES);
      expect(dropLines(lines)[0]).toMatchObject({ level: 30, controller: 'netpol', srcPort: expect.any(Number) });
      console.info(
        `drop log (${backend.name}): ${PROBES * 2} probes (${dropLines(lines).length} rejected packets) logged within ${Math.round(logMs)} ms; a line:\n${JSON.stringify(dropLines(lines)[0])}`,
      );

      await enforcer.stop();
      expect(await tcpdumpsIn(world.lab.nodeNetns)).toEqual([]);
      // One Event per family, its count the drops: the recorder folds repeats of one message.
      const events = (world.api.list('v1', 'Event', 'web') as unknown as PodEvent[]).filter((event) => event.reason === POLICY_DROP_REASON);
      expect(events.map(({ involvedObject, type }) => `${type} ${involvedObject.kind} ${involvedObject.name}`)).toEqual([
        'Warning Pod server',
        'Warning Pod server',
      ]);
      expect(events.reduce((sum, event) => sum + event.count, 0)).toBe(dropLines(lines).length);
      console.info(`drop log (${backend.name}) Events:\n${events.map(({ type, reason, count, message }) => `${type} ${reason} x${count}: ${message}`).join('\n')}`);
      expect(events.map((event) => event.message).sort()).toEqual([
        `network policy dropped TCP from ${client.ipv4} (other/client) to ${server.ipv4} (web/server):80`,
        `network policy dropped TCP from ${client.ipv6} (other/client) to ${server.ipv6} (web/server):80`,
      ]);
    }, 60_000);

    it(`with the rate limit's window, logs the first of ${PROBES} probes and a summary of the rest`, async () => {
      enforcer = await startEnforcer({ dropLog: true, dropLogIntervalMs: 1_000 });
      await waitFor('the drop log to read NFLOG group 100', () => enforcer!.lines.some((line) => line.msg === 'drop log reading NFLOG group'), 10_000);
      await probeTimes(4);
      const lines = enforcer.lines;
      await waitFor('the summary of the window', () => summaries(lines).length > 0, 10_000);
      expect(dropLines(lines)).toHaveLength(1);
      expect(summaries(lines)).toEqual([
        expect.objectContaining({ srcPod: 'other/client', dstPod: 'web/server', port: 80, protocol: 'tcp', suppressed: PROBES - 1, windowMs: 1_000 }),
      ]);
      console.info(`drop log (${backend.name}) summary line:\n${JSON.stringify(summaries(lines)[0])}`);
    }, 60_000);

    it('starts tcpdump again when it dies, says why, and reads on', async () => {
      enforcer = await startEnforcer({ dropLog: true, dropLogIntervalMs: 0 });
      const lines = enforcer.lines;
      const reading = () => lines.filter((line) => line.msg === 'drop log reading NFLOG group').length;
      await waitFor('the drop log to read NFLOG group 100', () => reading() === 1, 10_000);
      const [first] = await tcpdumpsIn(world.lab.nodeNetns);
      expect(first).toBeDefined();
      process.kill(first!, 'SIGKILL');
      const restartMs = await waitFor('tcpdump to be started again', () => reading() === 2, 10_000);
      expect(lines.find((line) => line.msg === 'drop log: tcpdump ended; starting it again')).toMatchObject({
        level: 40,
        reason: expect.stringMatching(/tcpdump -i nflog:100 .*was killed by SIGKILL/),
        restartInMs: expect.any(Number),
      });
      const [second] = await tcpdumpsIn(world.lab.nodeNetns);
      expect(second).toBeDefined();
      expect(second).not.toBe(first);
      // IPv6: the IPv4 pod chain's log rule has spent its burst on the cases before.
      expect(await world.lab.probe('other/client', 'web/server', 80, 'TCP', { family: 6, timeoutMs: 2_000 })).toBe(false);
      await waitFor('a drop line from the new tcpdump', () => dropLines(lines).length > 0, 10_000);
      console.info(`drop log (${backend.name}): tcpdump killed, reading again after ${Math.round(restartMs)} ms`);
    }, 60_000);

    it('runs no tcpdump and logs no drop with the option off', async () => {
      enforcer = await startEnforcer({});
      expect(enforcer.tools).not.toContain('tcpdump');
      await probeTimes(4);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(await tcpdumpsIn(world.lab.nodeNetns)).toEqual([]);
      expect(enforcer.lines.filter((line) => /drop/i.test(line.msg))).toEqual([]);
    }, 60_000);
  });
}
