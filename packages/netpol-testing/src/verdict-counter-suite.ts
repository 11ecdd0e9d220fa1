import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NetpolTestBackend } from './backend.js';
import { waitFor } from '@kube-router/testkit';
import type { TestEnforcer } from './enforcer.js';
import type { HarnessEnforcer } from './harness.js';
import { addServerAndClients, missingForRealTests, startWorld } from './world.js';
import type { World } from './world.js';

type Labels = Record<string, string>;
type Series = readonly [name: string, labels: Labels];
const series = (name: string, labels: Labels): Series => [name, labels];

/** The value of one series of a counter of the enforcer's registry (0 when it has none yet): a scrape of it. */
async function counterValue(enforcer: HarnessEnforcer, name: string, labels: Labels): Promise<number> {
  const values = (await enforcer.metrics.registry.getSingleMetric(name)?.get())?.values ?? [];
  const series = values.find((value) => Object.entries(labels).every(([key, wanted]) => value.labels[key] === wanted));
  return series?.value ?? 0;
}

/** Probes `to`:80 over IPv4 `count` times, one connect after the other; resolves with how many connected. */
async function probeTimes(world: World, from: string, to: string, count: number): Promise<number> {
  let connected = 0;
  for (let attempt = 0; attempt < count; attempt++) {
    if (await world.lab.probe(from, to, 80, 'TCP', { family: 4, timeoutMs: 2_000 })) connected++;
  }
  return connected;
}

/**
 * kube_router_netpol_policy_{packets,bytes}_total and kube_router_netpol_rejected_{packets,bytes}_total against real
 * traffic in a lab node: each blocked TCP connect is one packet (the reject answers the SYN with an ICMP port
 * unreachable, which ends the connect at once: no retransmit, with the node's ICMP rate limit off), and each allowed connect is one packet through the
 * policy's accepting rule (the rest of the connection is accepted as established before any policy).
 */
export function runNetpolVerdictCounterSuite(backend: NetpolTestBackend): void {
  const missing = missingForRealTests(backend);
  describe.skipIf(missing !== undefined)(`netpol-${backend.name} verdict counters in a lab node${missing ? ` (skipped: ${missing})` : ''}`, () => {
    let world: World;
    let enforcer: TestEnforcer;

    const enforce = async () => {
      const outcome = await enforcer.syncNow();
      expect(outcome.ok, String(outcome.error)).toBe(true);
    };
    /** Reads every counter of the case at once (one scrape), waiting out the read cache first. */
    const scrape = async <K extends string>(wanted: Record<K, Series>): Promise<Record<K, number>> => {
      await new Promise((resolve) => setTimeout(resolve, 2_100));
      const read = {} as Record<K, number>;
      for (const key of Object.keys(wanted) as K[]) read[key] = await counterValue(enforcer, wanted[key][0], wanted[key][1]);
      return read;
    };

    beforeAll(async () => {
      world = await startWorld(backend);
      await addServerAndClients(world);
      // The node answers a rejected SYN with an ICMP error, which the kernel rate-limits per destination (1/s after a
      // burst of 6): an unanswered SYN is sent again a second later, a second rejected packet of the same connect. The
      // counters count it (they count packets); here every reject is answered, so that N connects are N packets.
      await world.inNode('sysctl', ['-qw', 'net.ipv4.icmp_ratelimit=0']);
      enforcer = await world.start({ scheduler: false });
      await enforce();
    }, 90_000);

    afterAll(async () => {
      await world?.close();
    }, 60_000);

    it('counts each connect a policy rejects and each it allows, per policy and direction (ingress)', async () => {
      world.policy('web', 'server-from-client', {
        podSelector: { matchLabels: { app: 'server' } },
        ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }] }],
      });
      await enforce();
      const policy = { namespace: 'web', policy: 'server-from-client', direction: 'ingress' };
      const wanted = {
        rejected: series('kube_router_netpol_policy_packets_total', { ...policy, verdict: 'reject' }),
        rejectedBytes: series('kube_router_netpol_policy_bytes_total', { ...policy, verdict: 'reject' }),
        allowed: series('kube_router_netpol_policy_packets_total', { ...policy, verdict: 'allow' }),
        inNamespace: series('kube_router_netpol_rejected_packets_total', { namespace: 'web', direction: 'ingress', reason: 'no_policy_allows' }),
      };
      const before = await scrape(wanted);

      const [blocked, allowed] = [5, 3];
      // other/client is in another namespace: the policy's podSelector does not reach it.
      expect(await probeTimes(world, 'other/client', 'web/server', blocked)).toBe(0);
      expect(await probeTimes(world, 'web/client', 'web/server', allowed)).toBe(allowed);

      const after = await scrape(wanted);
      expect(after.rejected - before.rejected).toBe(blocked);
      expect(after.allowed - before.allowed).toBe(allowed);
      expect(after.inNamespace - before.inNamespace).toBe(blocked);
      // A TCP SYN over IPv4 is at least 60 bytes (20 IP, 40 TCP with options).
      expect(after.rejectedBytes - before.rejectedBytes).toBeGreaterThanOrEqual(blocked * 40);
      console.log(await scrapeText(enforcer, 'kube_router_netpol_(policy|rejected)_'));
      world.deletePolicy('web', 'server-from-client');
      await enforce();
    }, 60_000);

    it('counts egress rejects for the policy that isolates the sender, and keeps counting across a rewritten pod chain', async () => {
      world.policy('web', 'client-to-server', {
        podSelector: { matchLabels: { app: 'client' } },
        policyTypes: ['Egress'],
        egress: [{ to: [{ podSelector: { matchLabels: { app: 'server' } } }] }],
      });
      await enforce();
      const policy = { namespace: 'web', policy: 'client-to-server', direction: 'egress' };
      const wanted = {
        rejected: series('kube_router_netpol_policy_packets_total', { ...policy, verdict: 'reject' }),
        allowed: series('kube_router_netpol_policy_packets_total', { ...policy, verdict: 'allow' }),
        second: series('kube_router_netpol_policy_packets_total', { namespace: 'web', policy: 'client-to-nothing', direction: 'egress', verdict: 'reject' }),
      };
      const before = await scrape(wanted);
      expect(await probeTimes(world, 'web/client', 'other/client', 5)).toBe(0);
      expect(await probeTimes(world, 'web/client', 'web/server', 2)).toBe(2);
      const middle = await scrape(wanted);
      expect(middle.rejected - before.rejected).toBe(5);
      expect(middle.allowed - before.allowed).toBe(2);

      // A second policy isolating the client rewrites its pod chain (the kernel's counter starts again at 0). More
      // rejects than before the rewrite: a count that only compared values would take 6 after 5 as one more.
      world.policy('web', 'client-to-nothing', { podSelector: { matchLabels: { app: 'client' } }, policyTypes: ['Egress'] });
      await enforce();
      expect(await probeTimes(world, 'web/client', 'other/client', 6)).toBe(0);
      const after = await scrape(wanted);
      expect(after.rejected - middle.rejected).toBe(6);
      // A reject counts for each policy isolating the pod.
      expect(after.second - middle.second).toBe(6);
      world.deletePolicy('web', 'client-to-server');
      world.deletePolicy('web', 'client-to-nothing');
      await enforce();
    }, 60_000);

    it('counts the rejects of --netpol-default-deny, which belong to no namespace, and explain says default deny as the kernel did', async () => {
      await enforcer.stop();
      enforcer = await world.start({ scheduler: false, options: { defaultDeny: true } });
      await enforce();
      // A pod started after the last sync: its address is in the node's pod CIDR but not in the local pods set (its
      // rules are not programmed), and traffic to it is rejected by the tail chain. Probed from web/server, whose
      // address is programmed: the node's ICMP answer reaches it, so each connect is one rejected packet.
      await world.lab.addPod({ namespace: 'web', name: 'late', labels: { app: 'late' }, ports: [{ port: 80 }] });
      const wanted = { toLate: series('kube_router_netpol_rejected_packets_total', { namespace: '', direction: 'ingress', reason: 'default_deny' }) };
      const before = await scrape(wanted);
      expect(await probeTimes(world, 'web/server', 'web/late', 5)).toBe(0);
      const after = await scrape(wanted);
      expect(after.toLate - before.toLate).toBe(5);
      // What kube-router explain says of the same flow before the next sync: default deny, as the kernel did.
      await waitFor('the informer to know web/late', async () => enforcer.explain({ source: 'web/server', destination: 'web/late', port: 80, protocol: 'TCP' }).then(() => true, () => false));
      expect(await enforcer.explain({ source: 'web/server', destination: 'web/late', port: 80, protocol: 'TCP' })).toMatchObject({
        allowed: false,
        detail: expect.stringContaining('ingress default-deny'),
      });
    }, 60_000);
  });
}

/** The registry's exposition of the series matching `pattern`, as Prometheus scrapes it. */
async function scrapeText(enforcer: HarnessEnforcer, pattern: string): Promise<string> {
  const text = await enforcer.metrics.registry.metrics();
  const matching = new RegExp(`^(# (HELP|TYPE) )?${pattern}`);
  return text.split('\n').filter((line) => matching.test(line)).join('\n');
}
