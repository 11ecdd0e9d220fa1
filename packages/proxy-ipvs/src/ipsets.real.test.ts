import { randomBytes } from 'node:crypto';
import type { V1Service } from '@kubernetes/client-node';
import { addNetns, deleteNetns, ExecRunner, hasTool, Ipset } from '@kube-router/netfilter';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVICE_IP_PORTS_SET, SERVICE_IPS_SET } from './names.js';
import { controllerHarness } from './testing/controller-harness.js';
import { driftLines } from './testing/drift.js';

// ipset needs no IPVS kernel, so this runs on the host in a namespace of its own; the IPVS, dummy-interface and
// `-m ipvs` steps fail where the host lacks them, and those failures are joined beside what is checked here.
const missing = process.getuid?.() !== 0 ? 'needs root' : ['ip', 'ipset'].find((tool) => !hasTool(tool));

function svc(name: string, spec: V1Service['spec']): V1Service {
  return { metadata: { namespace: 'ns', name }, spec: { ports: [{ name: 'http', protocol: 'TCP', port: 80 }], ...spec } };
}

describe.skipIf(missing !== undefined)(`proxy ipsets on the host's ipset${missing ? ` (skipped: ${missing})` : ''}`, () => {
  const runner = new ExecRunner({ defaultTimeoutMs: 10_000 });
  const netns = `krt-${randomBytes(4).toString('hex')}`;
  beforeAll(() => addNetns(runner, netns));
  afterAll(() => deleteNetns(runner, netns));

  it('holds every good Service’s entries with one bad Service of each kind beside them', async () => {
    const services = [
      svc('web', { clusterIP: '10.96.0.2', clusterIPs: ['10.96.0.2', 'fd00:96::2'] }),
      svc('port-70000', { clusterIP: '10.96.0.3', ports: [{ name: 'http', protocol: 'TCP', port: 70_000 }] }),
      svc('zoned', { clusterIP: '10.96.0.4', externalIPs: ['fe80::1%eth0'] }),
      svc('to-string', { clusterIP: '10.96.0.5', ports: [{ name: 'http', protocol: 'toString', port: 80 }] }),
      svc('dns', { clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10', 'fd00:96::10'], ports: [{ name: 'dns', protocol: 'UDP', port: 53 }] }),
    ];
    const proxy = controllerHarness(runner, { services }, { netns });

    const failed = await proxy.sync();
    expect(failed).not.toContain('ipsets/ipv4');
    expect(failed).not.toContain('ipsets/ipv6');
    expect(failed.filter((object) => object.startsWith('service/')).sort()).toEqual(['service/ns/port-70000', 'service/ns/to-string', 'service/ns/zoned']);

    const saved = new Map((await new Ipset({ runner, netns }).save()).map((set) => [set.name, [...set.members].sort()]));
    expect(saved.get(SERVICE_IP_PORTS_SET)).toEqual(['10.96.0.10,udp:53', '10.96.0.2,tcp:80', '10.96.0.4,tcp:80']);
    expect(saved.get(`inet6:${SERVICE_IP_PORTS_SET}`)).toEqual(['fd00:96::10,udp:53', 'fd00:96::2,tcp:80']);
    expect(saved.get(SERVICE_IPS_SET)).toEqual(['10.96.0.10', '10.96.0.2', '10.96.0.4']);
    expect(saved.get(`inet6:${SERVICE_IPS_SET}`)).toEqual(['fd00:96::10', 'fd00:96::2']);
  });

  it('puts back an ipset emptied by hand at the next periodic sync and counts it as drift, once', async () => {
    // The chains cannot be shown here: the host has no `-m ipvs`, so the masquerade chain is refused (the guest test shows them).
    const services = [svc('web', { clusterIP: '10.96.0.2', clusterIPs: ['10.96.0.2', 'fd00:96::2'] })];
    const proxy = controllerHarness(runner, { services }, { netns });
    const ipset = new Ipset({ runner, netns });
    const members = async (name: string) => (await ipset.save(name))[0]?.members ?? [];
    expect(await proxy.sync('initial')).not.toContain('ipsets/ipv4');
    // Both families' sets as ipset prints them are what the proxy wrote: nothing to count.
    expect(await proxy.sync('periodic')).not.toContain('ipsets/ipv6');
    expect(await proxy.drift('ipset')).toBe(0);

    await ipset.run(['flush', SERVICE_IP_PORTS_SET]);
    expect(await members(SERVICE_IP_PORTS_SET)).toEqual([]);
    await proxy.sync('periodic');
    expect(await members(SERVICE_IP_PORTS_SET)).toEqual(['10.96.0.2,tcp:80']);
    expect(await proxy.drift('ipset')).toBe(1);
    expect(driftLines(proxy.logs, ['ipset'])).toEqual([{ object: 'ipset', count: 1, names: [SERVICE_IP_PORTS_SET] }]);

    await proxy.sync('periodic');
    expect(await proxy.drift('ipset')).toBe(1);
  });
});
