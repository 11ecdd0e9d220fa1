import type { mismatches } from '@kube-router/testkit/netpol-conformance';
import type { NetpolTestBackend } from './backend.js';
import type { TestEnforcerOptions } from './enforcer.js';
import type { HarnessEnforcer } from './harness.js';
import type { World } from './world.js';

export type Expectations = Parameters<typeof mismatches>[1];

/** What the cases of the enforcement suite share: one lab node, its pods, and the enforcer of the moment. */
export interface EnforcementContext {
  readonly backend: NetpolTestBackend;
  world(): World;
  enforcer(): HarnessEnforcer;
  /** web/client of namespace other: its IPv4 address. */
  otherClientIp(): string;
  /** One sync now; by default it must succeed. */
  enforce(expectOk?: boolean): Promise<{ ok: boolean; error?: unknown }>;
  /** Stops the enforcer and starts another, with these options (and no loop of its own: syncs are the tests'). */
  restart(extra?: TestEnforcerOptions): Promise<void>;
  /** Probes every expectation at once; fails listing those that came out otherwise. */
  expectTraffic(expectations: Expectations): Promise<void>;
  /** Creates the policies (by `namespace/name`), syncs, and checks the traffic. */
  enforcePolicies(policies: Record<string, unknown>, expectations: Expectations): Promise<void>;
  /** Deletes the policies (by `namespace/name`) and syncs. */
  removePolicies(...ids: string[]): Promise<void>;
}
