import { describe, expect, it } from 'vitest';
import { PLUGIN_CONTRACT_VERSION } from '@kube-router/controller';
import { lballocPlugin } from '@kube-router/lballoc';
import { netpolIptablesPlugin } from '@kube-router/netpol-iptables';
import { netpolNftablesPlugin } from '@kube-router/netpol-nftables';
import { proxyIpvsPlugin } from '@kube-router/proxy-ipvs';
import { routeSyncPlugin } from '@kube-router/route-sync';
import { routingBgpPlugin } from '@kube-router/routing-bgp';
import { z } from 'zod';
import { createAgent } from './agent.js';
import { AssemblyError, orderAssembly, type PluginEntry } from './assembly.js';
import { testPlugin } from './testing/test-plugins.js';
import { captureLogs } from './testing/support.js';

const entry = (name: string, requires?: string[], options?: unknown): PluginEntry => ({
  plugin: testPlugin({ name, ...(requires && { requires }) }),
  ...(options !== undefined && { options }),
});

async function assemblyError(plugins: PluginEntry[], options: Record<string, unknown> = {}): Promise<AssemblyError> {
  const error = await createAgent({
    plugins,
    options: { nodeName: 'n', collectDefaultMetrics: false, ...options },
    logger: captureLogs().logger,
  }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AssemblyError);
  return error as AssemblyError;
}

describe('orderAssembly', () => {
  it('puts every plugin after what it requires and keeps the given order otherwise', () => {
    const ordered = orderAssembly([entry('c', ['b']), entry('a'), entry('b', ['a']), entry('d')]);
    expect(ordered.map((e) => e.plugin.name)).toEqual(['a', 'b', 'c', 'd']);
  });

  it('accepts a diamond', () => {
    const ordered = orderAssembly([entry('top', ['left', 'right']), entry('left', ['base']), entry('right', ['base']), entry('base')]);
    expect(ordered.map((e) => e.plugin.name)).toEqual(['base', 'left', 'right', 'top']);
  });
});

describe('createAgent refuses a bad assembly with a clear message', () => {
  it('names an unknown requirement and what the assembly has', async () => {
    const error = await assemblyError([entry('routing-bgp', ['route-sync']), entry('netpol')]);
    expect(error.message).toBe(
      'invalid plugin assembly: plugin routing-bgp requires route-sync, which is not in the assembly (have: routing-bgp, netpol)',
    );
  });

  it('names a duplicate plugin', async () => {
    const error = await assemblyError([entry('proxy'), entry('proxy')]);
    expect(error.problems).toEqual(['plugin proxy is in the assembly twice']);
  });

  it('names a requirement cycle with its path', async () => {
    const error = await assemblyError([entry('a', ['b']), entry('b', ['c']), entry('c', ['a']), entry('d')]);
    expect(error.problems).toEqual(['requirement cycle: a -> b -> c -> a']);
  });

  it('names a plugin that requires itself', async () => {
    const error = await assemblyError([entry('a', ['a'])]);
    expect(error.problems).toEqual(['plugin a requires itself']);
  });

  it('names the plugin and the field of bad options, for every plugin at once', async () => {
    const error = await assemblyError([
      entry('firewall', undefined, { syncPeriodMs: -5 }),
      entry('proxy', undefined, { label: 42, syncPeriodMs: 'soon' }),
    ]);
    expect(error.problems).toHaveLength(3);
    expect(error.problems[0]).toMatch(/^plugin firewall: bad option syncPeriodMs: .*>0/);
    expect(error.problems[1]).toMatch(/^plugin proxy: bad option syncPeriodMs: .*number/);
    expect(error.problems[2]).toMatch(/^plugin proxy: bad option label: .*string/);
    expect(error.message.split('\n')[0]).toBe('invalid plugin assembly:');
  });

  it('reports every problem at once: a missing requirement does not hide bad options', async () => {
    const error = await assemblyError(
      [
        entry('routing-bgp', ['route-sync'], { syncPeriodMs: 0 }),
        entry('netpol', undefined, { label: 7 }),
        entry('netpol'),
        entry('a', ['b']),
        entry('b', ['a']),
      ],
      { health: { addr: '127.0.0.1', port: 20244 }, metrics: { addr: '0.0.0.0', port: 20244 } },
    );
    expect(error.problems).toHaveLength(6);
    expect(error.problems.slice(0, 4)).toEqual([
      'plugin netpol is in the assembly twice',
      'plugin routing-bgp requires route-sync, which is not in the assembly (have: routing-bgp, netpol, a, b)',
      'requirement cycle: a -> b -> a',
      'health and metrics share port 20244 but listen on different addresses (127.0.0.1, 0.0.0.0)',
    ]);
    expect(error.problems[4]).toMatch(/^plugin routing-bgp: bad option syncPeriodMs: /);
    expect(error.problems[5]).toMatch(/^plugin netpol: bad option label: /);
  });

  it('parses the options of every well-formed plugin next to a malformed one', async () => {
    const error = await assemblyError([
      { plugin: { name: 'half', host: '*' } as never },
      entry('firewall', undefined, { syncPeriodMs: 'soon' }),
    ]);
    expect(error.problems).toHaveLength(3);
    expect(error.problems[2]).toMatch(/^plugin firewall: bad option syncPeriodMs: /);
  });

  it('names an unknown option key of a plugin whose schema is strict', async () => {
    const strict = { ...testPlugin({ name: 'lballoc' }), options: z.strictObject({ ranges: z.array(z.string()) }) };
    const error = await assemblyError([{ plugin: strict as never, options: { range: ['10.0.0.0/24'], ranges: [] } }]);
    expect(error.problems).toHaveLength(1);
    expect(error.problems[0]).toMatch(/^plugin lballoc: bad option \(options\): .*range/);
  });

  it('refuses invalid names and objects that are no plugins', async () => {
    const error = await assemblyError([
      entry('Bad Name'),
      { plugin: { name: 'half', host: '*' } as never },
    ]);
    expect(error.problems).toEqual([
      'plugin Bad Name has an invalid name "Bad Name" (lowercase letters, digits, \'.\', \'_\', \'-\')',
      'plugin half has no create function',
      'plugin half has no options schema with a parse method',
    ]);
  });

  it("accepts every built-in plugin under this agent's plugin contract", () => {
    const plugins = [netpolIptablesPlugin, netpolNftablesPlugin, proxyIpvsPlugin, routeSyncPlugin, routingBgpPlugin, lballocPlugin];
    const problems = plugins.flatMap((plugin) => {
      try {
        orderAssembly([{ plugin: { ...plugin, name: `${plugin.name}-check`, requires: [] } as never }]);
        return [];
      } catch (error) {
        return (error as AssemblyError).problems;
      }
    });
    expect(problems).toEqual([]);
  });

  it('refuses a plugin whose host range excludes this agent\'s plugin contract, or that has none', async () => {
    const future = { ...testPlugin({ name: 'future' }), host: '^99.0.0' };
    const unnamed = { ...testPlugin({ name: 'unranged' }), host: 'soon' };
    const error = await assemblyError([{ plugin: future as never }, { plugin: unnamed as never }, entry('netpol')]);
    expect(error.problems).toEqual([
      `plugin future needs the plugin contract ^99.0.0, and this agent offers ${PLUGIN_CONTRACT_VERSION}`,
      `plugin unranged has no valid host range "soon" (the plugin contract versions it works with, such as ^${PLUGIN_CONTRACT_VERSION})`,
    ]);
  });

  it('refuses a health window for a controller that does not exist', async () => {
    const error = await assemblyError([entry('netpol')], { healthWindowsMs: { 'net-pol': 60_000 } });
    expect(error.problems).toEqual(['health window override for net-pol, which is no health check (have: netpol)']);
  });

  it('refuses conflicting servers', async () => {
    const error = await assemblyError([], {
      health: { addr: '127.0.0.1', port: 20244 },
      metrics: { addr: '0.0.0.0', port: 20244, path: '/readyz' },
    });
    expect(error.problems).toEqual([
      'health and metrics share port 20244 but listen on different addresses (127.0.0.1, 0.0.0.0)',
      'metrics path /readyz collides with the health endpoints on port 20244',
    ]);
  });

  it('reports a plugin whose create throws, naming it', async () => {
    const failing = testPlugin({
      name: 'needs-kube',
      onCreate: (services) => void services.get({ id: 'kube.client' }),
    });
    await expect(
      createAgent({ plugins: [{ plugin: failing }], options: { nodeName: 'n' }, logger: captureLogs().logger }),
    ).rejects.toThrow(
      'plugin needs-kube: create failed: service kube.client is not provided: is the plugin that provides it in the assembly?',
    );
  });
});
