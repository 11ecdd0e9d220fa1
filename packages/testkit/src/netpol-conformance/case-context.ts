import { inspect } from 'node:util';
import type { NetworkPolicySpec } from './policy-spec.js';
import { expect } from 'vitest';
import type { NetpolEnforcer } from './enforcer.js';
import { mismatchesOf, observeReachability } from './matrix.js';
import type { MatrixScope, Observation } from './matrix.js';
import type { IpFamily, PodKey } from './model.js';
import { Reachability } from './reachability.js';
import { renderReachabilityReport } from './report.js';
import type { ConformanceWorld } from './world.js';

export interface CaseContextOptions {
  /** How many times a mismatching matrix is re-synced and re-probed before the case fails. Default 3. */
  checkAttempts?: number;
  /** Per-probe timeout override; default the lab's. */
  probeTimeoutMs?: number;
}

/** What a case sees: the world to change, and a check that syncs the enforcer and compares the matrix. */
export class CaseContext {
  private readonly attempts: number;

  constructor(
    readonly caseName: string,
    readonly world: ConformanceWorld,
    private readonly enforcer: NetpolEnforcer,
    private readonly options: CaseContextOptions = {},
  ) {
    this.attempts = Math.max(1, options.checkAttempts ?? 3);
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
   * from `expected`. A mismatch is re-synced and re-probed (the whole matrix) before it counts, so that an informer
   * that caught up late or a UDP probe that reused a source port of a still-tracked flow does not fail the case; a
   * case that passes only on a later attempt says so on stderr.
   */
  async check(expected: Reachability, scope: MatrixScope = {}): Promise<void> {
    let last: Observation[] = [];
    for (let attempt = 1; attempt <= this.attempts; attempt++) {
      await this.sync();
      last = await observeReachability(this.world.lab, expected, scope, this.options.probeTimeoutMs);
      const mismatches = mismatchesOf(last);
      if (mismatches.length === 0) {
        if (attempt > 1) console.warn(`netpol conformance: "${this.caseName}" matched only on attempt ${attempt}`);
        return;
      }
      if (attempt < this.attempts) await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
    }
    expect.fail(renderReachabilityReport(last, `${this.caseName}: reachability differs after ${this.attempts} syncs`));
  }
}
