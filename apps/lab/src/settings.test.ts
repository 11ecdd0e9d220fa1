import { describe, expect, it } from 'vitest';
import { labSettings } from './settings.js';

describe('labSettings', () => {
  it('defaults to two nodes, a random run id, the default underlay and any API port', () => {
    const settings = labSettings({});
    expect(settings).toMatchObject({ nodes: 2, underlayCidrs: undefined, apiPort: 0, agentCli: undefined, externalRouter: true, logFormat: 'text', agentDefaults: true });
    expect(settings.runId).toMatch(/^[a-z0-9]{1,6}$/);
  });

  it('reads LAB_NODES, LAB_RUN_ID, LAB_UNDERLAY_CIDRS, LAB_API_PORT, LAB_AGENT_CLI, LAB_EXTERNAL_ROUTER, LAB_LOG_FORMAT and LAB_AGENT_DEFAULTS', () => {
    expect(
      labSettings({
        LAB_NODES: '3',
        LAB_RUN_ID: 'abc',
        LAB_UNDERLAY_CIDRS: '10.250.9.0/24, fd00:10:250:9::/64',
        LAB_API_PORT: '6443',
        LAB_AGENT_CLI: '/opt/my-agent/cli.js',
        LAB_EXTERNAL_ROUTER: 'false',
        LAB_LOG_FORMAT: 'json',
        LAB_AGENT_DEFAULTS: 'false',
      }),
    ).toEqual({
      nodes: 3,
      runId: 'abc',
      underlayCidrs: ['10.250.9.0/24', 'fd00:10:250:9::/64'],
      apiPort: 6443,
      agentCli: '/opt/my-agent/cli.js',
      externalRouter: false,
      logFormat: 'json',
      agentDefaults: false,
    });
  });

  it('refuses a node count or port that makes no sense, naming the variable', () => {
    expect(() => labSettings({ LAB_NODES: '0' })).toThrow('LAB_NODES must be 1-200');
    expect(() => labSettings({ LAB_NODES: 'two' })).toThrow('LAB_NODES');
    expect(() => labSettings({ LAB_API_PORT: '70000' })).toThrow('LAB_API_PORT');
    expect(() => labSettings({ LAB_EXTERNAL_ROUTER: 'yes' })).toThrow('LAB_EXTERNAL_ROUTER must be true or false');
    expect(() => labSettings({ LAB_LOG_FORMAT: 'pretty' })).toThrow('LAB_LOG_FORMAT must be text or json');
    expect(() => labSettings({ LAB_AGENT_DEFAULTS: 'no' })).toThrow('LAB_AGENT_DEFAULTS must be true or false');
  });
});
