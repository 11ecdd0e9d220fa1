import { describe, expect, it } from 'vitest';
import type { ControllerPlugin } from '@kube-router/controller';
import { createAgent } from './agent.js';
import { testPlugin } from './testing/test-plugins.js';
import { get, captureLogs, waitFor } from './testing/support.js';
import { kernelFeatureReadinessCheck, toolReadinessCheck } from './tool-readiness.js';

describe('toolReadinessCheck', () => {
  it('names the missing tools in one log line at once, fails readiness until they are installed, and rechecks every 10 s', () => {
    const installed = new Set(['ip']);
    let now = 0;
    const { logger, lines } = captureLogs();
    const check = toolReadinessCheck('routing-bgp', ['gobgpd', 'ip'], logger, (name) => (installed.has(name) ? `/usr/bin/${name}` : undefined), () => now);
    expect(lines.map((l) => l.msg)).toEqual(['gobgpd is not installed (not found on PATH): routing-bgp cannot program the node, stays not ready and its syncs fail']);
    expect(check()).toBe('gobgpd not installed');
    installed.add('gobgpd');
    now = 9_999;
    expect(check()).toBe('gobgpd not installed');
    now = 10_000;
    expect(check()).toBeUndefined();
    expect(lines).toHaveLength(1);
  });

  it('says nothing and passes when every tool is there', () => {
    const { logger, lines } = captureLogs();
    expect(toolReadinessCheck('netpol', ['nft'], logger, () => '/usr/sbin/nft')()).toBeUndefined();
    expect(lines).toEqual([]);
  });
});

describe('a plugin whose tool is not installed', () => {
  it('is not ready, naming the tool, while it syncs and stays live (an image without gobgpd looked healthy)', async () => {
    const plugin = { ...testPlugin({ name: 'needs-tools' }), tools: () => ['sh', 'kube-router-test-no-such-tool'] };
    const { readyz, healthz, named } = await readinessOf(plugin, 'kube-router-test-no-such-tool');
    expect(readyz).toEqual({
      status: 500,
      body: '[-]needs-tools/tools failed: kube-router-test-no-such-tool not installed\n[+]needs-tools ok\nreadyz check failed\n',
    });
    expect(healthz).toBe(200);
    expect(named).toEqual([expect.objectContaining({ controller: 'needs-tools', level: 50 })]);
  });
});

describe('kernelFeatureReadinessCheck', () => {
  const IPVS = { name: 'IPVS (ip_vs)', path: '/proc/net/ip_vs' };

  it('names the missing feature and its path in one log line, fails readiness until the kernel has it', () => {
    const present = new Set<string>();
    let now = 0;
    const { logger, lines } = captureLogs();
    const check = kernelFeatureReadinessCheck('proxy', [IPVS], logger, (path) => present.has(path), () => now);
    expect(lines.map((l) => l.msg)).toEqual([
      'the kernel has no IPVS (ip_vs) (/proc/net/ip_vs is missing): proxy cannot program the node, stays not ready and its syncs fail',
    ]);
    expect(check()).toBe('the kernel has no IPVS (ip_vs)');
    // modprobe ip_vs on the running node: seen within the recheck interval.
    present.add('/proc/net/ip_vs');
    now = 10_000;
    expect(check()).toBeUndefined();
    expect(lines).toHaveLength(1);
  });
});

describe('a plugin whose kernel feature is missing', () => {
  it('is not ready, naming the feature, while it syncs and stays live (a kernel without IPVS looked ready)', async () => {
    const plugin = {
      ...testPlugin({ name: 'needs-kernel' }),
      kernelFeatures: () => [
        { name: 'loopback', path: '/proc/self' },
        { name: 'kube-router-test-feature', path: '/proc/net/kube-router-test-no-such-feature' },
      ],
    };
    const { readyz, healthz, named } = await readinessOf(plugin, 'kube-router-test-feature');
    expect(readyz).toEqual({
      status: 500,
      body: '[-]needs-kernel/kernel failed: the kernel has no kube-router-test-feature\n[+]needs-kernel ok\nreadyz check failed\n',
    });
    expect(healthz).toBe(200);
    expect(named).toEqual([expect.objectContaining({ controller: 'needs-kernel', level: 50 })]);
  });
});

/** The agent with `plugin` alone, through its first sync: its verbose readiness, its liveness and its log lines. */
async function readinessOf(plugin: ControllerPlugin<unknown>, word: string) {
  const { logger, lines } = captureLogs();
  const agent = await createAgent({
    logger,
    plugins: [{ plugin }],
    options: { nodeName: 'node-a', health: { addr: '127.0.0.1', port: 0 }, metrics: { addr: '127.0.0.1', port: 0 }, collectDefaultMetrics: false },
  });
  await agent.start();
  try {
    await waitFor('the first sync', () => agent.health.status(plugin.name)?.firstSyncEnded === true);
    return {
      readyz: await get(`${agent.healthUrl}/readyz?verbose`),
      healthz: (await get(`${agent.healthUrl}/healthz`)).status,
      named: lines.filter((l) => String(l.msg).includes(word)),
    };
  } finally {
    await agent.stop();
  }
}
