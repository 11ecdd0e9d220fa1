/**
 * The controller contract suite. Every plugin package runs it against itself:
 *
 *   runControllerContractSuite({ name: 'lballoc', setup: async () => ({ controller, health, metrics, faults, teardown }) });
 *
 * `faults` lets the suite break the plugin's own dependencies (an API server that answers 500, a kernel tool that
 * hangs) so that the suite sees the plugin's real failure paths, not a stand-in. `plugin` lets it check the plugin's
 * options schema: valid options parse, and an unknown key is refused.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { HealthRegistry } from '@kube-router/healthcheck';
import type { AgentMetrics } from '@kube-router/metrics';
import type { Controller, ControllerPlugin } from './controller.js';
import { SyncTimeoutError } from './sync-controller.js';

export interface ContractFaults {
  /** Makes the next syncs fail (throw or reject) until heal(). */
  fail(): void | Promise<void>;
  /** Makes the next syncs hang (never end on their own) until heal(). */
  hang(): void | Promise<void>;
  heal(): void | Promise<void>;
}

export interface ContractHarness {
  /** Created but not started by the harness; the suite calls start() and runObservedSync() itself. */
  controller: Controller;
  health: HealthRegistry;
  metrics: AgentMetrics;
  faults: ContractFaults;
  teardown(): Promise<void>;
}

export interface ContractSetupContext {
  /**
   * Registers what releases something the setup made (a network namespace, a server): released after the test, last
   * registered first, after the harness's teardown, and also when the setup fails part way, so that a broken setup
   * never leaks what it made before it broke.
   */
  defer(release: () => unknown): void;
}

export interface ContractSuiteOptions {
  name: string;
  /** Returns a fresh controller and its world for every test. */
  setup(context: ContractSetupContext): Promise<ContractHarness>;
  /** How long a hanging sync may take to be cut off (the controller's sync timeout plus slack). Default 10 s. */
  hangBoundMs?: number;
  /**
   * The plugin and a set of options it accepts. The suite checks that these options parse and that each unknown key
   * added to them is refused: a typo such as `range` for `ranges` must fail the assembly, not be dropped silently.
   * Without it the check is listed as a todo.
   */
  plugin?: { plugin: OptionsOf; validOptions: Record<string, unknown> };
}

/** What the options check needs of a plugin. */
type OptionsOf = Pick<ControllerPlugin<unknown>, 'name' | 'options'>;

/** Keys no plugin has: a misspelling of a common option, and a key that names the suite. */
export const UNKNOWN_OPTION_KEYS = ['syncPeriodMS', 'contractSuiteUnknownKey'] as const;

/**
 * The unknown keys (UNKNOWN_OPTION_KEYS) that a plugin's schema accepts next to `validOptions`, or whose refusal does
 * not name the key: empty for a schema that refuses unknown keys clearly (zod: `z.strictObject`).
 */
export function acceptedUnknownOptionKeys(plugin: OptionsOf, validOptions: Record<string, unknown>): string[] {
  return UNKNOWN_OPTION_KEYS.filter((key) => {
    try {
      plugin.options.parse({ ...validOptions, [key]: 1 });
      return true;
    } catch (error) {
      return !String(error instanceof Error ? error.message : error).includes(key);
    }
  });
}

/**
 * @internal What a test's setup deferred, released last first; every release runs, and the first failure is thrown
 * after them all.
 */
export class ReleaseStack {
  #releases: (() => unknown)[] = [];

  defer(release: () => unknown): void {
    this.#releases.push(release);
  }

  async releaseAll(): Promise<void> {
    const releases = this.#releases.splice(0).reverse();
    const failures: unknown[] = [];
    for (const release of releases) await attempt(release, failures);
    throwJoined(failures, 'several deferred releases failed');
  }
}

async function attempt(step: () => unknown, failures: unknown[]): Promise<void> {
  try {
    await step();
  } catch (error) {
    failures.push(error);
  }
}

/** One failure as it is; several joined, none dropped. */
function throwJoined(failures: readonly unknown[], message: string): void {
  if (failures.length === 1) throw failures[0];
  if (failures.length > 1) throw new AggregateError(failures, message);
}

export function runControllerContractSuite(options: ContractSuiteOptions): void {
  describe(`controller contract: ${options.name}`, () => {
    let harness: ContractHarness | undefined;
    const deferred = new ReleaseStack();
    const open = async () => {
      harness = await options.setup({ defer: (release) => deferred.defer(release) });
      await harness.controller.start({ requestSync: () => undefined, signal: new AbortController().signal });
      return harness;
    };
    afterEach(async () => {
      const h = harness;
      harness = undefined;
      // The world is torn down whatever heal or stop say, so a failing harness never leaks namespaces or daemons; what
      // the setup deferred goes even when the setup itself failed. Every step's failure is reported.
      const failures: unknown[] = [];
      if (h) {
        await attempt(async () => {
          await h.faults.heal();
          await h.controller.stop();
        }, failures);
        await attempt(() => h.teardown(), failures);
      }
      await attempt(() => deferred.releaseAll(), failures);
      throwJoined(failures, 'the contract test could not be torn down cleanly');
    });

    const schemaCheck = options.plugin;
    if (schemaCheck) {
      it('accepts its valid options and refuses an unknown option key', () => {
        const { plugin, validOptions } = schemaCheck;
        expect(() => plugin.options.parse(validOptions), 'the valid options the suite was given').not.toThrow();
        expect(acceptedUnknownOptionKeys(plugin, validOptions), `plugin ${plugin.name} must refuse these keys, naming them`).toEqual([]);
      });
    }

    it('beats at both ends of a successful sync and records the success', async () => {
      const { controller, health, metrics } = await open();
      const before = health.status(controller.name)?.beats ?? 0;
      const outcome = await controller.runObservedSync('contract');
      expect(outcome.ok, outcome.ok ? '' : String(outcome.error)).toBe(true);
      expect((health.status(controller.name)?.beats ?? 0) - before).toBeGreaterThanOrEqual(2);
      const success = await sample(metrics, 'kube_router_controller_sync_last_success', controller.name);
      expect(success).toBeGreaterThan(Date.now() / 1000 - 60);
      expect(await sample(metrics, 'kube_router_controller_sync_failures_total', controller.name)).toBe(0);
    });

    it('beats at both ends of a failed sync and stays live', async () => {
      const { controller, health, faults } = await open();
      await faults.fail();
      const before = health.status(controller.name)?.beats ?? 0;
      const outcome = await controller.runObservedSync('contract');
      expect(outcome.ok).toBe(false);
      expect((health.status(controller.name)?.beats ?? 0) - before).toBeGreaterThanOrEqual(2);
      expect(health.livenessChecks().find((c) => c.name === controller.name)?.ok).toBe(true);
    });

    it('creates both metric series on a first sync that fails', async () => {
      const { controller, metrics, faults } = await open();
      await faults.fail();
      await controller.runObservedSync('contract');
      expect(await sample(metrics, 'kube_router_controller_sync_last_success', controller.name)).toBe(0);
      expect(await sample(metrics, 'kube_router_controller_sync_failures_total', controller.name)).toBe(1);
    });

    it('records a thrown error instead of propagating it, and recovers', async () => {
      const { controller, metrics, faults } = await open();
      await faults.fail();
      await expect(controller.runObservedSync('contract')).resolves.toMatchObject({ ok: false });
      await expect(controller.runObservedSync('contract')).resolves.toMatchObject({ ok: false });
      expect(await sample(metrics, 'kube_router_controller_sync_failures_total', controller.name)).toBe(2);
      await faults.heal();
      const outcome = await controller.runObservedSync('contract');
      expect(outcome.ok, outcome.ok ? '' : String(outcome.error)).toBe(true);
      expect(await sample(metrics, 'kube_router_controller_sync_last_success', controller.name)).toBeGreaterThan(0);
    });

    it('bounds a hanging sync by its timeout and records it as a failure', async () => {
      const { controller, metrics, faults } = await open();
      await faults.hang();
      const bound = options.hangBoundMs ?? 10_000;
      const started = performance.now();
      const outcome = await controller.runObservedSync('contract');
      expect(performance.now() - started).toBeLessThan(bound);
      expect(outcome.ok).toBe(false);
      if (!outcome.ok) expect(outcome.error).toBeInstanceOf(SyncTimeoutError);
      expect(await sample(metrics, 'kube_router_controller_sync_failures_total', controller.name)).toBe(1);
      await faults.heal();
    }, (options.hangBoundMs ?? 10_000) * 3);
  });
}

/** The value of one series of the agent's registry, or undefined when the series does not exist. */
export async function sample(metrics: AgentMetrics, name: string, controller: string): Promise<number | undefined> {
  const metric = metrics.registry.getSingleMetric(name);
  if (!metric) return undefined;
  const { values } = await metric.get();
  return values.find((v) => v.labels.controller === controller)?.value;
}
