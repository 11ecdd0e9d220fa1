import { describe, expect, it } from 'vitest';
import { createAgent } from './agent.js';
import { testPlugin } from './testing/test-plugins.js';
import { get, memoryLogger, waitFor } from './testing/support.js';
import { toolReadinessCheck } from './tool-readiness.js';

describe('toolReadinessCheck', () => {
  it('names the missing tools in one log line at once, fails readiness until they are installed, and rechecks every 10 s', () => {
    const installed = new Set(['ip']);
    let now = 0;
    const { logger, lines } = memoryLogger();
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
    const { logger, lines } = memoryLogger();
    expect(toolReadinessCheck('netpol', ['nft'], logger, () => '/usr/sbin/nft')()).toBeUndefined();
    expect(lines).toEqual([]);
  });
});

describe('a plugin whose tool is not installed', () => {
  it('is not ready, naming the tool, while it syncs and stays live (an image without gobgpd looked healthy)', async () => {
    const { logger, lines } = memoryLogger();
    const plugin = { ...testPlugin({ name: 'needs-tools' }), tools: () => ['sh', 'kube-router-test-no-such-tool'] };
    const agent = await createAgent({
      logger,
      plugins: [{ plugin }],
      options: { nodeName: 'node-a', health: { addr: '127.0.0.1', port: 0 }, metrics: { addr: '127.0.0.1', port: 0 }, collectDefaultMetrics: false },
    });
    await agent.start();
    try {
      await waitFor('the first sync', () => agent.health.status('needs-tools')?.firstSyncEnded === true);
      expect(await get(`${agent.healthUrl}/readyz?verbose`)).toEqual({
        status: 500,
        body: '[-]needs-tools/tools failed: kube-router-test-no-such-tool not installed\n[+]needs-tools ok\nreadyz check failed\n',
      });
      expect((await get(`${agent.healthUrl}/healthz`)).status).toBe(200);
      const named = lines.filter((l) => String(l.msg).includes('kube-router-test-no-such-tool'));
      expect(named).toEqual([expect.objectContaining({ controller: 'needs-tools', level: 50 })]);
    } finally {
      await agent.stop();
    }
  });
});
