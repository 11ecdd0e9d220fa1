import { Mutex, Nft, RecordingRunner } from '@kube-router/netfilter';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { KernelApplier } from './kernel.js';
import type { DesiredState } from './kernel.js';
import { podChainName, policyChainName } from '@kube-router/netpol';
import { renderNode } from './render-node.js';
import { renderPolicy } from './render-policy.js';
import { compileNetworkPolicies } from '@kube-router/netpol';
import type { NetworkPolicyLike } from '@kube-router/netpol';
import { fixturePolicy as policy, smallClusterInput } from '@kube-router/testkit/netpol-conformance';
import type { FixturePod } from '@kube-router/testkit/netpol-conformance';

const smallCluster = (policies: readonly NetworkPolicyLike[], extraPods: readonly FixturePod[] = []) =>
  compileNetworkPolicies(smallClusterInput(policies, extraPods));

// A fake runner beside the real tests of the same path (netpol.real.test.ts, restart.real.test.ts, the conformance
// suite): here the point is exactly which transactions each sync makes and what is in them.
const NODE_OPTIONS = {
  defaultDeny: false,
  podCidrs: [],
  isolateUnselectedPods: false,
  serviceClusterIpRanges: [],
  serviceExternalIpRanges: [],
  serviceLoadBalancerIpRanges: [],
  nodePortRange: '30000-32767',
};

function desiredFor(policies: Parameters<typeof smallCluster>[0]): DesiredState & { failedSeen: Set<string>[] } {
  const model = smallCluster(policies);
  const failedSeen: Set<string>[] = [];
  return {
    policies: model.policies.map((compiled) => renderPolicy(compiled, ['ipv4'])),
    renderNode: (family, failed) => {
      failedSeen.push(new Set(failed));
      return renderNode(model, family, NODE_OPTIONS, failed);
    },
    failedSeen,
  };
}

function applier(runner: RecordingRunner): KernelApplier {
  return new KernelApplier({ families: ['ipv4'], nft: new Nft({ runner, lock: new Mutex() }), logger: pino({ level: 'silent' }) });
}

const a = policy('web/a', { podSelector: { matchLabels: { app: 'server' } }, ingress: [{ from: [{ podSelector: {} }] }] });
const b = policy('web/b', { podSelector: { matchLabels: { app: 'client' } }, ingress: [{ from: [{ podSelector: {} }] }] });
const bFromServer = policy('web/b', {
  podSelector: { matchLabels: { app: 'client' } },
  ingress: [{ from: [{ podSelector: { matchLabels: { app: 'server' } } }] }],
});
const aFromClient = policy('web/a', {
  podSelector: { matchLabels: { app: 'server' } },
  ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }] }],
});
const aFromAllClients = policy('web/a', {
  podSelector: { matchLabels: { app: 'server' } },
  ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: 'client' } } }] }],
});

const transactions = (runner: RecordingRunner) => runner.invocations.filter((i) => i.args.includes('-f')).map((i) => i.input ?? '');

describe('KernelApplier (nftables)', () => {
  it('writes the shared chains, the policies and the dispatch in one transaction, and nothing when nothing changed', async () => {
    const runner = new RecordingRunner();
    const kernel = applier(runner);
    const first = await kernel.apply(desiredFor([a, b]));
    expect(first.transactions).toBe(1);
    const [dispatch = ''] = transactions(runner);
    expect(dispatch.startsWith('add table ip kube-router-filter-ipv4\n')).toBe(true);
    const at = (text: string) => {
      const index = dispatch.indexOf(text);
      expect(index, text).toBeGreaterThanOrEqual(0);
      return index;
    };
    // The default chain and the maps before the policies that go to them, the policies before the pod chains.
    expect(at('add chain ip kube-router-filter-ipv4 KUBE-NWPLCY-DEFAULT')).toBeLessThan(at(`add chain ip kube-router-filter-ipv4 ${policyChainName('web/a', 'ingress', 'ipv4')}`));
    expect(at('add map ip kube-router-filter-ipv4 kube-router-pod-ingress { type ipv4_addr : verdict; }')).toBeLessThan(at(policyChainName('web/b', 'ingress', 'ipv4')));
    expect(at(`add chain ip kube-router-filter-ipv4 ${policyChainName('web/b', 'ingress', 'ipv4')}`)).toBeLessThan(at(`add chain ip kube-router-filter-ipv4 ${podChainName('web/client', 'ingress', 'ipv4')}`));
    expect(dispatch.match(/add chain ip kube-router-filter-ipv4 KUBE-NWPLCY-DEFAULT\n/g)).toHaveLength(1);
    expect(dispatch).toContain(`add element ip kube-router-filter-ipv4 kube-router-pod-ingress { 10.0.0.2 : jump ${podChainName('web/server', 'ingress', 'ipv4')}`);
    // Pod chains before the map elements that jump to them, base chains last.
    const text = dispatch ?? '';
    expect(text.indexOf(`add chain ip kube-router-filter-ipv4 ${podChainName('web/server', 'ingress', 'ipv4')}`)).toBeLessThan(text.indexOf('kube-router-pod-ingress { 10.0.0.2'));
    expect(text.lastIndexOf('KUBE-ROUTER-OUTPUT')).toBeGreaterThan(text.indexOf('kube-router-pod-ingress { 10.0.0.2'));

    runner.invocations.length = 0;
    const again = await kernel.apply(desiredFor([a, b]));
    expect(again.transactions).toBe(0);
  });

  it('changes set membership with element adds and deletes, without rewriting chains', async () => {
    const runner = new RecordingRunner();
    const kernel = applier(runner);
    await kernel.apply(desiredFor([aFromAllClients]));
    runner.invocations.length = 0;
    await kernel.apply(desiredFor([aFromClient]));
    const [script] = transactions(runner);
    // The set is named by the rule's position and ports, not its peers: other peers are other members of it.
    expect(script).toMatch(/^delete element ip kube-router-filter-ipv4 KUBE-SRC-[0-9A-F]{16} \{ 10\.0\.1\.3 \}$/m);
    expect(script).not.toContain('flush chain');
    expect(transactions(runner)).toHaveLength(1);
  });

  it('adds a chain the kernel does not hold without flushing it, and flushes a chain it replaces', async () => {
    const runner = new RecordingRunner();
    const kernel = applier(runner);
    const aFromAnyone = policy('web/a', { podSelector: { matchLabels: { app: 'server' } }, ingress: [{}] });
    await kernel.apply(desiredFor([aFromAnyone]));
    expect(transactions(runner)[0]).not.toContain('flush chain');
    runner.invocations.length = 0;
    await kernel.apply(desiredFor([aFromClient]));
    const chain = policyChainName('web/a', 'ingress', 'ipv4');
    expect(transactions(runner)[0]).toContain(`add chain ip kube-router-filter-ipv4 ${chain}\nflush chain ip kube-router-filter-ipv4 ${chain}\n`);
  });

  it('skips a policy it wrote while its render is the same object, and compares it again after reading the kernel back', async () => {
    const runner = new RecordingRunner();
    const kernel = applier(runner);
    const desired = desiredFor([a, b]);
    await kernel.apply(desired);
    runner.invocations.length = 0;
    expect((await kernel.apply(desired)).transactions).toBe(0);
    // The kernel read back is empty (the recording runner lists nothing): the same renders are written again.
    kernel.invalidate();
    const again = await kernel.apply(desired);
    expect(again.transactions).toBe(1);
    expect(transactions(runner)[0]).toContain(`add chain ip kube-router-filter-ipv4 ${policyChainName('web/b', 'ingress', 'ipv4')}`);
  });

  it('halves a refused transaction until the refused policy is alone, fails its pods closed and programs the rest', async () => {
    const refused = policyChainName('web/b', 'ingress', 'ipv4');
    const runner = new RecordingRunner().on(
      (spec) => (spec.args ?? []).includes('-f') && (spec.input ?? '').includes(`add chain ip kube-router-filter-ipv4 ${refused}`),
      { exitCode: 1, stderr: 'Error: Could not process rule: Too many open files in system' },
    );
    const kernel = applier(runner);
    const desired = desiredFor([a, b]);
    const result = await kernel.apply(desired);
    expect([...result.failedPolicies.keys()]).toEqual(['web/b']);
    expect(String(result.failedPolicies.get('web/b'))).toContain('Too many open files');
    expect(desired.failedSeen.at(-1)).toEqual(new Set(['web/b']));
    const written = transactions(runner);
    // Everything at once (refused), then in steps: the shared chains, the policies (refused), a alone (committed),
    // b alone (refused), the dispatch.
    expect(written).toHaveLength(6);
    expect(written[3]).toContain(policyChainName('web/a', 'ingress', 'ipv4'));
    expect(written[5]).toContain(podChainName('web/client', 'ingress', 'ipv4'));
    expect(written[5]).not.toContain(`jump ${refused}`);
  });

  it('deletes what nothing refers to any more: pod chains before policy chains, then sets', async () => {
    const runner = new RecordingRunner();
    const kernel = applier(runner);
    await kernel.apply(desiredFor([bFromServer]));
    runner.invocations.length = 0;
    const result = await kernel.apply(desiredFor([]));
    const [dispatch, stale] = transactions(runner);
    expect(dispatch).toContain('delete element ip kube-router-filter-ipv4 kube-router-pod-ingress { 10.0.0.3 }');
    const lines = stale?.trim().split('\n') ?? [];
    expect(lines).toEqual([
      `delete chain ip kube-router-filter-ipv4 ${podChainName('web/client', 'ingress', 'ipv4')}`,
      `delete chain ip kube-router-filter-ipv4 ${policyChainName('web/b', 'ingress', 'ipv4')}`,
      expect.stringMatching(/^delete set ip kube-router-filter-ipv4 KUBE-SRC-[0-9A-F]{16}$/),
    ]);
    expect(result.deleted).toBe(3);
  });
});
