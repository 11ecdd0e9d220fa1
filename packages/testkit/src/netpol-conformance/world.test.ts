import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CaseContext } from './case-context.js';
import type { NetpolEnforcer, SyncOutcome } from './enforcer.js';
import { mismatchesOf, observeReachability } from './matrix.js';
import { hasTool, worldSkipReason } from './preconditions.js';
import { Reachability } from './reachability.js';
import { ConformanceWorld } from './world.js';

const run = promisify(execFile);
const skipReason = worldSkipReason();

/** No dataplane at all: the suite's own machinery against the bare lab. */
function bareEnforcer(outcome: () => SyncOutcome = () => ({ ok: true })): NetpolEnforcer & { syncs: number } {
  return {
    syncs: 0,
    async syncNow() {
      this.syncs++;
      return outcome();
    },
    async stop() {},
  };
}

describe.skipIf(skipReason !== undefined)(`netpol conformance world, without an enforcer${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  let world: ConformanceWorld;

  beforeAll(async () => {
    world = await ConformanceWorld.start();
  }, 120_000);

  afterAll(async () => {
    await world?.stop();
  });

  it('runs nine pods serving 80 and 81 on TCP and UDP, under their named ports, dual-stack', () => {
    const pods = world.lab.pods();
    expect(pods.map((pod) => `${pod.namespace}/${pod.name}`).sort()).toEqual(['x/a', 'x/b', 'x/c', 'y/a', 'y/b', 'y/c', 'z/a', 'z/b', 'z/c']);
    for (const pod of pods) {
      expect(pod.ipv4).toBeDefined();
      expect(pod.ipv6).toBeDefined();
      expect(pod.skippedPorts).toEqual([]);
    }
    const stored = world.api.get('v1', 'Pod', 'y', 'b') as unknown as { spec: { containers: { ports: unknown[] }[] } };
    expect(stored.spec.containers[0]?.ports).toEqual(
      expect.arrayContaining([
        { containerPort: 80, protocol: 'TCP', name: 'serve-80-tcp' },
        { containerPort: 81, protocol: 'UDP', name: 'serve-81-udp' },
      ]),
    );
    expect(world.api.get('v1', 'Namespace', undefined, 'z')?.metadata.labels).toEqual({ ns: 'z', 'kubernetes.io/metadata.name': 'z' });
  });

  it('sees every connection open without a policy, on both families, all ports and protocols', async () => {
    const enforcer = bareEnforcer();
    const t = new CaseContext('bare lab', world, enforcer, { checkAttempts: 1 });
    await t.check(new Reachability().expectAllAllowed(), { families: [4, 6] });
    expect(enforcer.syncs).toBe(1);
  });

  it('fails a wrong expectation with both truth tables and the differing probes, after every attempt', async () => {
    const enforcer = bareEnforcer();
    const t = new CaseContext('wrong on purpose', world, enforcer, { checkAttempts: 2 });
    const failure = await t.check(new Reachability().expectAllIngress('x/a', false), { ports: [80], protocols: ['TCP'] }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(Error);
    const message = (failure as Error).message;
    expect(message).toContain('wrong on purpose: reachability differs after 2 syncs');
    expect(message).toContain('IPv4 80/TCP: 8 of 72 probes differ');
    expect(message).toMatch(/^y\/b +X( +\.){3} +- .*\| +y\/b +\.( +\.){3} +- .*\| +y\/b +X /m);
    expect(message).toMatch(/IPv4 y\/b -> x\/a 80\/TCP: expected blocked, observed allowed \(10\.244\.0\.\d+: answered by x\/a in \d+ ms\)/);
    expect(enforcer.syncs).toBe(2);
  });

  it('fails a check at once when syncNow reports a failure, with its error', async () => {
    const enforcer = bareEnforcer(() => ({ ok: false, error: new Error('ipset restore: exit 1') }));
    const t = new CaseContext('broken sync', world, enforcer);
    await expect(t.check(new Reachability())).rejects.toThrow(/broken sync: syncNow\(\) failed: Error: ipset restore: exit 1/);
    expect(enforcer.syncs).toBe(1);
  });

  it.skipIf(!hasTool('iptables'))('sees dropped traffic as blocked (needs iptables): a hand-written DROP in the node netns matches a deny-all-ingress expectation', async () => {
    const target = world.podIp('x/a', 4);
    // Only new connections, as a policy dataplane does: replies to x/a's own connections must pass.
    const rule = ['-d', `${target}/32`, '-m', 'conntrack', '--ctstate', 'NEW', '-j', 'DROP'];
    await run('ip', ['netns', 'exec', world.nodeNetns, 'iptables', '-w', '5', '-I', 'FORWARD', ...rule], { timeout: 10_000 });
    try {
      const t = new CaseContext('hand-written drop', world, bareEnforcer(), { checkAttempts: 1 });
      await t.check(new Reachability().expectAllIngress('x/a', false), { families: [4] });
      // The rule is IPv4 only, so the same pod stays open over IPv6.
      await t.check(new Reachability(), { families: [6], ports: [80] });
    } finally {
      await run('ip', ['netns', 'exec', world.nodeNetns, 'iptables', '-w', '5', '-D', 'FORWARD', ...rule], { timeout: 10_000 });
    }
    const after = await observeReachability(world.lab, new Reachability(), { ports: [80], protocols: ['UDP'] });
    expect(mismatchesOf(after)).toEqual([]);
  });

  it('reset() deletes every policy and puts every label back', async () => {
    world.applyPolicy('y', 'deny', { podSelector: {}, policyTypes: ['Ingress'] });
    world.setPodLabels('z/c', { pod: 'q', extra: 'yes' });
    world.setNamespaceLabels('x', { ns: 'other' });
    world.reset();
    expect(world.api.list('networking.k8s.io/v1', 'NetworkPolicy')).toEqual([]);
    expect(world.api.get('v1', 'Pod', 'z', 'c')?.metadata.labels).toEqual({ pod: 'c' });
    expect(world.api.get('v1', 'Namespace', undefined, 'x')?.metadata.labels).toEqual({ ns: 'x', 'kubernetes.io/metadata.name': 'x' });
  });
});

