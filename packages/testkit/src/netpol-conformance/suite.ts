import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CaseContext } from './case-context.js';
import type { CaseContextOptions } from './case-context.js';
import { CONFORMANCE_CASES } from './cases.js';
import type { CaseMode } from './cases.js';
import type { NetpolEnforcer, StartEnforcer } from './enforcer.js';
import { worldSkipReason } from './preconditions.js';
import { Reachability } from './reachability.js';
import { ConformanceWorld } from './world.js';

export interface NetpolConformanceFeatures {
  /**
   * The enforcer runs with a default-deny option: pods that no policy selects are isolated. Off by default, as in
   * Kubernetes. When on, the suite runs only the cases that hold in that mode (the default-allow ones assume open
   * unselected pods).
   */
  defaultDeny?: boolean;
}

export interface NetpolConformanceOptions {
  /** The backend's name, in the suite's title. */
  name: string;
  /** Starts the backend for the suite's world; called once, after the pods run. */
  startEnforcer: StartEnforcer;
  features?: NetpolConformanceFeatures;
  /** A reason to skip the whole suite (a tool the backend needs is missing), shown in the title. */
  skip?: string;
  /** How long a probe waits before it counts as blocked. Default 500 ms. */
  probeTimeoutMs?: number;
  /** How many syncs and probes a mismatching matrix gets before the case fails. Default 3. */
  checkAttempts?: number;
  /** How many times differing cells are probed again, alone, before a re-sync. Default 2. */
  reprobes?: number;
  /** Only the cases whose name contains one of these (for debugging a backend). */
  only?: readonly string[];
}

const SETUP_TIMEOUT_MS = 120_000;
const CASE_TIMEOUT_MS = 60_000;

/**
 * The backend-neutral NetworkPolicy conformance suite: registers a vitest `describe` with one test per case. The
 * world (API server, lab node, nine pods) and the enforcer start once, in beforeAll; after each case every policy
 * is deleted, every label restored, the enforcer synced and the open baseline checked on 80/TCP.
 */
export function runNetpolConformanceSuite(options: NetpolConformanceOptions): void {
  const skipReason = options.skip ?? worldSkipReason();
  const mode: CaseMode = options.features?.defaultDeny ? 'default-deny' : 'default-allow';
  const title = `netpol conformance: ${options.name}${skipReason ? ` (skipped: ${skipReason})` : ''}`;

  describe.skipIf(skipReason !== undefined)(title, () => {
    let world: ConformanceWorld | undefined;
    let enforcer: NetpolEnforcer | undefined;
    let current: CaseContext | undefined;

    beforeAll(async () => {
      world = await ConformanceWorld.start(options.probeTimeoutMs === undefined ? {} : { probeTimeoutMs: options.probeTimeoutMs });
      enforcer = await options.startEnforcer({ kubeconfig: world.kubeconfig, nodeName: world.nodeName, netns: world.nodeNetns });
    }, SETUP_TIMEOUT_MS);

    afterAll(async () => {
      const errors: unknown[] = [];
      await enforcer?.stop().catch((error: unknown) => errors.push(error));
      await world?.stop().catch((error: unknown) => errors.push(error));
      if (errors.length > 0) throw new AggregateError(errors, 'netpol conformance teardown failed');
    }, SETUP_TIMEOUT_MS);

    afterEach(async () => {
      const finished = current;
      current = undefined;
      if (!world || !enforcer || !finished) return;
      world.reset();
      const baseline = new CaseContext(`back to baseline after "${finished.caseName}"`, world, enforcer, contextOptions(options));
      await baseline.check(new Reachability().expectAll(mode === 'default-allow'), { ports: [80], protocols: ['TCP'] });
    }, CASE_TIMEOUT_MS);

    // Cases of the other mode, and those `only` leaves out, are not registered at all rather than reported skipped:
    // they do not apply to this backend, nothing is missing.
    const cases = CONFORMANCE_CASES.filter(
      (candidate) =>
        (candidate.mode ?? 'default-allow') === mode &&
        (options.only === undefined || options.only.some((part) => candidate.name.includes(part))),
    );
    for (const conformanceCase of cases) {
      it(
        conformanceCase.name,
        async () => {
          expect(world, 'the world did not start').toBeDefined();
          expect(enforcer, 'the enforcer did not start').toBeDefined();
          if (!world || !enforcer) return;
          current = new CaseContext(conformanceCase.name, world, enforcer, contextOptions(options));
          await conformanceCase.run(current);
        },
        CASE_TIMEOUT_MS,
      );
    }
  });
}

function contextOptions(options: NetpolConformanceOptions): CaseContextOptions {
  return {
    ...(options.reprobes === undefined ? {} : { reprobes: options.reprobes }),
    ...(options.checkAttempts === undefined ? {} : { checkAttempts: options.checkAttempts }),
    ...(options.probeTimeoutMs === undefined ? {} : { probeTimeoutMs: options.probeTimeoutMs }),
  };
}
