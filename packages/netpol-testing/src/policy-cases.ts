import { sample } from '@kube-router/controller/contract';
import { podChainName } from '@kube-router/netpol';
import { expect, it } from 'vitest';
import type { EnforcementContext } from './enforcement-context.js';

/** What policies allow and deny, in both families, through the backend's rules in the kernel. */
export function policyCases(context: EnforcementContext): void {
  const { backend, world, enforcer, otherClientIp, enforce, restart, expectTraffic, enforcePolicies, removePolicies } = context;
  const lab = () => world().lab;

  it('leaves pods that no policy selects open', async () => {
    await enforce();
    await expectTraffic([
      { from: 'web/client', to: 'web/server', port: 80, open: true },
      { from: 'other/client', to: 'web/server', port: 8080, open: true },
      { from: 'web/server', to: 'other/client', port: 80, family: 6, open: true },
    ]);
  });

  it('allows ingress from pods of a podSelector, on the listed port, in both families', async () => {
    const serverFromClient = {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }], ports: [{ port: 80 }] }],
    };
    await enforcePolicies({ 'web/server-from-client': serverFromClient }, [
      { from: 'web/client', to: 'web/server', port: 80, open: true },
      { from: 'web/client', to: 'web/server', port: 80, family: 6, open: true },
      { from: 'web/client', to: 'web/server', port: 8080, open: false },
      { from: 'web/client', to: 'web/server', port: 8080, family: 6, open: false },
      // A podSelector alone selects pods of the policy's own namespace.
      { from: 'other/client', to: 'web/server', port: 80, open: false },
      { from: 'other/client', to: 'web/server', port: 80, family: 6, open: false },
      // Only ingress is isolated: the server still reaches out, and the client is not isolated.
      { from: 'web/server', to: 'other/client', port: 80, open: true },
    ]);
    await removePolicies('web/server-from-client');
    await expectTraffic([{ from: 'other/client', to: 'web/server', port: 80, open: true }]);
  });

  it('allows ingress from namespaces of a namespaceSelector', async () => {
    const serverFromOther = { podSelector: { matchLabels: { app: 'server' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'other' } } }] }] };
    await enforcePolicies({ 'web/server-from-other': serverFromOther }, [
      { from: 'other/client', to: 'web/server', port: 80, open: true },
      { from: 'other/client', to: 'web/server', port: 8080, family: 6, open: true },
      { from: 'web/client', to: 'web/server', port: 80, open: false },
    ]);
    // Relabelling the namespace takes its pods out of the peers.
    world().labelNamespace('other', { team: 'elsewhere' });
    await enforce();
    await expectTraffic([{ from: 'other/client', to: 'web/server', port: 80, open: false }]);
    world().labelNamespace('other', { team: 'other' });
    await removePolicies('web/server-from-other');
  });

  it('allows ingress from an ipBlock minus its except', async () => {
    const serverFromBlock = {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ ipBlock: { cidr: '10.244.0.0/16', except: [`${otherClientIp()}/32`] } }] }],
    };
    await enforcePolicies({ 'web/server-from-block': serverFromBlock }, [
      { from: 'web/client', to: 'web/server', port: 80, open: true },
      { from: 'other/client', to: 'web/server', port: 80, open: false },
      // The block is IPv4: nothing is allowed over IPv6.
      { from: 'web/client', to: 'web/server', port: 80, family: 6, open: false },
    ]);
    await removePolicies('web/server-from-block');
  });

  it('restricts egress to the listed peers and ports', async () => {
    const clientEgress = {
      podSelector: { matchLabels: { app: 'client' } },
      policyTypes: ['Egress'],
      egress: [{ to: [{ podSelector: { matchLabels: { app: 'server' } } }], ports: [{ port: 80, protocol: 'TCP' }] }],
    };
    await enforcePolicies({ 'web/client-egress': clientEgress }, [
      { from: 'web/client', to: 'web/server', port: 80, open: true },
      { from: 'web/client', to: 'web/server', port: 80, family: 6, open: true },
      { from: 'web/client', to: 'web/server', port: 8080, open: false },
      { from: 'web/client', to: 'other/client', port: 80, open: false },
      // Its ingress is not isolated, and replies to allowed connections flow.
      { from: 'other/client', to: 'web/client', port: 80, open: true },
    ]);
    await removePolicies('web/client-egress');
  });

  it('allows a named port only where the target defines it', async () => {
    await enforcePolicies({ 'web/server-http': { podSelector: {}, ingress: [{ ports: [{ port: 'http' }] }] } }, [
      { from: 'other/client', to: 'web/server', port: 80, open: true },
      { from: 'other/client', to: 'web/server', port: 80, family: 6, open: true },
      { from: 'other/client', to: 'web/server', port: 8080, open: false },
      // web/client serves 80 but has no port named http.
      { from: 'other/client', to: 'web/client', port: 80, open: false },
    ]);
    await removePolicies('web/server-http');
  });

  it('enforces a rule whose port ranges overlap', async () => {
    const overlapping = { podSelector: { matchLabels: { app: 'server' } }, ingress: [{ ports: [{ port: 70, endPort: 90 }, { port: 80 }, { port: 85, endPort: 95 }] }] };
    await enforcePolicies({ 'web/overlapping-ports': overlapping }, [
      { from: 'other/client', to: 'web/server', port: 80, open: true },
      { from: 'other/client', to: 'web/server', port: 8080, open: false },
    ]);
    await removePolicies('web/overlapping-ports');
  });

  it('fails the pods of an invalid policy closed, reports it, and still programs the valid ones', async () => {
    world().policy('web', 'broken', { podSelector: { matchLabels: { app: 'client' } }, ingress: [{ from: [{ ipBlock: { cidr: 'not-a-cidr' } }] }] });
    world().policy('web', 'server-from-other', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'other' } } }] }],
    });
    const outcome = await enforce(false);
    expect(outcome.ok).toBe(false);
    expect(String(outcome.error)).toContain('policy/web/broken');
    expect(String(outcome.error)).not.toContain('server-from-other');
    await expectTraffic([
      // Fail closed: even the allowed-looking traffic is dropped.
      { from: 'other/client', to: 'web/client', port: 80, open: false },
      { from: 'web/server', to: 'web/client', port: 80, family: 6, open: false },
      // The valid policy works.
      { from: 'other/client', to: 'web/server', port: 80, open: true },
      { from: 'web/client', to: 'web/server', port: 80, open: false },
    ]);
    await enforcer().kube.events.flush();
    const events = world().api.list('v1', 'Event', 'web') as unknown as { reason?: string; type?: string; involvedObject?: { name?: string } }[];
    expect(events.some((e) => e.reason === 'InvalidNetworkPolicy' && e.type === 'Warning' && e.involvedObject?.name === 'broken')).toBe(true);
    expect(events.some((e) => e.involvedObject?.name === 'server-from-other')).toBe(false);
    expect(await sample(enforcer().metrics, 'kube_router_controller_sync_failures_total', 'netpol')).toBeGreaterThan(0);
    expect((await enforcer().metrics.registry.getSingleMetric('kube_router_netpol_failed_policies')?.get())?.values[0]?.value).toBe(1);

    await removePolicies('web/broken', 'web/server-from-other');
    await expectTraffic([{ from: 'other/client', to: 'web/client', port: 80, open: true }]);
  });

  it('programs both families when an isolated local pod has no IPv6 address', async () => {
    // An API object only (no sandbox): a local pod with an IPv4 address alone, the only target of its policy.
    world().api.create({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { namespace: 'web', name: 'v4-only', labels: { app: 'v4-only' } },
      spec: { nodeName: lab().nodeName, containers: [{ name: 'c', image: 'x' }] },
      status: { phase: 'Running', podIP: '10.250.0.9', podIPs: [{ ip: '10.250.0.9' }] },
    } as never);
    await enforcePolicies(
      {
        'web/v4-only': { podSelector: { matchLabels: { app: 'v4-only' } }, ingress: [] },
        'web/server-isolated': { podSelector: { matchLabels: { app: 'server' } }, ingress: [] },
      },
      [
        { from: 'web/client', to: 'web/server', port: 80, open: false },
        { from: 'web/client', to: 'web/server', port: 80, family: 6, open: false },
      ],
    );
    const ipv6 = await backend.kernel.objects(world().inNode, 'ipv6');
    expect(ipv6).toContain(podChainName('web/server', 'ingress', 'ipv6'));
    expect(ipv6).not.toContain(podChainName('web/v4-only', 'ingress', 'ipv6'));
    world().api.delete('v1', 'Pod', 'web', 'v4-only');
    await removePolicies('web/v4-only', 'web/server-isolated');
  });

  it('denies pods that no policy selects with isolateUnselectedPods', async () => {
    await restart({ options: { isolateUnselectedPods: true } });
    await enforcePolicies({ 'web/allow-all': { podSelector: {}, policyTypes: ['Ingress', 'Egress'], ingress: [{}], egress: [{}] } }, [
      { from: 'web/client', to: 'web/server', port: 80, open: true },
      { from: 'web/client', to: 'web/server', port: 80, family: 6, open: true },
      { from: 'other/client', to: 'web/server', port: 80, open: false },
      { from: 'web/server', to: 'other/client', port: 80, family: 6, open: false },
    ]);
    await removePolicies('web/allow-all');
    await expectTraffic([{ from: 'web/client', to: 'web/server', port: 80, open: false }]);
    await restart();
    await enforce();
  });
}

