import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { ApiPath } from './gobgp-api.js';
import { isLocalPath, pathNextHop, pathPrefix, podCidrPath } from './paths.js';
import { hostPrefix, isVipPath, planServiceVips, VipAdvertiser, type VipAddressValidation, type VipFlags, type VipGobgp } from './vips.js';

const NODE = 'node-1';
const ALL: VipFlags = { advertiseClusterIp: true, advertiseExternalIp: true, advertiseLoadBalancerIp: true };
const NONE: VipFlags = { advertiseClusterIp: false, advertiseExternalIp: false, advertiseLoadBalancerIp: false };

function service(name: string, spec: V1Service['spec'], extra: { annotations?: Record<string, string>; ingress?: string[] } = {}): V1Service {
  return {
    metadata: { namespace: 'bv', name, ...(extra.annotations && { annotations: extra.annotations }) },
    spec: { clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10'], ...spec },
    ...(extra.ingress && { status: { loadBalancer: { ingress: extra.ingress.map((ip) => ({ ip })) } } }),
  };
}

function slice(serviceName: string, endpoints: V1EndpointSlice['endpoints']): V1EndpointSlice {
  return { addressType: 'IPv4', metadata: { namespace: 'bv', name: `${serviceName}-x`, labels: { 'kubernetes.io/service-name': serviceName } }, endpoints };
}

function plan(services: V1Service[], flags: VipFlags, slices: V1EndpointSlice[] = []) {
  return planServiceVips({
    services,
    slicesFor: (namespace, name) => slices.filter((s) => s.metadata?.labels?.['kubernetes.io/service-name'] === name && namespace === 'bv'),
    nodeName: NODE,
    nodeAddresses: ['10.77.0.1', 'fd00:77::1'],
    flags,
  });
}

describe('planServiceVips', () => {
  const lb = service('lb', { type: 'LoadBalancer', externalIPs: ['192.0.2.7'] }, { ingress: ['198.51.100.5'] });

  it('announces each kind of address by its flag, as /32', () => {
    expect([...plan([lb], ALL).advertise].sort()).toEqual(['10.96.0.10/32', '192.0.2.7/32', '198.51.100.5/32']);
    expect([...plan([lb], { ...NONE, advertiseLoadBalancerIp: true }).advertise]).toEqual(['198.51.100.5/32']);
    expect([...plan([lb], { ...NONE, advertiseExternalIp: true }).advertise]).toEqual(['192.0.2.7/32']);
    expect([...plan([lb], NONE).advertise]).toEqual([]);
  });

  it('--strict-external-ip-validation: externalIPs and LoadBalancer IPs only within their ranges and outside the cluster range', () => {
    const strict = (validation: Partial<VipAddressValidation>) =>
      planServiceVips({
        services: [
          lb,
          service('wide', { type: 'LoadBalancer', externalIPs: ['192.0.3.1', '10.96.0.99'] }, { ingress: ['198.51.101.1'] }),
        ],
        slicesFor: () => [],
        nodeName: NODE,
        nodeAddresses: ['10.77.0.1'],
        flags: ALL,
        validation: { externalIpRanges: [], loadBalancerIpRanges: [], clusterIpRanges: ['10.96.0.0/12'], ...validation },
      });
    // kube-router's default deny: no range, no address of that kind; the cluster IPs are never filtered.
    const denied = strict({});
    expect([...denied.advertise].sort()).toEqual(['10.96.0.10/32']);
    expect(denied.problems).toEqual([]);
    expect(denied.refused.map((r) => r.message)).toContain('externalip 192.0.2.7 is not announced: no --service-external-ip-range is configured (strict validation denies every externalip)');
    const ranged = strict({ externalIpRanges: ['192.0.2.0/24', '10.96.0.0/24'], loadBalancerIpRanges: ['198.51.100.0/24'] });
    expect([...ranged.advertise].sort()).toEqual(['10.96.0.10/32', '192.0.2.7/32', '198.51.100.5/32']);
    expect(ranged.refused.map((r) => r.message).sort()).toEqual([
      'externalip 10.96.0.99 is not announced: it lies in --service-cluster-ip-range',
      'externalip 192.0.3.1 is not announced: it is not within --service-external-ip-range',
      'loadbalancerip 198.51.101.1 is not announced: it is not within --loadbalancer-ip-range',
    ]);
    // Without validation (the plugin's default) everything is announced, as before.
    expect(plan([lb], ALL).refused).toEqual([]);
  });

  it('lets the per-Service annotations override the flags either way (Go ParseBool spellings)', () => {
    const annotated = service('a', { type: 'LoadBalancer' }, {
      ingress: ['198.51.100.6'],
      annotations: { 'kube-router.io/service.advertise.clusterip': 'True', 'kube-router.io/service.advertise.loadbalancerip': 'false' },
    });
    const result = plan([annotated], { ...NONE, advertiseLoadBalancerIp: true });
    expect([...result.advertise]).toEqual(['10.96.0.10/32']);
    expect(result.problems).toEqual([]);
  });

  it('reports a bad annotation value and falls back to the flag, keeping the Service\'s other addresses', () => {
    const bad = service('bad', { type: 'LoadBalancer' }, { ingress: ['198.51.100.7'], annotations: { 'kube-router.io/service.advertise.loadbalancerip': 'yes' } });
    const result = plan([bad], { ...NONE, advertiseClusterIp: true, advertiseLoadBalancerIp: true });
    expect([...result.advertise].sort()).toEqual(['10.96.0.10/32', '198.51.100.7/32']);
    expect(result.problems).toHaveLength(1);
    expect(result.problems[0]).toMatchObject({ reason: 'InvalidAnnotation', service: bad });
    expect(result.problems[0]!.message).toContain('"yes" is not true or false');
  });

  it('reports an address that does not parse and announces the rest', () => {
    const result = plan([service('x', { externalIPs: ['not-an-ip', '192.0.2.8', '0x7f.1'] })], { ...NONE, advertiseExternalIp: true });
    expect([...result.advertise]).toEqual(['192.0.2.8/32']);
    expect(result.problems.map((p) => p.reason)).toEqual(['InvalidServiceAddress', 'InvalidServiceAddress']);
  });

  it('announces an address as Go reads it: ::1.2.3.4 is IPv6 ::102:304 (ipaddr.js made it 1.2.3.4); octal and zones are refused', () => {
    const result = plan([service('x', { externalIPs: ['::1.2.3.4', '010.0.0.1', 'fe80::1%eth0', '::ffff:192.0.2.9'] })], { ...NONE, advertiseExternalIp: true });
    expect([...result.advertise].sort()).toEqual(['192.0.2.9/32', '::102:304/128']);
    expect(result.problems.map((p) => p.message)).toEqual([expect.stringContaining('"010.0.0.1" is not an IP address'), expect.stringContaining('"fe80::1%eth0" is not an IP address')]);
  });

  it('skips headless and ExternalName Services, and LoadBalancer IPs in Proxy mode or with skiplbips', () => {
    const headless = service('h', { clusterIP: 'None', clusterIPs: ['None'] });
    const external = service('e', { type: 'ExternalName', externalName: 'example.com' });
    const proxy: V1Service = { ...service('p', { type: 'LoadBalancer' }), status: { loadBalancer: { ingress: [{ ip: '198.51.100.9', ipMode: 'Proxy' }] } } };
    const skipped = service('s', { type: 'LoadBalancer' }, { ingress: ['198.51.100.10'], annotations: { 'kube-router.io/service.skiplbips': '' } });
    const notLb = service('n', { type: 'ClusterIP' }, { ingress: ['198.51.100.11'] });
    expect([...plan([headless, external, proxy, skipped, notLb], { ...NONE, advertiseLoadBalancerIp: true, advertiseClusterIp: false }).advertise]).toEqual([]);
  });

  it('announces IPv6 addresses as /128 in canonical form', () => {
    const v6 = service('v6', { clusterIP: 'fd00:96:0:0::a', clusterIPs: ['fd00:96:0:0::a', '10.96.0.11'] });
    expect([...plan([v6], ALL).advertise].sort()).toEqual(['10.96.0.11/32', 'fd00:96::a/128']);
    expect(hostPrefix('fd00:0::1')).toBe('fd00::1/128');
  });

  describe('Local traffic policies', () => {
    const local = service('local', { type: 'LoadBalancer', externalTrafficPolicy: 'Local', internalTrafficPolicy: 'Local' }, { ingress: ['198.51.100.12'] });
    const onNode = (node: string, ready = true) => slice('local', [{ addresses: ['10.78.1.5'], nodeName: node, conditions: { ready } }]);

    it('withdraws external and cluster addresses without a local endpoint', () => {
      expect([...plan([local], ALL, [onNode('node-2')]).advertise]).toEqual([]);
      expect([...plan([local], ALL, []).advertise]).toEqual([]);
    });

    it('announces them with a ready endpoint on this node', () => {
      expect([...plan([local], ALL, [onNode(NODE)]).advertise].sort()).toEqual(['10.96.0.10/32', '198.51.100.12/32']);
    });

    it('does not count an endpoint that is not ready', () => {
      expect([...plan([local], ALL, [onNode(NODE, false)]).advertise]).toEqual([]);
    });

    it('counts a host-network endpoint without nodeName by this node\'s address', () => {
      expect(plan([local], ALL, [slice('local', [{ addresses: ['10.77.0.1'] }])]).advertise.size).toBe(2);
    });

    it('treats each policy separately, and honours kube-router.io/service.local', () => {
      const externalOnly = service('local', { type: 'LoadBalancer', externalTrafficPolicy: 'Local' }, { ingress: ['198.51.100.12'] });
      expect([...plan([externalOnly], ALL).advertise]).toEqual(['10.96.0.10/32']);
      const annotated = service('local', { type: 'LoadBalancer' }, { ingress: ['198.51.100.12'], annotations: { 'kube-router.io/service.local': 'true' } });
      expect([...plan([annotated], ALL).advertise]).toEqual(['10.96.0.10/32']);
    });

    it('keeps a VIP shared with a Service that still wants it', () => {
      const shared = service('other', { type: 'LoadBalancer' }, { ingress: ['198.51.100.12'] });
      expect(plan([local, shared], { ...NONE, advertiseLoadBalancerIp: true }).advertise).toEqual(new Set(['198.51.100.12/32']));
    });
  });
});

/** An in-memory gobgpd RIB: enough for the reconcile logic; the real path is in vips.real.test.ts. */
function fakeGobgp(initial: ApiPath[] = [], failing: Set<string> = new Set()): VipGobgp & { rib: ApiPath[]; calls: string[] } {
  const rib = [...initial];
  const calls: string[] = [];
  const gobgp = {
    rib,
    calls,
    addPathsInBulk: (paths: readonly ApiPath[]) => {
      calls.push(`bulk ${paths.length}`);
      if (paths.some((p) => failing.has(pathPrefix(p)!))) return Promise.reject(new Error('refused'));
      for (const path of paths) void (path.isWithdraw ? gobgp.deletePath(path) : gobgp.addPath(path));
      return Promise.resolve();
    },
    listGlobalPaths: (afi: string) => Promise.resolve(rib.filter((p) => p.family?.afi === afi).map((p) => ({ ...p, neighborIp: '<nil>' }))),
    addPath: (path: ApiPath) => {
      if (failing.has(pathPrefix(path)!)) return Promise.reject(new Error('refused'));
      const index = rib.findIndex((p) => pathPrefix(p) === pathPrefix(path));
      if (index >= 0) rib.splice(index, 1);
      rib.push(path);
      return Promise.resolve();
    },
    deletePath: (path: ApiPath) => {
      if (failing.has(pathPrefix(path)!)) return Promise.reject(new Error('refused'));
      rib.splice(rib.findIndex((p) => pathPrefix(p) === pathPrefix(path)), 1);
      return Promise.resolve();
    },
  };
  return gobgp;
}

describe('VipAdvertiser', () => {
  const hops = { ipv4: '10.77.0.1', ipv6: 'fd00:77::1' };
  const pods = new Set(['10.78.1.0/24']);

  it('adds the wanted VIPs, withdraws the others, and leaves pod CIDRs alone', async () => {
    const gobgp = fakeGobgp([podCidrPath('10.78.1.0/24', hops.ipv4), podCidrPath('192.0.2.1/32', hops.ipv4)]);
    const vips = new VipAdvertiser(() => gobgp);
    await vips.reconcile(new Set(['198.51.100.5/32', 'fd00:96::a/128']), pods, hops);
    expect(gobgp.rib.map((p) => `${pathPrefix(p)} via ${pathNextHop(p)}`).sort()).toEqual([
      '10.78.1.0/24 via 10.77.0.1',
      '198.51.100.5/32 via 10.77.0.1',
      'fd00:96::a/128 via fd00:77::1',
    ]);
    expect(await vips.announced(pods)).toEqual(new Set(['198.51.100.5/32', 'fd00:96::a/128']));
    // One change per family: each on its own.
    expect(gobgp.calls).toEqual([]);
  });

  it('makes many changes in one bulk call', async () => {
    const gobgp = fakeGobgp([podCidrPath('192.0.2.1/32', hops.ipv4), podCidrPath('192.0.2.2/32', hops.ipv4)]);
    const changes: string[] = [];
    const vips = new VipAdvertiser(() => gobgp, ({ prefix, change }) => changes.push(`${change} ${prefix}`));
    await vips.reconcile(new Set(['198.51.100.5/32', '198.51.100.6/32', '198.51.100.7/32']), pods, hops);
    expect(gobgp.calls).toEqual(['bulk 3', 'bulk 2']);
    expect(gobgp.rib.map((p) => pathPrefix(p)).sort()).toEqual(['198.51.100.5/32', '198.51.100.6/32', '198.51.100.7/32']);
    expect(changes.sort()).toEqual([
      'advertised 198.51.100.5/32',
      'advertised 198.51.100.6/32',
      'advertised 198.51.100.7/32',
      'withdrawn 192.0.2.1/32',
      'withdrawn 192.0.2.2/32',
    ]);
  });

  it('joins the failures of advertisements and withdrawals and still does the rest', async () => {
    const gobgp = fakeGobgp([podCidrPath('192.0.2.1/32', hops.ipv4), podCidrPath('192.0.2.2/32', hops.ipv4)], new Set(['192.0.2.1/32', '198.51.100.6/32']));
    const vips = new VipAdvertiser(() => gobgp);
    const error = await vips.reconcile(new Set(['198.51.100.5/32', '198.51.100.6/32']), pods, hops).catch((e: unknown) => e);
    expect(String(error)).toContain('vip/198.51.100.6/32/advertise: refused');
    expect(String(error)).toContain('vip/192.0.2.1/32/withdraw: refused');
    expect(gobgp.rib.map((p) => pathPrefix(p)).sort()).toEqual(['192.0.2.1/32', '198.51.100.5/32']);
    // The path that could not be withdrawn is still announced: the export policy keeps letting it through.
    expect(await vips.announced(pods)).toEqual(new Set(['192.0.2.1/32', '198.51.100.5/32']));
  });

  it('fails a VIP of a family the node has no address in', async () => {
    const vips = new VipAdvertiser(() => fakeGobgp());
    await expect(vips.reconcile(new Set(['fd00:96::b/128']), pods, { ipv4: hops.ipv4 })).rejects.toThrow(/no ipv6 address/);
  });

  it('tells VIP paths from pod CIDR paths', () => {
    const local = (cidr: string) => ({ ...podCidrPath(cidr, hops.ipv4), neighborIp: '<nil>' });
    expect(isVipPath(local('198.51.100.5/32'), pods)).toBe(true);
    expect(isVipPath(local('10.78.1.0/24'), pods)).toBe(false);
    expect(isVipPath(local('10.78.9.9/32'), new Set(['10.78.9.9/32']))).toBe(false);
    const learned = { ...podCidrPath('198.51.100.5/32', '10.77.0.2'), neighborIp: '10.77.0.2' };
    expect(isLocalPath(learned)).toBe(false);
    expect(isVipPath(learned, pods)).toBe(false);
  });
});
