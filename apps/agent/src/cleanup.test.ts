import { describe, expect, it } from 'vitest';
import type { CleanupContext, ControllerPlugin } from '@kube-router/controller';
import type { PluginCatalog } from './catalog.js';
import { EXIT, runCli } from './run-cli.js';
import type { LogLine } from './testing/support.js';
import { testPlugin } from './testing/test-plugins.js';

type Cleanup = (ctx: CleanupContext, options: unknown) => Promise<void>;

/** A test plugin with a cleanup hook that records its calls in `calls`. */
function withCleanup(name: string, calls: string[], cleanup: Cleanup = async () => undefined, requires?: string[]): ControllerPlugin {
  const plugin = testPlugin({ name, ...(requires && { requires }) }) as ControllerPlugin;
  return {
    ...plugin,
    async cleanup(ctx, options) {
      calls.push(`${name} on ${ctx.nodeName} with ${JSON.stringify(options)}`);
      await cleanup(ctx, options);
    },
  };
}

async function cleanupCli(args: string[], catalog: PluginCatalog) {
  const lines: LogLine[] = [];
  let stderr = '';
  let connected = false;
  const code = await runCli(['--cleanup-config', ...args], {
    catalog,
    env: { NODE_NAME: 'tagd-node' },
    guardProcess: false,
    logDestination: { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) },
    stderr: (text) => void (stderr += text),
    environment: () => {
      connected = true;
      return Promise.resolve({});
    },
  });
  return { code, stderr, lines, connected };
}

describe('--cleanup-config', () => {
  it("runs every feature's plugin cleanup whatever --run-* says, without Kubernetes, and exits 0", async () => {
    const calls: string[] = [];
    const catalog: PluginCatalog = {
      firewall: (config) => [{ plugin: withCleanup('fw', calls), options: { syncPeriodMs: config.firewall.syncPeriodMs } }],
      router: () => [{ plugin: withCleanup('routes', calls) }, { plugin: withCleanup('bgp', calls, undefined, ['routes']) }],
      // Owns nothing on the node: no cleanup hook.
      loadbalancer: () => [{ plugin: testPlugin({ name: 'allocator' }) }],
    };
    // The service proxy is enabled by default and missing from this catalog: a cleanup does not need it.
    const result = await cleanupCli(['--run-firewall=false', '--iptables-sync-period=1m'], catalog);
    expect(result.code, result.stderr).toBe(EXIT.ok);
    expect(result.connected).toBe(false);
    // Reverse creation order: bgp requires routes, so bgp is cleaned up before it.
    expect(calls).toEqual(['bgp on tagd-node with {}', 'routes on tagd-node with {}', 'fw on tagd-node with {"syncPeriodMs":60000}']);
    expect(result.lines.find((l) => l.msg === 'cleanup done')).toMatchObject({
      cleaned: ['bgp', 'routes', 'fw'],
      nothingToClean: ['allocator'],
    });
  });

  it('attempts every plugin when some fail, joins the failures and exits 1', async () => {
    const calls: string[] = [];
    const catalog: PluginCatalog = {
      firewall: () => [{ plugin: withCleanup('fw', calls, () => Promise.reject(new Error('iptables-restore exited with code 4'))) }],
      'service-proxy': () => [{ plugin: withCleanup('proxy', calls) }],
      router: () => [{ plugin: withCleanup('routes', calls, () => Promise.reject(new Error('ip route del: EPERM'))) }],
    };
    const result = await cleanupCli([], catalog);
    expect(result.code).toBe(EXIT.failure);
    expect(calls).toHaveLength(3);
    expect(result.stderr).toContain(
      'kube-router: cleanup: 2 failures: plugin routes: ip route del: EPERM; plugin fw: iptables-restore exited with code 4',
    );
    expect(result.lines.filter((l) => l.msg === 'cleanup failed').map((l) => l.controller)).toEqual(['routes', 'fw']);
  });

  it('reports a plugin whose options its schema refuses, and cleans up the others', async () => {
    const calls: string[] = [];
    const catalog: PluginCatalog = {
      firewall: () => [{ plugin: withCleanup('fw', calls), options: { syncPeriodMs: -1 } }],
      router: () => [{ plugin: withCleanup('routes', calls) }],
    };
    const result = await cleanupCli([], catalog);
    expect(result.code).toBe(EXIT.failure);
    expect(calls).toEqual(['routes on tagd-node with {}']);
    expect(result.stderr).toMatch(/plugin fw: plugin fw: bad option syncPeriodMs/);
  });

  it('still refuses flags this build cannot honour', async () => {
    const result = await cleanupCli(['--enable-pprof'], { firewall: () => [] });
    expect(result.code).toBe(EXIT.usage);
    expect(result.stderr).toContain('--enable-pprof=true: not implemented');
  });
});
