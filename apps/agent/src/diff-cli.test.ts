import { describe, expect, it } from 'vitest';
import { runCli } from './run-cli.js';

/** `kube-router diff` through the CLI's dispatch, for what it decides before it touches anything. */
async function diff(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(['diff', ...argv], {
    env: { NODE_NAME: 'krt-node' },
    stdout: (text) => void (stdout += text),
    stderr: (text) => void (stderr += text),
    environment: () => Promise.reject(new Error('no cluster in this test')),
  });
  return { code, stdout, stderr };
}

describe('kube-router diff: flags', () => {
  it('exits 2 on a bad flag, as diff(1) does on trouble', async () => {
    const result = await diff('--no-such-flag');
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/no-such-flag/);
  });

  it('refuses --cleanup-config with 2: a preview never removes anything', async () => {
    const result = await diff('--cleanup-config');
    expect(result).toMatchObject({ code: 2, stdout: '' });
    expect(result.stderr).toMatch(/--cleanup-config removes rules/);
  });

  it('with the firewall off says so on its first line, previews nothing and exits 0', async () => {
    const result = await diff('--run-firewall=false', '--run-router=true', '--run-service-proxy=true');
    expect(result).toEqual({
      code: 0,
      stdout: '',
      stderr:
        'kube-router diff: firewall disabled, nothing previewed; BGP paths are not previewed; not previewed either: Service proxy rules (--run-service-proxy: IPVS services, or the nftables proxy tables), routes (--run-router)\n',
    });
  });
});
