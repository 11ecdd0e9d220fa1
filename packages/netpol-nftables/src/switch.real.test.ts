import { createNetpolIptablesPlugin } from '@kube-router/netpol-iptables';
import type { ControllerPlugin } from '@kube-router/controller';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addServerAndClients, missingForRealTests, startWorld } from '@kube-router/netpol-testing';
import type { HarnessEnforcer as TestEnforcer, World } from '@kube-router/netpol-testing';
import { mismatches, probeThroughout } from '@kube-router/testkit/netpol-conformance';
import type { ProbedThroughout } from '@kube-router/testkit/netpol-conformance';
import { nftablesBackend } from './testing/backend.js';

const missing = missingForRealTests(nftablesBackend, 'iptables', 'ip6tables', 'iptables-save', 'ipset');
const iptablesPlugin = createNetpolIptablesPlugin() as ControllerPlugin<unknown>;

/**
 * kube-router's --use-nftables-for-netpol turned on and off again: each backend, once it enforces, removes what the
 * other left, so one enforcer remains, and traffic never sees a moment without one.
 */
describe.skipIf(missing !== undefined)(`switching netpol backends${missing ? ` (skipped: ${missing})` : ''}`, () => {
  let world: World;

  beforeAll(async () => {
    world = await startWorld(nftablesBackend);
    await addServerAndClients(world);
  }, 90_000);

  afterAll(async () => {
    await world?.close();
  }, 60_000);

  const enforcers = async () => {
    const iptables = `${await world.inNode('iptables-save', ['-t', 'filter'])}${await world.inNode('ip6tables-save', ['-t', 'filter'])}`;
    const ipsets = await world.inNode('ipset', ['list', '-n']);
    const tables = await world.inNode('nft', ['list', 'tables']);
    return {
      iptables: /KUBE-ROUTER-FORWARD|KUBE-POD-FW-|KUBE-NWPLCY-/.test(iptables) || /KUBE-(SRC|DST)-/.test(ipsets),
      nftables: /kube-router-filter-ipv[46]/.test(tables),
    };
  };

  it('switches iptables -> nftables -> iptables with one enforcer at the end of each switch and the policy enforced throughout', async () => {
    world.policy('web', 'server-from-web', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ podSelector: {} }] }],
    });
    let running: TestEnforcer | undefined;
    // Stopped and the policy gone whatever happens here, so that the next test starts with neither.
    try {
      running = await world.start({ plugin: iptablesPlugin });
      expect((await running.syncNow()).ok).toBe(true);
      expect(await enforcers()).toEqual({ iptables: true, nftables: false });
      const probes = probeThroughout(world.lab, [
        { from: 'other/client', to: 'web/server', port: 80, family: 4, open: false },
        { from: 'other/client', to: 'web/server', port: 80, family: 6, open: false },
        { from: 'web/client', to: 'web/server', port: 80, family: 4, open: true },
        { from: 'web/client', to: 'web/server', port: 80, family: 6, open: true },
      ]);
      const switchTo = async (plugin?: ControllerPlugin<unknown>) => {
        await new Promise((resolve) => setTimeout(resolve, 300));
        await running?.stop();
        running = await world.start(plugin ? { plugin } : {});
        const outcome = await running.syncNow();
        expect(outcome.ok, String(outcome.error)).toBe(true);
      };
      let seen: ProbedThroughout;
      try {
        await switchTo();
        expect(await enforcers()).toEqual({ iptables: false, nftables: true });
        await switchTo(iptablesPlugin);
        expect(await enforcers()).toEqual({ iptables: true, nftables: false });
        await new Promise((resolve) => setTimeout(resolve, 300));
      } finally {
        seen = await probes.stop();
      }
      expect(seen.rounds).toBeGreaterThan(5);
      expect({ forbiddenOpened: seen.forbiddenOpened, allowedBlocked: seen.allowedBlocked }).toEqual({ forbiddenOpened: 0, allowedBlocked: 0 });
      expect(
        await mismatches(world.lab, [
          { from: 'web/client', to: 'web/server', port: 80, open: true },
          { from: 'other/client', to: 'web/server', port: 80, open: false },
        ]),
      ).toEqual([]);
    } finally {
      await running?.stop();
      world.deletePolicy('web', 'server-from-web');
    }
  }, 60_000);
  it('a switch to nftables that also turns IPv6 off leaves nothing of the iptables backend in either family', async () => {
    world.policy('web', 'server-isolated', { podSelector: { matchLabels: { app: 'server' } }, ingress: [] });
    const iptables = await world.start({ plugin: iptablesPlugin });
    expect((await iptables.syncNow()).ok).toBe(true);
    expect(await world.inNode('ip6tables-save', ['-t', 'filter'])).toContain('KUBE-ROUTER-FORWARD');
    await iptables.stop();
    const nftables = await world.start({ options: { enableIpv6: false } });
    const outcome = await nftables.syncNow();
    expect(outcome.ok, String(outcome.error)).toBe(true);
    // Left in place, the IPv6 rules would go on isolating web/server by a policy about to go.
    expect(await enforcers()).toEqual({ iptables: false, nftables: true });
    expect(await world.inNode('nft', ['list', 'tables'])).not.toContain('kube-router-filter-ipv6');
    world.deletePolicy('web', 'server-isolated');
    expect((await nftables.syncNow()).ok).toBe(true);
    expect(
      await mismatches(world.lab, [
        { from: 'other/client', to: 'web/server', port: 80, open: true },
        { from: 'other/client', to: 'web/server', port: 80, family: 6, open: true },
      ]),
    ).toEqual([]);
    await nftables.stop();
  }, 60_000);
});
