import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { sample } from '@kube-router/controller/contract';
import type { ApiServer } from '@kube-router/testkit';
import { REQUESTED_IPS_ANNOTATION } from './plan.js';
import { FENCE_CONDITION } from './status-writer.js';
import {
  createTestAgent,
  ingressOf,
  LEASE_DURATION_MS,
  loadBalancer,
  startCluster,
  waitFor,
  type TestAgent,
} from './testing/harness.js';

let server: ApiServer | undefined;
let agents: TestAgent[] = [];

afterEach(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  agents = [];
  await server?.close();
  server = undefined;
});

async function cluster(...configs: { identity: string; ranges: string[]; defaultClass?: boolean }[]) {
  const started = await startCluster();
  server = started.server;
  agents = configs.map((c) => createTestAgent(started.kubeconfig, c.identity, { ranges: c.ranges, defaultClass: c.defaultClass ?? true }));
  for (const agent of agents) await agent.start();
  return { server: started.server, agents };
}

function allIngress(s: ApiServer): string[] {
  return s.list('v1', 'Service').flatMap((svc) => ingressOf(s, svc.metadata.name ?? '', svc.metadata.namespace ?? 'default'));
}

type EventLike = { reason?: string; message?: string; type?: string; involvedObject?: { name?: string } };
function eventsFor(s: ApiServer, name: string): EventLike[] {
  return (s.list('v1', 'Event', 'default') as EventLike[]).filter((e) => e.involvedObject?.name === name);
}

describe('lballoc against the embedded API server', () => {
  it('lets only the leader write; after the leader stops the other takes over within the lease and never doubles an address', async () => {
    const { server: s, agents: [a, b] } = await cluster(
      { identity: 'agent-a', ranges: ['10.10.0.0/28'] },
      { identity: 'agent-b', ranges: ['10.10.0.0/28'] },
    );
    await waitFor('a leader', () => a!.isLeader() || b!.isLeader());
    let bothLed = 0;
    const sampler = setInterval(() => {
      if (a!.isLeader() && b!.isLeader()) bothLed++;
    }, 5);
    try {
      for (let i = 0; i < 5; i++) s.create(loadBalancer(`before-${i}`));
      await waitFor('5 services served', () => allIngress(s).length === 5);

      const [leader, follower] = a!.isLeader() ? [a!, b!] : [b!, a!];
      const before = [0, 1, 2, 3, 4].map((i) => `before-${i}`);
      const servedBefore = before.map((name) => ingressOf(s, name));
      const stoppedAt = Date.now();
      await leader.stop();
      agents = agents.filter((x) => x !== leader);
      await waitFor('the follower to lead', () => follower.isLeader(), LEASE_DURATION_MS + 500);
      expect(Date.now() - stoppedAt).toBeLessThan(LEASE_DURATION_MS);

      for (let i = 0; i < 5; i++) s.create(loadBalancer(`after-${i}`));
      await waitFor('10 services served', () => allIngress(s).length === 10);
      await new Promise((r) => setTimeout(r, 600)); // a further periodic walk must change nothing

      const ips = allIngress(s);
      expect(new Set(ips).size).toBe(10);
      for (const ip of ips) expect(ip).toMatch(/^10\.10\.0\.\d+$/);
      for (const agent of [a!, b!]) expect(agent.writes.filter((w) => !w.leading)).toEqual([]);
      // The follower fenced the Services it took over (a status write each) but moved none of their addresses.
      expect(before.map((name) => ingressOf(s, name))).toEqual(servedBefore);
      expect(bothLed).toBe(0);
    } finally {
      clearInterval(sampler);
    }
  });

  it('fences a deposed leader: its write that arrives after the takeover is refused, and no address is ever held twice', async () => {
    // One free address, so the deposed leader's late write and the new leader's plan contest it.
    const range = '10.20.0.1-10.20.0.1';
    const { server: s, agents: [a, b] } = await cluster({ identity: 'agent-a', ranges: [range] }, { identity: 'agent-b', ranges: [range] });
    await waitFor('a leader', () => a!.isLeader() || b!.isLeader());
    const [old, next] = a!.isLeader() ? [a!, b!] : [b!, a!];
    // Older than `pending`, and not ours yet: the old leader plans without it.
    s.create(loadBalancer('elder', { type: 'ClusterIP' }));
    await new Promise((r) => setTimeout(r, 20));

    // The old leader plans pending -> 10.20.0.1 and sends the write, which the network holds.
    let releaseLateWrite!: () => void;
    const lateWriteHeld = new Promise<void>((resolve) => (releaseLateWrite = resolve));
    let lateWriteSent!: () => void;
    const sent = new Promise<void>((resolve) => (lateWriteSent = resolve));
    old.beforeWrite = async (service) => {
      if (service !== 'default/pending') return;
      lateWriteSent();
      await lateWriteHeld;
    };
    s.create(loadBalancer('pending'));
    await sent;

    // Never two holders of the address, sampled from before the takeover to the end.
    let doubleSeen = false;
    const sampler = setInterval(() => {
      if (ingressOf(s, 'pending').length > 0 && ingressOf(s, 'elder').length > 0) doubleSeen = true;
    }, 2);
    onTestFinished(() => clearInterval(sampler));
    // The old leader dies with its write in flight; the elder now asks for the contested address.
    const crashedAt = Date.now();
    await old.crash();
    s.patch('v1', 'Service', 'default', 'elder', {
      spec: { type: 'LoadBalancer' },
      metadata: { annotations: { [REQUESTED_IPS_ANNOTATION]: '10.20.0.1' } },
    });

    // The worst moment for the late write: the new leader has fenced, listed and planned, and its allocation write is
    // going out.
    let lateWriteLanded = false;
    next.beforeWrite = async (service, ingress) => {
      if (service !== 'default/elder' || ingress.length === 0 || lateWriteLanded) return;
      releaseLateWrite();
      await new Promise((r) => setTimeout(r, 200));
      lateWriteLanded = true;
    };
    await waitFor('the new leader to lead', () => next.isLeader(), LEASE_DURATION_MS + 2_000);
    // Within the lease duration plus one retry period with its jitter (and a loaded machine's slack).
    expect(Date.now() - crashedAt).toBeLessThan(LEASE_DURATION_MS + 200 * 2.2 + 1_500);

    await waitFor('the elder served', () => ingressOf(s, 'elder').join() === '10.20.0.1');
    await waitFor('the late write to be answered', () => lateWriteLanded && old.writes.some((w) => w.service === 'default/pending' && w.answer !== undefined));
    // The API server refused it (409: the fence moved the Service on), and the deposed leader did not try again.
    expect(old.writes.filter((w) => w.service === 'default/pending').map((w) => w.answer)).toEqual([409]);
    expect(doubleSeen).toBe(false);
    clearInterval(sampler);
    const fence = (s.get('v1', 'Service', 'default', 'pending') as { status?: { conditions?: { type: string; message?: string }[] } })
      .status?.conditions?.find((c) => c.type === FENCE_CONDITION);
    expect(fence?.message).toBe(`addresses allocated by ${next.identity}`);
  });

  it('keeps every replica beating and syncing while it is not the leader', async () => {
    const { agents: [a, b] } = await cluster(
      { identity: 'agent-a', ranges: ['10.10.0.0/28'] },
      { identity: 'agent-b', ranges: ['10.10.0.0/28'] },
    );
    await waitFor('a leader', () => a!.isLeader() || b!.isLeader());
    const follower = a!.isLeader() ? b! : a!;
    const before = follower.health.status('lballoc')?.beats ?? 0;
    await waitFor('the follower to sync twice more', () => (follower.health.status('lballoc')?.beats ?? 0) >= before + 4, 3_000);
    expect(follower.health.livenessChecks()).toEqual([{ name: 'lballoc', ok: true }]);
    expect(await sample(follower.metrics, 'kube_router_controller_sync_last_success', 'lballoc')).toBeGreaterThan(0);
  });

  it('reports an exhausted pool as an event and a failed sync, then serves the waiting Service once an address is released', async () => {
    const { server: s, agents: [a] } = await cluster({ identity: 'solo', ranges: ['10.20.0.0/31'] });
    await waitFor('leader', () => a!.isLeader());
    s.create(loadBalancer('one'));
    s.create(loadBalancer('two'));
    await waitFor('two served', () => allIngress(s).length === 2);
    s.create(loadBalancer('three'));
    await waitFor('an exhaustion event', () =>
      eventsFor(s, 'three').some((e) => e.reason === 'LoadBalancerIPAllocationFailed' && /IPv4 pool is exhausted/.test(e.message ?? '')),
    );
    expect(eventsFor(s, 'three')[0]?.type).toBe('Warning');
    expect(await sample(a!.metrics, 'kube_router_controller_sync_failures_total', 'lballoc')).toBeGreaterThan(0);

    const freed = ingressOf(s, 'one');
    s.delete('v1', 'Service', 'default', 'one');
    await waitFor('three served with the released address', () => ingressOf(s, 'three').join() === freed.join());
  });

  it('releases the addresses of a Service that changes type, and reuses them', async () => {
    const { server: s, agents: [a] } = await cluster({ identity: 'solo', ranges: ['10.30.0.0/32'] });
    await waitFor('leader', () => a!.isLeader());
    s.create(loadBalancer('lb'));
    await waitFor('lb served', () => ingressOf(s, 'lb').length === 1);
    const svc = s.get('v1', 'Service', 'default', 'lb')!;
    s.update({ ...svc, spec: { ...(svc.spec as object), type: 'ClusterIP' } } as typeof svc);
    await waitFor('lb released', () => ingressOf(s, 'lb').length === 0);
    s.create(loadBalancer('next'));
    await waitFor('next served', () => ingressOf(s, 'next').join() === '10.30.0.0');
  });

  it('allocates both families to dual-stack Services and fails RequireDualStack when a family is exhausted', async () => {
    const { server: s, agents: [a] } = await cluster({ identity: 'solo', ranges: ['10.40.0.0/31', '2001:db8:40::/127'] });
    await waitFor('leader', () => a!.isLeader());
    s.create(loadBalancer('dual', { ipFamilyPolicy: 'RequireDualStack', ipFamilies: ['IPv4', 'IPv6'] }));
    s.create(loadBalancer('v6', { ipFamilyPolicy: 'SingleStack', ipFamilies: ['IPv6'] }));
    await waitFor('both served', () => ingressOf(s, 'dual').length === 2 && ingressOf(s, 'v6').length === 1);
    expect(ingressOf(s, 'dual').sort()).toEqual(['10.40.0.0', '2001:db8:40::']);
    expect(ingressOf(s, 'v6')).toEqual(['2001:db8:40::1']);
    s.create(loadBalancer('dual-too', { ipFamilyPolicy: 'RequireDualStack', ipFamilies: ['IPv4', 'IPv6'] }));
    await waitFor('a failure event', () => eventsFor(s, 'dual-too').some((e) => /IPv6 pool is exhausted/.test(e.message ?? '')));
    expect(ingressOf(s, 'dual-too')).toEqual([]);
  });

  it('serves classes as kube-router does, and honours and reports requested addresses', async () => {
    const { server: s, agents: [a] } = await cluster({ identity: 'solo', ranges: ['10.50.0.0/28'], defaultClass: false });
    await waitFor('leader', () => a!.isLeader());
    s.create(loadBalancer('no-class'));
    s.create(loadBalancer('ours', { loadBalancerClass: 'kube-router', loadBalancerIP: '10.50.0.9' }));
    await waitFor('ours served', () => ingressOf(s, 'ours').join() === '10.50.0.9');
    s.create(loadBalancer('clash', { loadBalancerClass: 'kube-router' }, { annotations: { [REQUESTED_IPS_ANNOTATION]: '10.50.0.9' } }));
    await waitFor('a clash event', () => eventsFor(s, 'clash').some((e) => e.message === 'requested address 10.50.0.9 is in use by default/ours'));
    await new Promise((r) => setTimeout(r, 300));
    expect(ingressOf(s, 'no-class')).toEqual([]);
    expect(ingressOf(s, 'clash')).toEqual([]);
  });

  it('turns an invalid range into events and failed syncs instead of a crash', async () => {
    const { server: s, agents: [a] } = await cluster({ identity: 'solo', ranges: ['10.60.0.1/24'] });
    await waitFor('leader', () => a!.isLeader());
    s.create(loadBalancer('waiting'));
    await waitFor('an invalid-range event', () =>
      eventsFor(s, 'waiting').some((e) => e.reason === 'InvalidLoadBalancerIPRange' && /host bits set/.test(e.message ?? '')),
    );
    expect(await sample(a!.metrics, 'kube_router_controller_sync_failures_total', 'lballoc')).toBeGreaterThan(0);
    expect(a!.health.livenessChecks()[0]?.ok).toBe(true);
  });

  it('cancels an API request that never answers when its sync times out, so the next sync is not held', async () => {
    const started = await startCluster();
    server = started.server;
    const a = createTestAgent(started.kubeconfig, 'solo', { ranges: ['10.80.0.0/28'], syncTimeoutMs: 300 });
    agents = [a];
    await a.start({ scheduler: false });
    await waitFor('leader', () => a.isLeader());
    server.faults.setLatency(20_000);
    const hung = await a.controller.runObservedSync('test');
    server.faults.setLatency(0);
    expect(hung.ok).toBe(false);
    server.create(loadBalancer('after'));
    await waitFor('leader', () => a.isLeader());
    const begun = performance.now();
    const next = await a.controller.runObservedSync('test');
    expect(next.ok, next.ok ? '' : String(next.error)).toBe(true);
    expect(performance.now() - begun).toBeLessThan(3_000);
    expect(ingressOf(server, 'after')).toEqual(['10.80.0.0']);
  });

  it('retries a status update that conflicts (409) and still writes it', async () => {
    const started = await startCluster();
    server = started.server;
    const a = createTestAgent(started.kubeconfig, 'solo', { ranges: ['10.70.0.0/28'] });
    agents = [a];
    await a.start({ scheduler: false });
    await waitFor('leader', () => a.isLeader());
    server.create(loadBalancer('contested'));
    // The first status write of this walk meets a newer resourceVersion, as when someone labels the Service meanwhile.
    server.faults.failNextRequest('update', 'services', 409);
    const outcome = await a.controller.runObservedSync('test');
    expect(outcome.ok, outcome.ok ? '' : String(outcome.error)).toBe(true);
    expect(ingressOf(server, 'contested')).toEqual(['10.70.0.0']);
    expect(a.writes.filter((w) => w.service === 'default/contested')).toHaveLength(2);
  });

  it('fails each malformed Service alone, with its own event and failure, and serves the others', async () => {
    const started = await startCluster();
    server = started.server;
    const a = createTestAgent(started.kubeconfig, 'solo', { ranges: ['10.60.0.0/29'] });
    agents = [a];
    await a.start({ scheduler: false });
    await waitFor('leader', () => a.isLeader());
    // Stored as they are, as an API server without validation (or an old object) would hand them out.
    const lax = { validate: false };
    server.create({ ...loadBalancer('null-ingress'), status: { loadBalancer: { ingress: [null, { ip: '10.60.0.0' }] } } }, lax);
    server.create(loadBalancer('scalar-external-ips', { externalIPs: 5 }), lax);
    server.create(loadBalancer('numeric-ip', { loadBalancerIP: 7 }), lax);
    server.create(loadBalancer('good-1'));
    server.create(loadBalancer('good-2'));
    const outcome = await a.controller.runObservedSync('test');
    expect(outcome.ok).toBe(false);
    const message = outcome.ok ? '' : String(outcome.error);
    for (const name of ['null-ingress', 'scalar-external-ips', 'numeric-ip']) {
      expect(message).toContain(`service/default/${name}`);
      await waitFor(`an event on ${name}`, () =>
        eventsFor(server!, name).some((e) => e.reason === 'LoadBalancerIPAllocationFailed' && /cannot be read/.test(e.message ?? '')),
      );
    }
    expect(message).not.toContain('good-');
    // The readable address of the malformed Service stays held: nobody else gets 10.60.0.0.
    expect([...ingressOf(server, 'good-1'), ...ingressOf(server, 'good-2')].sort()).toEqual(['10.60.0.1', '10.60.0.2']);
  });
});
