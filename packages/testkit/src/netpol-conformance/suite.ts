import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CaseContext } from './case-context.js';
import type { CaseContextOptions, CaseEnforcerControl } from './case-context.js';
import { DEFAULT_CASE_MODES } from './case-mode.js';
import type { CaseMode } from './case-mode.js';
import { CONFORMANCE_CASES } from './cases.js';
import type { NetpolEnforcer, StartEnforcer } from './enforcer.js';
import { worldSkipReason } from './preconditions.js';
import { Reachability } from './reachability.js';
import { ConformanceWorld } from './world.js';

export interface NetpolConformanceFeatures {
  /**
   * The enforcer runs with kube-router's --netpol-default-deny: an address of the node's pod CIDRs whose pod's rules
   * are not programmed yet is rejected; pods no policy selects stay open. Every default-allow case still holds, and
   * the late-pod case expects the unprogrammed pod rejected.
   */
  defaultDeny?: boolean;
  /**
   * The enforcer isolates pods that no policy selects (a stronger option than kube-router's flag). Only the cases
   * written for that mode run: the others assume open unselected pods.
   */
  isolateUnselectedPods?: boolean;
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
  /** The lab's run id, in every namespace and interface name it creates (a prefix of the backend's own). */
  runId?: string;
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
  const mode: CaseMode = options.features?.isolateUnselectedPods
    ? 'isolate-unselected'
    : options.features?.defaultDeny
      ? 'default-deny'
      : 'default-allow';
  const title = `netpol conformance: ${options.name}${skipReason ? ` (skipped: ${skipReason})` : ''}`;

  describe.skipIf(skipReason !== undefined)(title, () => {
    let world: ConformanceWorld | undefined;
    let enforcer: NetpolEnforcer | undefined;
    let current: CaseContext | undefined;
    const explainTally = { checks: 0, pairs: 0 };

    const env = () => {
      if (!world) throw new Error('the world did not start');
      return { kubeconfig: world.kubeconfig, nodeName: world.nodeName, netns: world.nodeNetns };
    };
    // Cases hold this one; a restart swaps the enforcer behind it.
    const facade: NetpolEnforcer = {
      syncNow: () => (enforcer ? enforcer.syncNow() : Promise.reject(new Error('the enforcer did not start'))),
      stop: () => enforcer?.stop() ?? Promise.resolve(),
      explain: async (flow) => enforcer?.explain?.(flow),
    };
    const control: CaseEnforcerControl = {
      mode,
      async restart(whileStopped) {
        await enforcer?.stop();
        enforcer = undefined;
        try {
          await whileStopped();
        } finally {
          enforcer = await options.startEnforcer(env());
        }
      },
    };

    beforeAll(async () => {
      world = await ConformanceWorld.start({
        ...(options.probeTimeoutMs === undefined ? {} : { probeTimeoutMs: options.probeTimeoutMs }),
        ...(options.runId === undefined ? {} : { runId: options.runId }),
      });
      enforcer = await options.startEnforcer(env());
    }, SETUP_TIMEOUT_MS);

    afterAll(async () => {
      if (explainTally.checks > 0) {
        console.info(`netpol conformance: ${options.name}: explain matched the probe on all ${explainTally.pairs} pairs of ${explainTally.checks} checks`);
      }
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
      const baseline = new CaseContext(`back to baseline after "${finished.caseName}"`, world, facade, { ...contextOptions(options), explainTally }, control);
      await baseline.check(new Reachability().expectAll(mode !== 'isolate-unselected'), { ports: [80], protocols: ['TCP'] });
    }, CASE_TIMEOUT_MS);

    // Cases of the other mode, and those `only` leaves out, are not registered at all rather than reported skipped:
    // they do not apply to this backend, nothing is missing.
    const cases = CONFORMANCE_CASES.filter(
      (candidate) =>
        (candidate.modes ?? DEFAULT_CASE_MODES).includes(mode) &&
        (options.only === undefined || options.only.some((part) => candidate.name.includes(part))),
    );
    for (const conformanceCase of cases) {
      it(
        conformanceCase.name,
        async () => {
          expect(world, 'the world did not start').toBeDefined();
          expect(enforcer, 'the enforcer did not start').toBeDefined();
          if (!world || !enforcer) return;
          current = new CaseContext(conformanceCase.name, world, facade, { ...contextOptions(options), explainTally }, control);
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
