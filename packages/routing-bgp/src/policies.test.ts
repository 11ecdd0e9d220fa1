import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { PolicyAssignment, PolicyDirection, RoutingPolicy } from './gobgp-api.js';
import {
  buildRoutingPolicy,
  EXPORT_POLICY,
  IMPORT_POLICY,
  isCommunity,
  nodePolicySettings,
  PolicyReconciler,
  type PolicyGobgp,
  type PolicyInput,
} from './policies.js';

const node = (annotations: Record<string, string>): V1Node => ({ metadata: { name: 'node-1', annotations } });

describe('nodePolicySettings', () => {
  it('reads communities, the AS path prepend and the import reject CIDRs', () => {
    const { settings, problems } = nodePolicySettings(
      node({
        'kube-router.io/node.bgp.communities': '65000:100, 4294967295,no-export',
        'kube-router.io/path-prepend.as': '65001',
        'kube-router.io/path-prepend.repeat-n': '3',
        'kube-router.io/node.bgp.customimportreject': '192.168.0.0/16, 10.1.2.3/16,fd00:dead::/32',
      }),
    );
    expect(problems).toEqual([]);
    expect(settings).toEqual({
      communities: ['65000:100', '4294967295', 'no-export'],
      prepend: { asn: 65001, repeat: 3 },
      customImportReject: ['192.168.0.0/16', '10.1.0.0/16', 'fd00:dead::/32'],
    });
  });

  it('reads customimportreject as net.ParseCIDR does: 010.0.0.0/8 (ipaddr.js: 8.0.0.0/8), a zone or /08 is a problem', () => {
    const { settings, problems } = nodePolicySettings(
      node({ 'kube-router.io/node.bgp.customimportreject': '010.0.0.0/8,fe80::%eth0/64,10.0.0.0/08,::1.2.3.0/120' }),
    );
    expect(settings.customImportReject).toEqual(['::102:300/120']);
    expect(problems.map((p) => p.message)).toEqual([
      '"010.0.0.0/8" is not a CIDR; it is not rejected',
      '"fe80::%eth0/64" is not a CIDR; it is not rejected',
      '"10.0.0.0/08" is not a CIDR; it is not rejected',
    ]);
  });

  it('drops each bad entry with a problem and keeps the good ones', () => {
    const { settings, problems } = nodePolicySettings(
      node({
        'kube-router.io/node.bgp.communities': '65000:100,65536:1,no-such-community',
        'kube-router.io/path-prepend.as': 'sixty-five',
        'kube-router.io/path-prepend.repeat-n': '2',
        'kube-router.io/node.bgp.customimportreject': '192.168.0.0/16,10.0.0.0/33,banana',
      }),
    );
    expect(settings).toEqual({ communities: ['65000:100'], customImportReject: ['192.168.0.0/16'] });
    expect(problems.map((p) => p.annotation)).toEqual([
      'kube-router.io/node.bgp.communities',
      'kube-router.io/node.bgp.communities',
      'kube-router.io/path-prepend.as',
      'kube-router.io/node.bgp.customimportreject',
      'kube-router.io/node.bgp.customimportreject',
    ]);
    expect(problems[1]!.message).toContain('"no-such-community" is not a community');
  });

  it('refuses a repeat count beyond 255, and a prepend with only one of its two annotations', () => {
    expect(nodePolicySettings(node({ 'kube-router.io/path-prepend.as': '65001', 'kube-router.io/path-prepend.repeat-n': '256' })).problems[0]!.message).toContain(
      'not a repeat count',
    );
    const half = nodePolicySettings(node({ 'kube-router.io/path-prepend.as': '65001' }));
    expect(half.settings.prepend).toBeUndefined();
    expect(half.problems[0]!.message).toContain('must be set together');
  });

  it('accepts what gobgp accepts as a community', () => {
    for (const ok of ['0', '4294967295', '0:0', '65535:65535', 'blackhole', 'no-advertise']) expect(isCommunity(ok), ok).toBe(true);
    for (const bad of ['4294967296', '65536:0', '1:2:3', 'NO-EXPORT', '', '-1']) expect(isCommunity(bad), bad).toBe(false);
  });
});

const base: PolicyInput = {
  podCidrs: ['10.78.1.0/24', 'fd00:78:1::/64'],
  vips: ['198.51.100.5/32'],
  internalPeers: ['10.77.0.2'],
  externalPeers: ['10.77.0.100'],
  enableIbgp: true,
  advertisePodCidr: true,
  overrideNextHop: false,
  node: { communities: [], customImportReject: [] },
};

const statementNames = (policy: RoutingPolicy, name: string) => policy.policies.find((p) => p.name === name)!.statements.map((s) => s.name);

describe('buildRoutingPolicy', () => {
  it('exports pod CIDRs to the mesh, VIPs and pod CIDRs to external peers, and rejects VIPs and default routes on import', () => {
    const policy = buildRoutingPolicy(base);
    expect(statementNames(policy, EXPORT_POLICY)).toEqual([
      'podcidrdefinedsetiBGPpeerset',
      'podcidrdefinedsetv6iBGPpeerset',
      'servicevipsdefinedsetexternalpeerset',
      'podcidrdefinedsetexternalpeerset',
      'podcidrdefinedsetv6externalpeerset',
    ]);
    expect(statementNames(policy, IMPORT_POLICY)).toEqual([
      'servicevipsdefinedsetallpeerset',
      'defaultroutedefinedsetallpeerset',
      'defaultroutedefinedsetv6allpeerset',
    ]);
    const set = (name: string) => policy.definedSets.find((s) => s.name === name);
    expect(set('servicevipsdefinedset')!.prefixes).toEqual([{ ipPrefix: '198.51.100.5/32', maskLengthMin: 32, maskLengthMax: 32 }]);
    expect(set('defaultroutedefinedsetv6')!.prefixes).toEqual([{ ipPrefix: '::/0', maskLengthMin: 0, maskLengthMax: 0 }]);
    expect(set('allpeerset')!.list).toEqual(['10.77.0.100/32', '10.77.0.2/32']);
    expect(set('externalpeerset')!.list).toEqual(['10.77.0.100/32']);
  });

  it('--advertise-pod-cidr=false keeps pod CIDRs from external peers only; --enable-ibgp=false from the mesh', () => {
    expect(statementNames(buildRoutingPolicy({ ...base, advertisePodCidr: false }), EXPORT_POLICY)).toEqual([
      'podcidrdefinedsetiBGPpeerset',
      'podcidrdefinedsetv6iBGPpeerset',
      'servicevipsdefinedsetexternalpeerset',
    ]);
    expect(statementNames(buildRoutingPolicy({ ...base, enableIbgp: false }), EXPORT_POLICY)).not.toContain('podcidrdefinedsetiBGPpeerset');
  });

  it('puts communities, the prepend and next-hop-self on what goes to external peers only', () => {
    const policy = buildRoutingPolicy({
      ...base,
      overrideNextHop: true,
      node: { communities: ['65000:100', 'no-export'], prepend: { asn: 65001, repeat: 2 }, customImportReject: [] },
    });
    const statements = policy.policies.find((p) => p.name === EXPORT_POLICY)!.statements;
    const external = statements.find((s) => s.name === 'servicevipsdefinedsetexternalpeerset')!;
    expect(external.actions).toEqual({
      routeAction: 'ACCEPT',
      community: { type: 'ADD', communities: ['65000:100', 'no-export'] },
      asPrepend: { asn: 65001, repeat: 2 },
      nexthop: { self: true },
    });
    expect(statements.find((s) => s.name === 'podcidrdefinedsetiBGPpeerset')!.actions).toEqual({ routeAction: 'ACCEPT' });
  });

  it('rejects the custom CIDRs and everything longer inside them', () => {
    const policy = buildRoutingPolicy({ ...base, node: { communities: [], customImportReject: ['192.168.0.0/16', 'fd00:dead::/32'] } });
    expect(statementNames(policy, IMPORT_POLICY)).toContain('customimportrejectdefinedsetallpeerset');
    expect(statementNames(policy, IMPORT_POLICY)).toContain('customimportrejectdefinedsetv6allpeerset');
    expect(policy.definedSets.find((s) => s.name === 'customimportrejectdefinedsetv6')!.prefixes).toEqual([
      { ipPrefix: 'fd00:dead::/32', maskLengthMin: 32, maskLengthMax: 128 },
    ]);
  });

  it('never refers to an empty set: without peers or VIPs there is no statement for them', () => {
    const policy = buildRoutingPolicy({ ...base, vips: [], externalPeers: [], internalPeers: [] });
    expect(statementNames(policy, EXPORT_POLICY)).toEqual([]);
    expect(statementNames(policy, IMPORT_POLICY)).toEqual([]);
    // An IPv6 peer pairs with the IPv4 VIP set as well: prefixes of either family travel over either session.
    const v6 = buildRoutingPolicy({ ...base, internalPeers: [], externalPeers: ['fd00:77::100'] });
    expect(statementNames(v6, EXPORT_POLICY)).toContain('servicevipsdefinedsetexternalpeersetv6');
  });

  it('counts a peer that is in both sets as internal', () => {
    const policy = buildRoutingPolicy({ ...base, externalPeers: ['10.77.0.2'] });
    expect(policy.definedSets.find((s) => s.name === 'externalpeerset')!.list).toEqual([]);
  });
});

function recordingGobgp(): PolicyGobgp & { calls: string[]; assignments: Map<PolicyDirection, PolicyAssignment> } {
  const calls: string[] = [];
  const assignments = new Map<PolicyDirection, PolicyAssignment>();
  return {
    calls,
    assignments,
    setPolicies: () => Promise.resolve(calls.push('setPolicies')),
    getGlobalPolicyAssignment: (direction) => Promise.resolve(assignments.get(direction)),
    setGlobalPolicyAssignment: (direction, names, defaultAction) => {
      calls.push(`assign ${direction} ${names.join()} ${defaultAction}`);
      assignments.set(direction, { name: 'global', direction, policies: names.map((name) => ({ name })), defaultAction });
      return Promise.resolve();
    },
    softResetAllPeers: (direction) => Promise.resolve(calls.push(`softReset ${direction}`)),
  };
}

describe('PolicyReconciler', () => {
  it('applies a policy once, again when it changes or gobgpd lost its assignment, and soft-resets the peers', async () => {
    const gobgp = recordingGobgp();
    const reconciler = new PolicyReconciler(() => gobgp);
    expect(reconciler.applied).toBe(false);
    expect(await reconciler.reconcile(buildRoutingPolicy(base))).toBe(true);
    expect(reconciler.applied).toBe(true);
    expect(gobgp.calls).toEqual([
      'setPolicies',
      `assign IMPORT ${IMPORT_POLICY} ACCEPT`,
      `assign EXPORT ${EXPORT_POLICY} REJECT`,
      'softReset BOTH',
    ]);
    expect(await reconciler.reconcile(buildRoutingPolicy(base))).toBe(false);
    gobgp.calls.length = 0;
    // Another VIP: only the import side is re-evaluated.
    expect(await reconciler.reconcile(buildRoutingPolicy({ ...base, vips: ['198.51.100.5/32', '198.51.100.6/32'] }))).toBe(true);
    expect(gobgp.calls.at(-1)).toBe('softReset IN');
    // Another peer: everything is re-sent.
    expect(await reconciler.reconcile(buildRoutingPolicy({ ...base, vips: ['198.51.100.5/32', '198.51.100.6/32'], externalPeers: ['10.77.0.100', '10.77.0.101'] }))).toBe(true);
    expect(gobgp.calls.at(-1)).toBe('softReset BOTH');
    // A restarted gobgpd has no assignment.
    gobgp.assignments.clear();
    expect(await reconciler.reconcile(buildRoutingPolicy({ ...base, vips: ['198.51.100.5/32', '198.51.100.6/32'], externalPeers: ['10.77.0.100', '10.77.0.101'] }))).toBe(true);
    expect(gobgp.calls.filter((c) => c === 'setPolicies')).toHaveLength(3);
    expect(gobgp.calls.at(-1)).toBe('softReset BOTH');
    reconciler.forget();
    expect(reconciler.applied).toBe(false);
  });

  it('applies again after a failed apply, resetting both ways', async () => {
    const gobgp = recordingGobgp();
    const reconciler = new PolicyReconciler(() => gobgp);
    await reconciler.reconcile(buildRoutingPolicy(base));
    const setPolicies = gobgp.setPolicies;
    gobgp.setPolicies = () => Promise.reject(new Error('gobgpd went away'));
    await expect(reconciler.reconcile(buildRoutingPolicy({ ...base, vips: [] }))).rejects.toThrow('gobgpd went away');
    gobgp.setPolicies = setPolicies;
    gobgp.calls.length = 0;
    expect(await reconciler.reconcile(buildRoutingPolicy({ ...base, vips: [] }))).toBe(true);
    expect(gobgp.calls.at(-1)).toBe('softReset BOTH');
  });

  it('removes the policy for a route reflector server', async () => {
    const gobgp = recordingGobgp();
    const reconciler = new PolicyReconciler(() => gobgp);
    await reconciler.reconcile(buildRoutingPolicy(base));
    gobgp.calls.length = 0;
    expect(await reconciler.reconcile(undefined)).toBe(true);
    expect(gobgp.calls).toEqual(['setPolicies', 'assign IMPORT  ACCEPT', 'assign EXPORT  ACCEPT', 'softReset BOTH']);
    expect(await reconciler.reconcile(undefined)).toBe(false);
  });
});
