import { describe, expect, it } from 'vitest';
import type { ControllerPlugin } from '@kube-router/controller';
import { firewallPlugins } from './catalog.js';
import type { AgentConfig } from './config.js';
import { parseFlags } from './parse-flags.js';

function config(argv: string[]): AgentConfig {
  const result = parseFlags(argv, { NODE_NAME: 'node-1' });
  if (!result.ok) throw new Error(`refused: ${result.stderr}`);
  return result.config;
}

/** The firewall plugin the agent would run with these flags: its parsed options and the tools it needs. */
function firewall(argv: string[]): { options: Record<string, unknown>; tools: readonly string[] } {
  const [entry] = firewallPlugins(config(argv));
  const plugin = entry!.plugin as ControllerPlugin<unknown>;
  const options = plugin.options.parse(entry!.options) as Record<string, unknown>;
  return { options, tools: plugin.tools?.(options) ?? [] };
}

// What the drop log does with them is tested against real traffic in each backend (drop-log.real.test.ts).
describe('--netpol-drop-log and --netpol-drop-log-events', () => {
  it('are off by default: no drop log, and no tcpdump among the tools the agent waits for', () => {
    for (const backend of [[], ['--use-nftables-for-netpol']]) {
      const { options, tools } = firewall(backend);
      expect(options).toMatchObject({ dropLog: false, dropLogEvents: false });
      expect(tools).not.toContain('tcpdump');
    }
  });

  it('turn the drop log (and its Events) on in either backend, which then needs tcpdump', () => {
    for (const backend of [[], ['--use-nftables-for-netpol']]) {
      const { options, tools } = firewall(['--netpol-drop-log', '--netpol-drop-log-events', ...backend]);
      expect(options).toMatchObject({ dropLog: true, dropLogEvents: true, dropLogIntervalMs: 10_000 });
      expect(tools).toContain('tcpdump');
    }
  });

  it('refuses Events without the drop log, naming both flags', () => {
    const result = parseFlags(['--netpol-drop-log-events'], { NODE_NAME: 'node-1' });
    expect(result.ok).toBe(false);
    expect(result.ok ? '' : result.stderr).toContain('--netpol-drop-log-events needs --netpol-drop-log');
  });
});
