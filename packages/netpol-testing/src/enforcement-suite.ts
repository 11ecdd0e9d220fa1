import { mismatches } from '@kube-router/testkit/netpol-conformance';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import type { NetpolTestBackend } from './backend.js';
import { policyCases } from './policy-cases.js';
import { repairCases } from './repair-cases.js';
import type { HarnessEnforcer } from './harness.js';
import { addServerAndClients, missingForRealTests, startWorld } from './world.js';
import type { World } from './world.js';
import type { EnforcementContext } from './enforcement-context.js';



/**
 * The backend against the kernel in a lab node netns: real pods (network namespaces) and real TCP traffic through
 * the node. Pods: web/server (ports 80 "http" and 8080 "alt"), web/client, other/client; namespaces labelled with
 * their team. What policies allow (policy-cases) and what the backend does when the kernel is not as it left it, or
 * refuses it (repair-cases).
 */
export function runNetpolEnforcementSuite(backend: NetpolTestBackend): void {
  const missing = missingForRealTests(backend);
  describe.skipIf(missing !== undefined)(`netpol-${backend.name} enforcement in a lab node${missing ? ` (skipped: ${missing})` : ''}`, () => {
    let world: World | undefined;
    let enforcer: HarnessEnforcer | undefined;
    let otherClientIp = '';
    const context: EnforcementContext = {
      backend,
      world: () => defined(world, 'the world'),
      enforcer: () => defined(enforcer, 'the enforcer'),
      otherClientIp: () => otherClientIp,
      async enforce(expectOk = true) {
        const outcome = await context.enforcer().syncNow();
        if (expectOk) expect(outcome.ok, String(outcome.error)).toBe(true);
        return outcome;
      },
      async restart(extra = {}) {
        await enforcer?.stop();
        enforcer = await context.world().start({ scheduler: false, ...extra });
      },
      async expectTraffic(expectations) {
        expect(await mismatches(context.world().lab, expectations)).toEqual([]);
      },
      async enforcePolicies(policies, expectations) {
        for (const [id, spec] of Object.entries(policies)) context.world().policy(...namespaceAndName(id), spec);
        await context.enforce();
        await context.expectTraffic(expectations);
      },
      async removePolicies(...ids) {
        for (const id of ids) context.world().deletePolicy(...namespaceAndName(id));
        await context.enforce();
      },
    };

    beforeAll(async () => {
      world = await startWorld(backend);
      world.labelNamespace('web', { team: 'web' });
      world.labelNamespace('other', { team: 'other' });
      const [, , other] = await addServerAndClients(world, { namedPorts: true });
      otherClientIp = other?.ipv4 ?? '';
      enforcer = await world.start({ scheduler: false });
    }, 90_000);

    afterAll(async () => {
      await world?.close();
    }, 60_000);

    policyCases(context);
    repairCases(context);
  });
}

function defined<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`${what} did not start`);
  return value;
}

function namespaceAndName(id: string): [string, string] {
  const [namespace = '', name = ''] = id.split('/');
  return [namespace, name];
}
