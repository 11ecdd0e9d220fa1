import { inspect } from 'node:util';
import type { NetworkPolicySpec } from './policy-spec.js';
import { expect } from 'vitest';
import type { NetpolEnforcer } from './enforcer.js';
import { mismatchesOf, observeCells, observeReachability } from './matrix.js';
import type { MatrixScope, Observation } from './matrix.js';
import { containerPorts } from './model.js';
import type { IpFamily, PodKey } from './model.js';
import type { CaseMode } from './case-mode.js';
import { describeConnection, Reachability } from './reachability.js';
import { renderReachabilityReport } from './report.js';
import type { ConformanceWorld } from './world.js';

export interface CaseContextOptions {
  /** How many times a mismatching matrix is re-synced and re-probed before the case fails. Default 3. */
  checkAttempts?: number;
  /** How many times the differing cells are probed again, alone, before a re-sync. Default 2. */
  reprobes?: number;
  /** Per-probe timeout override; default the lab's. */
  probeTimeoutMs?: number;
  /** Counts what the enforcer's explain was compared with, across cases (for the suite's summary). */
  explainTally?: ExplainTally;
}

/** How many checks and probed pairs the enforcer's explain verdicts were compared with. */
export interface ExplainTally {
  checks: number;
  pairs: number;
}

/** What the suite lets a case do with the enforcer beyond syncing it. */
export interface CaseEnforcerControl {
  /** The mode the suite runs the backend in. Default `default-allow`. */
  mode?: CaseMode;
  /** Stops the enforcer (its rules stay), runs `whileStopped`, then starts a new one for the same world. */
  restart?(whileStopped: () => Promise<void>): Promise<void>;
}

/** What probing the late pod saw: to and from it on 80/TCP in both families, and between two programmed pods. */
export interface LatePodProbe {
  late: boolean[];
  programmed: boolean[];
  detail: string;
}

/** What a case sees: the world to change, and a check that syncs the enforcer and compares the matrix. */
export class CaseContext {
  private readonly attempts: number;
  private readonly reprobes: number;
  readonly mode: CaseMode;

  constructor(
    readonly caseName: string,
    readonly world: ConformanceWorld,
    private readonly enforcer: NetpolEnforcer,
    private readonly options: CaseContextOptions = {},
    private readonly control: CaseEnforcerControl = {},
  ) {
    this.attempts = Math.max(1, options.checkAttempts ?? 3);
    this.reprobes = Math.max(0, options.reprobes ?? 2);
    this.mode = control.mode ?? 'default-allow';
  }

  /**
   * A pod whose rules arrive late: the enforcer is stopped, the pod `namespace/name` starts (an address of the node's
   * pod CIDRs that no rule knows), `body` probes it and returns what to check once a new enforcer has started and
   * synced. The pod is deleted afterwards, also on failure.
   */
  async withLatePod(
    namespace: string,
    name: string,
    body: (probe: () => Promise<LatePodProbe>) => Promise<() => Promise<void>>,
  ): Promise<void> {
    const restart = this.control.restart;
    if (!restart) {
      expect.fail(`${this.caseName}: the suite cannot restart this enforcer`);
      return;
    }
    const lab = this.world.lab;
    const late = `${namespace}/${name}`;
    const probe = async (): Promise<LatePodProbe> => {
      const timeoutMs = this.options.probeTimeoutMs ?? 500;
      const lateRequests = ([4, 6] as const).flatMap((family) => [
        { from: 'x/a', to: late, port: 80, family, timeoutMs },
        { from: late, to: 'x/a', port: 80, family, timeoutMs },
      ]);
      const programmedRequests = ([4, 6] as const).map((family) => ({ from: 'x/b', to: 'x/a', port: 80, family, timeoutMs }));
      const results = await lab.probeMany([...lateRequests, ...programmedRequests]);
      const detail = results
        .map((r) => `IPv${r.request.family} ${String(r.request.from)} -> ${String(r.request.to)}: ${r.ok ? 'open' : `blocked (${r.error ?? ''})`}`)
        .join('; ');
      return {
        late: results.slice(0, lateRequests.length).map((r) => r.ok),
        programmed: results.slice(lateRequests.length).map((r) => r.ok),
        detail,
      };
    };
    let after: (() => Promise<void>) | undefined;
    try {
      await restart(async () => {
        await lab.addPod({ namespace, name, labels: { pod: name }, ports: containerPorts() });
        after = await body(probe);
      });
      await this.sync();
      await after?.();
    } finally {
      await lab.deletePod(late);
      await this.sync();
    }
  }

  /** A fresh expectation: everything allowed. */
  reachability(): Reachability {
    return new Reachability();
  }

  /** Creates or replaces a NetworkPolicy. */
  policy(namespace: string, name: string, spec: NetworkPolicySpec): void {
    this.world.applyPolicy(namespace, name, spec);
  }

  deletePolicy(namespace: string, name: string): void {
    this.world.deletePolicy(namespace, name);
  }

  setPodLabels(key: PodKey, labels: Record<string, string>): void {
    this.world.setPodLabels(key, labels);
  }

  setNamespaceLabels(namespace: string, labels: Record<string, string>): void {
    this.world.setNamespaceLabels(namespace, labels);
  }

  /** `ip/32` or `ip/128` of a pod. */
  podHostCidr(key: PodKey, family: IpFamily = 4): string {
    return `${this.world.podIp(key, family)}/${family === 4 ? 32 : 128}`;
  }

  podCidr(family: IpFamily = 4): string {
    return this.world.podCidr(family);
  }

  async sync(): Promise<void> {
    const outcome = await this.enforcer.syncNow();
    if (!outcome.ok) expect.fail(`${this.caseName}: syncNow() failed: ${inspect(outcome.error, { depth: 6 })}`);
  }

  /**
   * Syncs the enforcer, probes every pair of pods in `scope` and fails with both truth tables when they differ
   * from `expected`.
   *
   * Two kinds of retry keep a loaded machine from failing a correct backend, and both say so on stderr when they
   * were needed. A differing cell is probed again on its own (up to `reprobes` times): a UDP answer that came after
   * the timeout, or a UDP probe that reused the source port of a flow conntrack still tracks, does not repeat. When
   * cells still differ, the enforcer is synced again and the whole matrix re-probed (up to `checkAttempts` rounds):
   * an informer that caught up late shows up here. A real enforcer bug differs every time and fails the case.
   */
  async check(expected: Reachability, scope: MatrixScope = {}): Promise<void> {
    const lab = this.world.lab;
    const timeoutMs = this.options.probeTimeoutMs;
    const history: string[] = [];
    let last: Observation[] = [];
    for (let attempt = 1; attempt <= this.attempts; attempt++) {
      await this.sync();
      last = await observeReachability(lab, expected, scope, timeoutMs);
      for (let reprobe = 1; reprobe <= this.reprobes && mismatchesOf(last).length > 0; reprobe++) {
        const differing = mismatchesOf(last);
        history.push(`  attempt ${attempt}${reprobe > 1 ? `, re-probe ${reprobe - 1}` : ''}: ${summarize(differing)}`);
        const again = new Map((await observeCells(lab, expected, differing, timeoutMs)).map((o) => [cellKey(o), o]));
        last = last.map((o) => again.get(cellKey(o)) ?? o);
      }
      const mismatches = mismatchesOf(last);
      if (mismatches.length === 0) {
        if (history.length > 0) {
          console.warn(`netpol conformance: "${this.caseName}" matched only after retrying:\n${history.join('\n')}`);
        }
        await this.compareExplain(last);
        return;
      }
      history.push(`  attempt ${attempt}, after re-probes: ${summarize(mismatches)}`);
      if (attempt < this.attempts) await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
    }
    const report = renderReachabilityReport(last, `${this.caseName}: reachability differs after ${this.attempts} syncs`);
    expect.fail(`${report}\n\nevery round:\n${history.join('\n')}`);
  }

  /**
   * When the enforcer explains, its verdict on every probed pair must be what the probe saw: explain answers from the
   * rules it last applied, the same the probes just went through. Fails the case naming every pair that differs.
   */
  private async compareExplain(observations: readonly Observation[]): Promise<void> {
    if (!this.enforcer.explain) return;
    const differing: string[] = [];
    let compared = 0;
    for (const o of observations) {
      const flow = { source: this.world.podIp(o.from, o.family), destination: this.world.podIp(o.to, o.family), port: o.port, protocol: o.protocol };
      const verdict = await this.enforcer.explain(flow);
      if (verdict === undefined) return;
      compared++;
      if (verdict.allowed !== o.observed) {
        differing.push(`IPv${o.family} ${describeConnection(o)}: probe ${o.observed ? 'allowed' : 'blocked'}, explain ${verdict.allowed ? 'allowed' : 'denied'} (${verdict.detail})`);
      }
    }
    const tally = this.options.explainTally;
    if (tally) {
      tally.checks++;
      tally.pairs += compared;
    }
    if (differing.length > 0) {
      expect.fail(`${this.caseName}: explain differs from the probe on ${differing.length} of ${compared} pairs:\n  ${differing.join('\n  ')}`);
    }
  }
}

function cellKey(o: Observation): string {
  return `${o.family}|${o.from}|${o.to}|${o.port}|${o.protocol}`;
}

function summarize(mismatches: readonly Observation[]): string {
  const shown = mismatches.slice(0, 6).map((o) => `IPv${o.family} ${describeConnection(o)} ${o.observed ? 'allowed' : 'blocked'} (${o.detail})`);
  return `${mismatches.length} differ: ${shown.join('; ')}${mismatches.length > shown.length ? '; ...' : ''}`;
}
