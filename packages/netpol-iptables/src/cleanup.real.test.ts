import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecRunner } from '@kube-router/netfilter';
import { createNetpolIptablesPlugin } from './plugin.js';
import { missingForRealTests, startWorld } from './testing/world.js';
import type { World } from './testing/world.js';

const missing = missingForRealTests();

describe.skipIf(missing !== undefined)(`cleanup (--cleanup-config)${missing ? ` (skipped: ${missing})` : ''}`, () => {
  let world: World;

  beforeAll(async () => {
    world = await startWorld();
    await world.lab.addPod({ namespace: 'web', name: 'server', labels: { app: 'server' }, ports: [{ port: 80 }] });
  }, 90_000);

  afterAll(async () => {
    await world?.close();
  }, 60_000);

  it('removes our jumps, chains and ipsets (default deny included) and nothing of anyone else', async () => {
    await world.inNode('iptables', ['-N', 'FOREIGN-TOOL']);
    await world.inNode('iptables', ['-A', 'FORWARD', '-j', 'FOREIGN-TOOL']);
    await world.inNode('ipset', ['create', 'foreign-set', 'hash:ip']);
    world.policy('web', 'deny', { podSelector: {}, policyTypes: ['Ingress'] });
    const enforcer = await world.start({ options: { defaultDeny: true } });
    const outcome = await enforcer.syncNow();
    expect(outcome.ok, String(outcome.error)).toBe(true);
    await enforcer.stop();
    expect(await world.inNode('iptables-save', [])).toContain('KUBE-NWPLCY-TAIL');
    expect(await world.inNode('ipset', ['list', '-n'])).toContain('kube-router-local-pods');

    const plugin = createNetpolIptablesPlugin({ runner: new ExecRunner({}) });
    const options = plugin.options.parse({ netns: world.lab.nodeNetns });
    const ctx = { nodeName: world.lab.nodeName, logger: pino({ level: 'silent' }) };
    await plugin.cleanup?.(ctx, options);
    for (const tool of ['iptables-save', 'ip6tables-save']) {
      const save = await world.inNode(tool, []);
      expect(save).not.toMatch(/KUBE-ROUTER-|KUBE-POD-FW-|KUBE-NWPLCY-/);
    }
    expect(await world.inNode('iptables-save', [])).toContain('-A FORWARD -j FOREIGN-TOOL');
    const sets = await world.inNode('ipset', ['list', '-n']);
    expect(sets).not.toMatch(/KUBE-|kube-router-local-pods/);
    expect(sets).toContain('foreign-set');
    // A second run has nothing to remove and succeeds.
    await plugin.cleanup?.(ctx, options);
  }, 60_000);
});
