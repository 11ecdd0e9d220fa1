import { Registry } from 'prom-client';
import { describe, expect, it, vi } from 'vitest';
import type { LocalPod, PolicyModel } from '../model.js';
import { TAIL_CHAIN, podChainName, policyChainName } from './names.js';
import { VerdictCounters } from './verdict-counters.js';
import type { ChainVerdictCounter } from './verdict-counters.js';

const isolated = (policies: string[], failClosed = false) => ({ isolated: true, failClosed, policies });
const open = { isolated: false, failClosed: false, policies: [] };

/** Only what the counters read of a model: policy ids and directions, pods and what isolates them. */
function model(pods: Partial<LocalPod>[]): PolicyModel {
  return {
    policies: [
      { id: 'web/a', namespace: 'web', name: 'a', ingress: { isolates: true }, egress: { isolates: false } },
      { id: 'web/b', namespace: 'web', name: 'b', ingress: { isolates: true }, egress: { isolates: true } },
    ],
    pods: pods.map((pod) => ({ ingress: open, egress: open, ...pod })),
  } as unknown as PolicyModel;
}

const server = { id: 'web/server', namespace: 'web', name: 'server', ingress: isolated(['web/a', 'web/b']), egress: isolated(['web/b']) };

function setUp(read: () => Promise<readonly ChainVerdictCounter[]>) {
  const registry = new Registry();
  const warn = vi.fn();
  const counters = new VerdictCounters(registry, read, { cacheMs: 0, logger: { warn } });
  const value = async (name: string, labels: Record<string, string>) => {
    const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
    return values.find((entry) => Object.entries(labels).every(([key, wanted]) => entry.labels[key] === wanted))?.value;
  };
  return { registry, counters, warn, value };
}

describe('VerdictCounters', () => {
  it('counts a pod chain reject for every policy isolating the pod, and once per namespace', async () => {
    const { counters, value } = setUp(async () => [
      { family: 'ipv4', chain: podChainName('web/server', 'ingress', 'ipv4'), verdict: 'reject', packets: 5, bytes: 300 },
      { family: 'ipv6', chain: podChainName('web/server', 'ingress', 'ipv6'), verdict: 'reject', packets: 1, bytes: 80 },
      { family: 'ipv4', chain: policyChainName('web/a', 'ingress', 'ipv4'), verdict: 'allow', packets: 3, bytes: 180 },
      { family: 'ipv4', chain: TAIL_CHAIN, verdict: 'reject', direction: 'egress', packets: 2, bytes: 120 },
    ]);
    counters.update(model([server]), new Set());
    const rejected = { direction: 'ingress', verdict: 'reject' };
    expect(await value('kube_router_netpol_policy_packets_total', { policy: 'a', ...rejected })).toBe(6);
    expect(await value('kube_router_netpol_policy_packets_total', { policy: 'b', ...rejected })).toBe(6);
    expect(await value('kube_router_netpol_policy_bytes_total', { policy: 'a', ...rejected })).toBe(380);
    expect(await value('kube_router_netpol_policy_packets_total', { policy: 'a', direction: 'ingress', verdict: 'allow' })).toBe(3);
    expect(await value('kube_router_netpol_rejected_packets_total', { namespace: 'web', direction: 'ingress', reason: 'no_policy_allows' })).toBe(6);
    expect(await value('kube_router_netpol_rejected_packets_total', { direction: 'egress', reason: 'default_deny' })).toBe(2);
  });

  it('stays monotonic: adds increases, and the whole count of a rule written again (new generation or lower value)', async () => {
    const chain = podChainName('web/server', 'egress', 'ipv4');
    let read = { packets: 5, bytes: 300, generation: 1 };
    const { counters, value } = setUp(async () => [{ family: 'ipv4', chain, verdict: 'reject', ...read }]);
    counters.update(model([server]), new Set());
    const total = () => value('kube_router_netpol_policy_packets_total', { policy: 'b', direction: 'egress', verdict: 'reject' });
    expect(await total()).toBe(5);
    read = { packets: 7, bytes: 420, generation: 1 };
    expect(await total()).toBe(7);
    // Written again, and counted more since than before: a comparison of values alone would add 1.
    read = { packets: 8, bytes: 480, generation: 2 };
    expect(await total()).toBe(15);
    // The same generation but a lower value (written by someone else, or no generation known): written again.
    read = { packets: 2, bytes: 120, generation: 2 };
    expect(await total()).toBe(17);
  });

  it('names fail-closed pods and pods no policy selects, and skips chains of pods the last sync did not know', async () => {
    const { counters, value } = setUp(async () => [
      { family: 'ipv4', chain: podChainName('web/server', 'ingress', 'ipv4'), verdict: 'reject', packets: 4, bytes: 240 },
      { family: 'ipv4', chain: podChainName('web/lonely', 'egress', 'ipv4'), verdict: 'reject', packets: 2, bytes: 120 },
      { family: 'ipv4', chain: podChainName('web/gone', 'egress', 'ipv4'), verdict: 'reject', packets: 9, bytes: 540 },
    ]);
    counters.update(model([server, { id: 'web/lonely', namespace: 'web', name: 'lonely' }]), new Set(['web/a']));
    expect(await value('kube_router_netpol_rejected_packets_total', { direction: 'ingress', reason: 'fail_closed' })).toBe(4);
    expect(await value('kube_router_netpol_rejected_packets_total', { direction: 'egress', reason: 'no_policy_selects' })).toBe(2);
    expect(await value('kube_router_netpol_policy_packets_total', { policy: 'a', direction: 'ingress', verdict: 'reject' })).toBe(4);
    // web/gone's 9 rejects: no pod of the last sync owns the chain.
    expect(await value('kube_router_netpol_rejected_packets_total', { reason: 'no_policy_allows' })).toBeUndefined();
  });

  it('keeps the last values when a read fails, logs it, and never fails the scrape', async () => {
    let fail = false;
    const { registry, counters, warn, value } = setUp(async () => {
      if (fail) throw new Error('iptables-save: timed out');
      return [{ family: 'ipv4', chain: podChainName('web/server', 'ingress', 'ipv4'), verdict: 'reject', packets: 3, bytes: 180 }];
    });
    counters.update(model([server]), new Set());
    expect(await value('kube_router_netpol_rejected_packets_total', { reason: 'no_policy_allows' })).toBe(3);
    fail = true;
    await expect(registry.metrics()).resolves.toContain('kube_router_netpol_rejected_packets_total{namespace="web",direction="ingress",reason="no_policy_allows"} 3');
    expect(warn).toHaveBeenCalledWith(expect.objectContaining({ err: expect.any(Error) }), expect.stringMatching(/keep their last values/));
  });

  it('removes the series of policies and namespaces the last sync no longer knows', async () => {
    const { registry, counters, value } = setUp(async () => [
      { family: 'ipv4', chain: podChainName('web/server', 'ingress', 'ipv4'), verdict: 'reject', packets: 5, bytes: 300 },
      { family: 'ipv4', chain: policyChainName('web/a', 'ingress', 'ipv4'), verdict: 'allow', packets: 3, bytes: 180 },
      { family: 'ipv4', chain: policyChainName('web/b', 'egress', 'ipv4'), verdict: 'allow', packets: 2, bytes: 120 },
      { family: 'ipv4', chain: TAIL_CHAIN, verdict: 'reject', direction: 'egress', packets: 1, bytes: 60 },
    ]);
    counters.update(model([server]), new Set());
    const policies = async () =>
      ((await registry.getSingleMetric('kube_router_netpol_policy_bytes_total')?.get())?.values ?? []).map((entry) => `${entry.labels.policy}/${entry.labels.direction}/${entry.labels.verdict}`).sort();
    const rejected = async () => ((await registry.getSingleMetric('kube_router_netpol_rejected_packets_total')?.get())?.values ?? []).map((entry) => entry.labels.namespace).sort();
    expect(await policies()).toEqual(['a/ingress/allow', 'a/ingress/reject', 'b/egress/allow', 'b/ingress/reject']);
    expect(await rejected()).toEqual(['', 'web']);

    // web/b deleted: its series go (every direction and verdict counted), web/a's stay, the pod's namespace stays.
    const onlyA = { ...model([]), policies: model([]).policies.filter((policy) => policy.id === 'web/a') } as PolicyModel;
    counters.update(onlyA, new Set());
    expect(await policies()).toEqual(['a/ingress/allow', 'a/ingress/reject']);
    expect(await value('kube_router_netpol_policy_packets_total', { policy: 'a', direction: 'ingress', verdict: 'allow' })).toBe(3);
    expect(await rejected()).toEqual(['', 'web']);

    // Namespace web gone: nothing of it is left; the default-deny series (no namespace) stays.
    counters.update({ ...model([]), policies: [] } as unknown as PolicyModel, new Set());
    expect(await policies()).toEqual([]);
    expect(await rejected()).toEqual(['']);
    expect(await value('kube_router_netpol_rejected_packets_total', { namespace: '', direction: 'egress' })).toBe(1);
  });

  it('runs one read for scrapes within the cache time, and one at a time', async () => {
    let reads = 0;
    const registry = new Registry();
    const counters = new VerdictCounters(
      registry,
      async () => {
        reads++;
        await new Promise((resolve) => setTimeout(resolve, 20));
        return [];
      },
      { cacheMs: 60_000, logger: { warn: () => undefined } },
    );
    await Promise.all([registry.metrics(), registry.metrics(), counters.refresh()]);
    await registry.metrics();
    expect(reads).toBe(1);
  });
});
