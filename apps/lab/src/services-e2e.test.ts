/**
 * Kubernetes' Services e2e scenarios, black-box against `npm start`: one lab for the file, Services and Pods through
 * kubectl, real TCP and UDP from pod, node and external-router namespaces (testing/service-scenarios.ts has the
 * scenarios, testing/netns-client.ts the client). What was considered, from kubernetes/kubernetes test/e2e/network/:
 *
 * service.go
 *   should provide secure master service [Conformance] ......................... ported
 *   should serve a basic endpoint from pods [Conformance] ...................... ported (with networking.go pod-Service)
 *   should serve multiport endpoints from pods [Conformance] ................... ported (named targetPorts svc1, svc2)
 *   should serve endpoints on same port and different protocols ................ ported (in the basic scenario)
 *   should be updated after adding or deleting ports ........................... ported
 *   should preserve source pod IP for traffic thru service cluster IP .......... ported
 *   should allow pods to hairpin back to themselves through services ........... ported
 *   should be able to up and down services ..................................... ported
 *   should work after the service has been recreated ........................... ported (in up and down)
 *   should work after restarting kube-proxy [Disruptive] ....................... not ported: apps/lab/src/faults.test.ts
 *                                                                                 restarts agents; this file keeps one lab steady
 *   should work after restarting apiserver [Disruptive] ........................ not ported: the lab's API server is in its
 *                                                                                 own process and cannot be restarted under it
 *   should be able to create a functioning NodePort service [Conformance] ...... ported
 *   should be able to update service type to NodePort listening on same port
 *     number but different protocols ........................................... ported in effect (NodePort TCP+UDP, port 80)
 *   should prevent NodePort collisions / should check NodePort out-of-range /
 *     should release NodePorts on delete / should use same NodePort with same
 *     port but different protocols ............................................. not ported: API server allocation, not the
 *                                                                                 proxy's (the embedded API server's own tests)
 *   should create endpoints for unready pods; should be able to connect to
 *     terminating and unready endpoints if PublishNotReadyAddresses is true;
 *     should not be able to connect ... if PublishNotReadyAddresses is false;
 *     should fallback to local/cluster terminating endpoints ...; should fail
 *     health check node port if there are only terminating endpoints ........... not ported: the lab's kubelet runs no
 *                                                                                 readiness probes and deletes pods at once
 *                                                                                 (no unready or terminating endpoints)
 *   should be rejected for evicted pods (no endpoints exist) ................... not ported: the lab has no eviction
 *   should be rejected when no endpoints exist ................................. ported
 *   should be able to change the type from ExternalName to ClusterIP/NodePort,
 *     ClusterIP/NodePort to ExternalName [Conformance] .......................... not ported: ExternalName is DNS (the lab
 *                                                                                 has no cluster DNS); the proxy ignores it
 *   should have session affinity work for service with type clusterIP ........ ported
 *   should be able to switch session affinity for service with type clusterIP . ported
 *   should have session affinity work for NodePort service ..................... ported (from the external router)
 *   should have session affinity timeout work for service with type clusterIP/
 *     NodePort .................................................................. not ported: the timeout's wait (seconds of
 *                                                                                 idling, then chance) makes it minutes long
 *   should respect internalTrafficPolicy=Local Pod to Pod ...................... ported
 *   should respect internalTrafficPolicy=Local Pod (hostNetwork: true) to Pod .. ported (from the node's namespace)
 *   should respect internalTrafficPolicy=Local Pod and Node, to Pod (hostNetwork)
 *                                                                                 not ported: a hostNetwork endpoint's
 *                                                                                 address is the node's; the lab's pod agents
 *                                                                                 of two hostNetwork pods would share ports
 *   should implement service.kubernetes.io/service-proxy-name ................... ported
 *   should implement service.kubernetes.io/headless ............................ ported
 *   should connect to the ports exposed by restartable init containers ........ not ported: the lab serves containers'
 *                                                                                 ports only
 *   should find a service from listing all namespaces; should test the
 *     lifecycle of an Endpoint; should complete a service status lifecycle;
 *     should delete a collection of services; should serve endpoints on the
 *     Endpoints API ............................................................. not ported: API objects only, no traffic
 * conntrack.go
 *   should be able to preserve UDP traffic when server pod cycles for a NodePort service ... ported
 *   should be able to preserve UDP traffic when server pod cycles for a ClusterIP service .. ported
 *   should be able to preserve UDP traffic when initial unready endpoints get ready ....... not ported: no unready pods
 *   proxy implementation should not be vulnerable to the invalid conntrack state bug
 *     [Privileged] / should drop INVALID conntrack entries ..................... not ported: needs crafted out-of-window
 *                                                                                 TCP segments (a raw-socket server)
 * networking.go (Granular Checks: Services)
 *   should function for pod-Service: http, udp ................................ ported (basic scenario)
 *   should function for pod-Service: sctp ...................................... not ported: Node.js has no SCTP sockets
 *   should function for node-Service: http, udp ................................ ported (basic and NodePort scenarios)
 *   should function for endpoint-Service: http, udp ............................ ported in effect (hairpin)
 *   should update endpoints: http, udp ......................................... ported
 *   should update nodePort: http, udp .......................................... ported in effect (NodePort and conntrack)
 *   should support basic nodePort: udp functionality ........................... ported (NodePort scenario)
 *   should function for client IP based session affinity: http, udp ........... ported (affinity, TCP)
 *   should be able to handle large requests: http, udp ......................... not ported: the pod agents answer one
 *                                                                                 line, they echo nothing
 *   should function for service endpoints using hostNetwork ................... not ported: see hostNetwork above
 *   should provide Internet connection / unique hostnames / kube-proxy urls /
 *     should recreate its iptables rules if they are deleted .................... not ported: no Internet, no DNS, no
 *                                                                                 kube-proxy; rule repair is the plugin's test
 * loadbalancer.go
 *   should only allow access from service loadbalancer source ranges ......... ported
 *   ESIPP should work for type=NodePort / type=LoadBalancer / from pods; should
 *     only target nodes with endpoints; should handle updates to
 *     ExternalTrafficPolicy field ............................................... ported (one scenario)
 *   LoadBalancer reachability (change the type and ports of a TCP/UDP service) .. ported as: the router reaches it
 *   ESIPP health check node port ............................................... not ported: the embedded API server
 *                                                                                 allocates no healthCheckNodePort
 * dual_stack.go
 *   should create service with ipv4,v6 cluster ip; should function for
 *     pod-Service: http, udp .................................................... ported
 */
import { execFile } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '@kube-router/testkit';
import { addressInSubnet, externalRouterNetns, ROUTER_ADDRESS_OFFSET } from './external-router.js';
import { LabProcess } from './testing/lab-process.js';
import { runScenario, SERVICE_SCENARIOS, ServiceCluster, type ServiceLab } from './testing/service-scenarios.js';

const run = promisify(execFile);
const isRoot = process.getuid?.() === 0;

async function labNamespaces(runId: string): Promise<string[]> {
  return (await run('ip', ['netns', 'list'])).stdout
    .split('\n')
    .map((line) => line.split(' ')[0]!)
    .filter((name) => name.startsWith(`krt-${runId}-`));
}

describe.skipIf(!isRoot)("Kubernetes' Services e2e scenarios against the lab (needs root for network namespaces)", () => {
  // Names and subnets of this run's own, so that an `npm start` or another lab test can run beside it.
  const runId = `tsvc${randomInt(36 * 36).toString(36).padStart(2, '0')}`;
  const subnet = randomInt(100, 250);
  const underlayCidrs = [`10.250.${subnet}.0/24`, `fd00:10:250:${subnet.toString(16)}::/64`];
  let lab: LabProcess;
  let cluster: ServiceCluster;
  const timings: string[] = [];

  beforeAll(async () => {
    const started = Date.now();
    lab = new LabProcess({ runId, underlayCidrs });
    await waitFor('both nodes to be ready', () => {
      if (!lab.running) throw new Error(`the lab exited: ${lab.stderr.slice(-20).join('\n')}`);
      return lab.stdout.filter((line) => / ready after /.test(line)).length === 2;
    }, { timeoutMs: 240_000, intervalMs: 250 });
    type NodeObject = { metadata: { name: string; annotations?: Record<string, string> }; status: { addresses: { type: string; address: string }[] } };
    const nodes = (JSON.parse(await lab.kubectl('get', 'nodes', '-o', 'json')) as { items: NodeObject[] }).items.map((node) => ({
      name: node.metadata.name,
      netns: node.metadata.annotations?.['lab.kube-router.io/netns'] ?? `krt-${runId}-${node.metadata.name}`,
      addresses: node.status.addresses
        .filter((address) => address.type === 'InternalIP')
        .map((address) => address.address)
        .sort((a, b) => Number(a.includes(':')) - Number(b.includes(':'))),
    }));
    const routerNetns = externalRouterNetns(runId);
    const router = (await labNamespaces(runId)).includes(routerNetns)
      ? { netns: routerNetns, addresses: underlayCidrs.map((cidr) => addressInSubnet(cidr, ROUTER_ADDRESS_OFFSET)) }
      : undefined;
    const serviceLab: ServiceLab = {
      kubectl: (...args) => lab.kubectl(...args),
      kubectlApply: (manifest) => lab.kubectlApply(manifest),
      nodes,
      ...(router && { router }),
    };
    cluster = new ServiceCluster(serviceLab);
    timings.push(`lab ready after ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }, 300_000);

  afterAll(async () => {
    await cluster?.close();
    await lab?.stop();
    console.log(`services e2e (${runId}):\n  ${timings.join('\n  ')}`);
  }, 90_000);

  for (const scenario of SERVICE_SCENARIOS) {
    it(`${scenario.e2e} [${scenario.file}]: ${scenario.checks}`, async (context) => {
      const missing = (scenario.needs ?? []).filter((need) => (need === 'router' ? !cluster.lab.router : !cluster.dualStack));
      if (missing.length > 0) context.skip(`the lab has no ${missing.join(', ')}`);
      await runScenario(cluster, scenario, timings, (ns) => {
        // What the lab (its kubelets, its agents) complained about meanwhile: the likeliest why.
        const complaints = lab.stderr.filter((line) => /\b(ERROR|WARN|error|failed)\b/.test(line)).slice(-15);
        if (complaints.length > 0) console.log(`${ns}: the lab's last complaints:\n${complaints.join('\n')}`);
      });
    }, scenario.timeoutMs);
  }

  it('stops on SIGINT with exit code 0 and leaves no namespace of its run behind', async () => {
    await cluster.close();
    // The lab's own removal, before LabProcess.stop() would sweep up whatever it left.
    lab.child.kill('SIGINT');
    expect(await lab.exited).toBe(0);
    expect(await labNamespaces(runId)).toEqual([]);
  }, 90_000);
});
