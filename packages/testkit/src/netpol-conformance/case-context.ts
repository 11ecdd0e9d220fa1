import { inspect } from 'node:util';
import type { NetworkPolicySpec } from './policy-spec.js';
import { expect } from 'vitest';
import type { NetpolEnforcer } from './enforcer.js';
import { mismatchesOf, observeCells, observeReachability } from './matrix.js';
import type { MatrixScope, Observation } from './matrix.js';
import type { IpFamily, PodKey } from './model.js';
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
}

/** What a case sees: the world to change, and a check that syncs the enforcer and compares the matrix. */
export class CaseContext {
  private readonly attempts: number;
  private readonly reprobes: number;

  constructor(
    readonly caseName: string,
    readonly world: ConformanceWorld,
    private readonly enforcer: NetpolEnforcer,
    private readonly options: CaseContextOptions = {},
  ) {
    this.attempts = Math.max(1, options.checkAttempts ?? 3);
    this.reprobes = Math.max(0, options.reprobes ?? 2);
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
        return;
      }
      history.push(`  attempt ${attempt}, after re-probes: ${summarize(mismatches)}`);
      if (attempt < this.attempts) await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
    }
    const report = renderReachabilityReport(last, `${this.caseName}: reachability differs after ${this.attempts} syncs`);
    expect.fail(`${report}\n\nevery round:\n${history.join('\n')}`);
  }
}

function cellKey(o: Observation): string {
  return `${o.family}|${o.from}|${o.to}|${o.port}|${o.protocol}`;
}

function summarize(mismatches: readonly Observation[]): string {
  const shown = mismatches.slice(0, 6).map((o) => `IPv${o.family} ${describeConnection(o)} ${o.observed ? 'allowed' : 'blocked'} (${o.detail})`);
  return `${mismatches.length} differ: ${shown.join('; ')}${mismatches.length > shown.length ? '; ...' : ''}`;
}
