import { randomInt } from 'node:crypto';
import { JoinedSyncError, messageOf } from '@kube-router/controller';
import { mismatches } from '@kube-router/testkit/netpol-conformance';
import type { Expectation } from '@kube-router/testkit/netpol-conformance';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NetpolTestBackend } from './backend.js';
import { startForeignWriterProcess } from './foreign-writer.js';
import type { ForeignWriter, ForeignWriterReport } from './foreign-writer.js';
import type { HarnessEnforcer } from './harness.js';
import { addServerAndClients, missingForRealTests, startWorld } from './world.js';
import type { World } from './world.js';

export interface ConcurrentWriterOptions {
  /** How long the policies churn beside the writer. Default 25 s. */
  churnMs?: number;
}

/** One step of the churn: the policies that exist (by `namespace/name`) and what they let through. */
interface ChurnState {
  readonly policies: readonly string[];
  readonly traffic: readonly Expectation[];
}

/**
 * Issue 35 and kube-router #1918: another tool writes its own sets, chains and tables in the node's namespace as fast
 * as it can while the agent syncs policies that change every sync, so that each sync creates, rewrites and deletes
 * objects of its own while the other tool's change under it. After every sync the agent's objects are exactly what it
 * writes for the same policies on a quiet kernel; a sync that fails names what failed and the retry repairs it; the
 * other tool's commands never fail and its objects stay exactly as it wrote them; traffic follows the policies.
 */
export function runNetpolConcurrentWriterSuite(backend: NetpolTestBackend, writer: ForeignWriter, options: ConcurrentWriterOptions = {}): void {
  const churnMs = options.churnMs ?? 25_000;
  const missing = missingForRealTests(backend, ...writer.tools);
  describe.skipIf(missing !== undefined)(`netpol-${backend.name} beside another writer (${writer.name})${missing ? ` (skipped: ${missing})` : ''}`, () => {
    let world: World;
    let otherClientIp = '';

    beforeAll(async () => {
      world = await startWorld(backend);
      world.labelNamespace('web', { team: 'web' });
      world.labelNamespace('other', { team: 'other' });
      const [, , otherClient] = await addServerAndClients(world);
      otherClientIp = otherClient?.ipv4 ?? '';
    }, 90_000);

    afterAll(async () => {
      await world?.close();
    }, 60_000);

    it("keeps its objects exactly as rendered and never touches the other writer's while both churn", async () => {
      const policies: Record<string, unknown> = {
        'web/server-from-client': {
          podSelector: { matchLabels: { app: 'server' } },
          ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }] }],
        },
        'web/server-from-other': {
          podSelector: { matchLabels: { app: 'server' } },
          ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'other' } } }] }],
        },
        'web/server-from-block': {
          podSelector: { matchLabels: { app: 'server' } },
          ingress: [{ from: [{ ipBlock: { cidr: `${otherClientIp}/32` } }], ports: [{ port: 80, protocol: 'TCP' }] }],
        },
        'web/client-from-server': {
          podSelector: { matchLabels: { app: 'client' } },
          ingress: [{ from: [{ podSelector: { matchLabels: { app: 'server' } } }] }],
        },
      };
      const path = (from: string, to: string, open: boolean, family: 4 | 6 = 4): Expectation => ({ from, to, port: 80, family, open });
      // Each step adds and removes policies, so that every sync writes new sets and chains and deletes others.
      const states: ChurnState[] = [
        {
          policies: ['web/server-from-client'],
          traffic: [path('web/client', 'web/server', true), path('other/client', 'web/server', false), path('other/client', 'web/server', false, 6)],
        },
        {
          policies: ['web/server-from-client', 'web/server-from-other'],
          traffic: [path('web/client', 'web/server', true), path('other/client', 'web/server', true, 6), path('other/client', 'web/client', true)],
        },
        {
          policies: ['web/server-from-block', 'web/client-from-server'],
          traffic: [
            path('web/client', 'web/server', false),
            path('other/client', 'web/server', true),
            path('other/client', 'web/server', false, 6),
            path('other/client', 'web/client', false),
            path('web/server', 'web/client', true),
          ],
        },
        {
          policies: ['web/client-from-server'],
          traffic: [path('web/client', 'web/server', true), path('other/client', 'web/client', false), path('other/client', 'web/client', false, 6)],
        },
      ];
      const netns = world.lab.nodeNetns;
      let applied = new Set<string>();
      const applyState = (state: ChurnState) => {
        for (const id of applied) if (!state.policies.includes(id)) world.deletePolicy(...namespaceAndName(id));
        for (const id of state.policies) if (!applied.has(id)) world.policy(...namespaceAndName(id), policies[id]);
        applied = new Set(state.policies);
      };
      const sync = async (enforcer: HarnessEnforcer, reason: string) => {
        await enforcer.waitForInformers();
        return enforcer.controller.runObservedSync(reason);
      };

      // What the agent writes for each step on a quiet kernel, with nobody else writing: the reference.
      const quiet = await world.start({ scheduler: false });
      const rendered: string[] = [];
      for (const state of states) {
        applyState(state);
        const outcome = await sync(quiet, 'syncNow');
        expect(outcome.ok, outcome.ok ? '' : messageOf(outcome.error)).toBe(true);
        expect(await mismatches(world.lab, state.traffic)).toEqual([]);
        rendered.push(await writer.agentState(netns));
      }
      await quiet.stop();
      // Every step leaves other objects behind: a sync that wrote the wrong step, or nothing, cannot pass for another.
      expect(new Set(rendered).size).toBe(states.length);

      // The writer first, then an agent started beside it, which adopts the last step's objects.
      const seed = Number(process.env.KRT_FOREIGN_WRITER_SEED ?? randomInt(2 ** 31));
      const running = await startForeignWriterProcess(writer, netns, seed);
      let report: ForeignWriterReport | undefined;
      const stopWriter = async () => (report ??= await running.stop());
      try {
        const enforcer = await world.start({ scheduler: false });
        const started = performance.now();
        const figures = { syncs: 0, fullSyncs: 0, failedSyncs: 0, retriesToRecover: 0, writesDuringSyncs: 0 };
        const unnamed: string[] = [];
        const notRecovered: string[] = [];
        const wrongState: string[] = [];
        /** One step synced until it succeeds (at most 3 retries, full syncs as the scheduler's are); false if it never did. */
        const syncStep = async (step: number, first: string): Promise<boolean> => {
          let reason = first;
          for (let attempt = 0; attempt <= 3; attempt++) {
            const writesBefore = running.writes;
            const outcome = await sync(enforcer, reason);
            figures.writesDuringSyncs += running.writes - writesBefore;
            figures.syncs++;
            if (reason !== 'syncNow') figures.fullSyncs++;
            if (outcome.ok) {
              const state = await writer.agentState(netns);
              if (state !== rendered[step]) wrongState.push(`sync ${figures.syncs} (step ${step}, ${reason}):\n${lineDiff(rendered[step] ?? '', state)}`);
              return true;
            }
            figures.failedSyncs++;
            if (attempt > 0) figures.retriesToRecover++;
            // A failure names each object it concerns; anything else would be a failure nobody can act on.
            const failures = outcome.error instanceof JoinedSyncError ? outcome.error.failures : [];
            if (failures.length === 0 || failures.some((failure) => failure.object === '')) unnamed.push(messageOf(outcome.error));
            console.log(`${backend.name} beside ${writer.name}: sync ${figures.syncs} failed (${reason}): ${messageOf(outcome.error)}`);
            reason = 'retry';
          }
          notRecovered.push(`step ${step}`);
          return false;
        };

        // Its first sync is an initial one: it reads the kernel, with the other tool's objects in it, and adopts.
        let step = states.length - 1;
        await syncStep(step, 'initial');
        while (performance.now() - started < churnMs) {
          step = (step + 1) % states.length;
          applyState(states[step] as ChurnState);
          // Every third sync is periodic: it reads back every set and chain while the other tool writes.
          await syncStep(step, figures.syncs % 3 === 2 ? 'periodic' : 'syncNow');
        }
        const churnSeconds = (performance.now() - started) / 1000;
        const churnSyncs = figures.syncs;

        // Traffic after the churn follows each step's policies, with the other tool still writing.
        const trafficWrong: string[] = [];
        for (const [index, state] of states.entries()) {
          applyState(state);
          if (await syncStep(index, 'syncNow')) trafficWrong.push(...(await mismatches(world.lab, state.traffic)).map((wrong) => `step ${index}: ${wrong}`));
        }

        const writerReport = await stopWriter();
        console.log(
          `${backend.name} beside ${writer.name} (seed ${seed}): ${churnSyncs} syncs in ${churnSeconds.toFixed(1)} s of churn, ` +
            `${figures.syncs} with the traffic checks (${figures.fullSyncs} full), ${figures.failedSyncs} failed (${figures.retriesToRecover} retries failed again); ` +
            `the other tool: ${writerReport.writes} writes (${figures.writesDuringSyncs} while a sync ran), ${writerReport.failures.length} failed, ${writerReport.checks} read-backs, ` +
            `${writerReport.differences.length} differences; ${writerReport.commands} commands of its own, ${(writerReport.commandMs / Math.max(1, writerReport.commands)).toFixed(0)} ms each on average`,
        );
        expect(writerReport.failures, 'write commands of the other tool that failed').toEqual([]);
        expect(writerReport.differences, "the other tool's objects found other than it wrote them").toEqual([]);
        expect(writerReport.finalDifferences).toEqual([]);
        expect(unnamed, 'sync failures without the objects they concern').toEqual([]);
        expect(notRecovered, 'steps whose sync failed again on every retry').toEqual([]);
        expect(wrongState, "the agent's objects after a sync, against what it writes on a quiet kernel").toEqual([]);
        expect(trafficWrong).toEqual([]);
        // Enough of both to have raced, on a loaded machine too: syncs every step of the churn went through more than
        // once, and the other tool writing while they ran.
        expect(figures.syncs).toBeGreaterThanOrEqual(2 * states.length);
        expect(figures.writesDuringSyncs).toBeGreaterThanOrEqual(states.length);
      } finally {
        await stopWriter();
      }
    }, churnMs + 60_000);
  });
}

function namespaceAndName(id: string): [string, string] {
  const [namespace = '', name = ''] = id.split('/');
  return [namespace, name];
}

/** The lines only one side has, marked `-` (expected) and `+` (found). */
function lineDiff(expected: string, actual: string): string {
  const left = new Set(expected.split('\n'));
  const right = new Set(actual.split('\n'));
  return [...[...left].filter((line) => !right.has(line)).map((line) => `- ${line}`), ...[...right].filter((line) => !left.has(line)).map((line) => `+ ${line}`)].join('\n');
}
