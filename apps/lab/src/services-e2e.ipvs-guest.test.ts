/**
 * Kubernetes' Services e2e scenarios (testing/service-scenarios.ts, the list services-e2e.test.ts runs against
 * `npm start` on proxy-nftables) against proxy-ipvs on a real IPVS kernel: the QEMU guest. Two dual-stack nodes, their
 * pods and an external router are network namespaces in the guest; the API server, the kubelets and one proxy-ipvs per
 * node (its commands sent into the guest) run in this process (testing/guest-services-lab.ts), and the guest reaches
 * the API server through a QEMU host forward, as the `kubernetes` Service's endpoint. One guest for the file; every
 * scenario of the list runs.
 *
 * Left out of a scenario that runs:
 *   ESIPP "should work from pods" ................................ IPVS_LOCAL_LOADBALANCER_FROM_PODS: a pod on a node
 *                                                                 without a local endpoint is not served by a Local
 *                                                                 LoadBalancer address (kubernetes#93456)
 * The proxies run with hairpinMode (--hairpin-mode), as kube-router documents for the hairpin test.
 */
import { randomInt } from 'node:crypto';
import { PROXY_CONTROLLER } from '@kube-router/proxy-ipvs';
import { hasTool } from '@kube-router/netfilter';
import { guestUnavailableReason } from '@kube-router/testkit/qemu';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GuestServicesLab, IPVS_LOCAL_LOADBALANCER_FROM_PODS } from './testing/guest-services-lab.js';
import { runScenario, SERVICE_SCENARIOS, ServiceCluster } from './testing/service-scenarios.js';

/** Scenarios that run with a check left out (ServiceLab.cannot), by their `e2e` name: what is left out. */
const PARTLY_IN_THE_GUEST: Readonly<Record<string, string>> = {
  'ESIPP [Slow] should work for type=NodePort; should only target nodes with endpoints; should work for type=LoadBalancer; should work from pods; should handle updates to ExternalTrafficPolicy field':
    `without "from pods": ${IPVS_LOCAL_LOADBALANCER_FROM_PODS}`,
};

// The guest always, even on a host with IPVS: the scenarios' namespaces are the guest's.
const unavailable =
  process.getuid?.() !== 0 ? 'needs root' : (guestUnavailableReason() ?? (hasTool('socat') ? undefined : "socat is not installed (the guest's forward to the API server uses it)"));

describe.skipIf(unavailable !== undefined)(
  `Kubernetes' Services e2e scenarios against proxy-ipvs in the QEMU guest${unavailable ? ` (skipped: ${unavailable})` : ''}`,
  () => {
    const runId = `tsvg${randomInt(36 * 36).toString(36).padStart(2, '0')}`;
    let lab: GuestServicesLab;
    /** Kept, not only its result: a start that outlives beforeAll's timeout is still closed by afterAll. */
    let starting: Promise<GuestServicesLab> | undefined;
    let cluster: ServiceCluster;
    const fileStarted = Date.now();
    const timings: string[] = [];

    beforeAll(async () => {
      const started = Date.now();
      starting = GuestServicesLab.start({ runId, boot: { memoryMiB: 3072, cpus: 2 } });
      lab = await starting;
      cluster = new ServiceCluster(lab.serviceLab);
      timings.push(`guest (${lab.guest.info.kernelRelease}) booted in ${(lab.guest.info.bootMs / 1000).toFixed(1)} s, lab ready after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    }, 300_000);

    afterAll(async () => {
      // The proxies' syncs, whose length in the guest (every command an `ip netns exec` under TCG) paces the scenarios.
      const durations = (lab?.syncs ?? []).filter((sync) => sync.controller === PROXY_CONTROLLER).map((sync) => sync.durationMs).sort((a, b) => a - b);
      const at = (q: number) => durations[Math.min(durations.length - 1, Math.floor(q * durations.length))] ?? 0;
      if (durations.length > 0) timings.push(`${durations.length} proxy syncs: median ${at(0.5)} ms, p90 ${at(0.9)} ms, max ${at(1)} ms`);
      await cluster?.close();
      await (await starting?.catch(() => undefined))?.close();
      timings.push(`file took ${((Date.now() - fileStarted) / 1000).toFixed(1)} s`);
      console.log(`services e2e in the IPVS guest (${runId}):\n  ${timings.join('\n  ')}`);
    }, 90_000);

    for (const scenario of SERVICE_SCENARIOS) {
      const partly = PARTLY_IN_THE_GUEST[scenario.e2e];
      it(`${scenario.e2e} [${scenario.file}]: ${scenario.checks}${partly ? ` (${partly})` : ''}`, async () => {
        const missing = (scenario.needs ?? []).filter((need) => (need === 'router' ? !cluster.lab.router : !cluster.dualStack));
        expect(missing, "the guest's cluster is dual-stack and has an external router").toEqual([]);
        await runScenario(cluster, scenario, timings, async (ns) => {
          // What the proxies complained about, and what they programmed: the likeliest why.
          const complaints = lab.logs.slice(-15).map((line) => JSON.stringify(line));
          if (complaints.length > 0) console.log(`${ns}: the agents' last warnings:\n${complaints.join('\n')}`);
          for (const node of lab.nodes) console.log(`${ns}: IPVS on ${node.nodeName}:\n${await lab.ipvs(node)}`);
        });
      }, scenario.timeoutMs);
    }

    it('leaves no helper process behind in the guest once the scenarios closed theirs', async () => {
      await cluster.close();
      const { stdout } = await lab.guest.sh('ps -o args 2>/dev/null || ps');
      expect(stdout.split('\n').filter((line) => line.includes('netns-client.mjs'))).toEqual([]);
    }, 60_000);
  },
);
