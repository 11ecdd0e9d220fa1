import { healthRoutes } from '@kube-router/healthcheck';
import { parseIpvsSave } from '@kube-router/netfilter';
import { ipvsKernelUnavailableReason, openIpvsKernel } from '@kube-router/testkit/qemu';
import type { BackgroundProcess, TestKernel } from '@kube-router/testkit/qemu';
import fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, waitFor } from '@kube-router/testkit';
import type { KubeObjectInput } from '@kube-router/testkit';
import pino from 'pino';
import { DUMMY_INTERFACE, MASQUERADE_CHAIN, SERVICE_IP_PORTS_SET } from './names.js';
import { proxyIpvsOptions } from './options.js';
import type { ProxyIpvsOptions } from './options.js';
import { createProxyIpvsPlugin } from './plugin.js';
import { driftCount, driftLines } from './testing/drift.js';
import { DRIFT_OBJECTS, ProxyAgentProcess } from './testing/proxy-agent-process.js';
import { longestGap, parseProbes, parseStream } from './testing/traffic.js';
import { EXTERNAL_CLIENT_IP, NODE_IP, POD_CIDR, ProxyWorld, nodeObject, serviceObject, sliceObject, startProxy } from './testing/world.js';
import type { Pod, ProxyHarness } from './testing/world.js';

const unavailable = ipvsKernelUnavailableReason();

// One kernel for the whole file: in the QEMU guest a boot costs tens of seconds under TCG.
describe.skipIf(unavailable !== undefined)(`proxy on a real IPVS kernel${unavailable ? ` (skipped: ${unavailable})` : ''}`, () => {
  let kernel: TestKernel;
  let world: ProxyWorld;
  let proxy: ProxyHarness;
  let a: Pod;
  let b: Pod;
  let client: Pod;
  let healthCheckPort: number;
  let proxyOptions: ProxyIpvsOptions;

  const ipvs = async () => parseIpvsSave((await kernel.runner.run({ command: 'ipvsadm', args: ['-Sn'], ...(world.netns && { netns: world.netns }) })).stdout);
  const vips = async () => (await kernel.sh(`ip -o addr show dev ${DUMMY_INTERFACE} 2>/dev/null; true`, world.netns ? { netns: world.netns } : {})).stdout;
  const sync = async () => proxy.controller.runObservedSync('test');
  /** Waits until the informers hold what the API server has, then syncs. */
  const syncWhen = async (seen: () => boolean) => {
    for (let i = 0; i < 200 && !seen(); i++) await new Promise((resolve) => setTimeout(resolve, 25));
    expect(seen(), 'the informers saw the change').toBe(true);
    return sync();
  };
  const drift = (object: string) => driftCount(proxy.metrics, object);
  const service = (name: string) => proxy.kube.informers.services().get('default', name);
  const slice = (name: string) => proxy.kube.informers.endpointSlices().listForService('default', name)[0];

  beforeAll(async () => {
    const started = performance.now();
    kernel = await openIpvsKernel();
    world = new ProxyWorld(kernel);
    await world.setUp();
    a = await world.addPod('a', [8080]);
    b = await world.addPod('b', [8080]);
    client = await world.addPod('client');
    healthCheckPort = await freePort();
    proxyOptions = {
      ...(world.netns && { netns: world.netns }),
      podCidrs: [POD_CIDR],
      enableIpv6: false,
      gracefulTermination: true,
      gracefulPeriodMs: 8_000,
      syncPeriodMs: 600_000,
      strictExternalIpValidation: true,
      serviceExternalIpRanges: ['203.0.113.0/24'],
      loadBalancerIpRanges: ['198.51.100.0/24'],
      serviceClusterIpRanges: ['10.96.0.0/12'],
    };
    proxy = await startProxy(
      kernel.runner,
      proxyOptions,
      [
        nodeObject(),
        serviceObject({ name: 'spread', clusterIP: '10.96.0.10' }),
        sliceObject('spread', [{ ip: a.ip }, { ip: b.ip }]),
        serviceObject({ name: 'sticky', clusterIP: '10.96.0.11', annotations: { 'kube-router.io/service.scheduler': 'sh' } }),
        sliceObject('sticky', [{ ip: a.ip }, { ip: b.ip }]),
        serviceObject({ name: 'affinity', clusterIP: '10.96.0.12', sessionAffinity: true }),
        sliceObject('affinity', [{ ip: a.ip }, { ip: b.ip }]),
        serviceObject({ name: 'nodeport', clusterIP: '10.96.0.13', type: 'NodePort', nodePort: 30080 }),
        sliceObject('nodeport', [{ ip: a.ip }, { ip: b.ip }]),
        serviceObject({ name: 'local', clusterIP: '10.96.0.14', type: 'LoadBalancer', nodePort: 30081, externalTrafficPolicy: 'Local', healthCheckNodePort: healthCheckPort }),
        sliceObject('local', [{ ip: a.ip }, { ip: '10.244.1.9', node: 'elsewhere' }]),
        serviceObject({ name: 'hairpin', clusterIP: '10.96.0.18', annotations: { 'kube-router.io/service.hairpin': '' } }),
        sliceObject('hairpin', [{ ip: a.ip }]),
        serviceObject({ name: 'udp', clusterIP: '10.96.0.19', port: 53, protocol: 'UDP' }),
        serviceObject({ name: 'external', clusterIP: '10.96.0.20', externalIPs: ['203.0.113.5', '192.0.2.5'] }),
        sliceObject('external', [{ ip: a.ip }]),
        sliceObject('udp', [{ ip: a.ip }, { ip: b.ip }], 8080, 'UDP'),
      ],
    );
    const outcome = await sync();
    expect(outcome.ok, outcome.ok ? '' : String(outcome.error)).toBe(true);
    console.info(`${kernel.where} kernel${kernel.guest ? ` (boot ${kernel.guest.info.bootMs} ms)` : ''}, world and first sync in ${Math.round(performance.now() - started)} ms; sync ${JSON.stringify(proxy.controller.lastSync())}`);
  }, 300_000);

  afterAll(async () => {
    await proxy?.close();
    await world?.tearDown();
    await kernel?.close();
  }, 60_000);

  it('spreads a ClusterIP over its endpoints round-robin', async () => {
    const answers = await world.probe(client.netns, '10.96.0.10', 80, 6);
    const pods = answers.map((answer) => answer.split(' ')[0]);
    expect(new Set(pods)).toEqual(new Set(['a', 'b']));
    for (let i = 1; i < pods.length; i++) expect(pods[i]).not.toBe(pods[i - 1]);
    // Pod-to-service traffic from inside the pod CIDR keeps the pod's address.
    expect(answers[0]?.split(' ')[1]).toBe(client.ip);
    expect(await vips()).toContain('10.96.0.10/32');
  });

  it('balances a UDP ClusterIP, one datagram flow per source port', async () => {
    const answers = await world.probe(client.netns, '10.96.0.19', 53, 4, 'udp');
    expect(new Set(answers)).toEqual(new Set([`a ${client.ip}`, `b ${client.ip}`]));
  });

  it('sticks to one endpoint with the sh scheduler and with ClientIP affinity', async () => {
    const sticky = await world.probe(client.netns, '10.96.0.11', 80, 5);
    expect(new Set(sticky.map((answer) => answer.split(' ')[0])).size).toBe(1);
    const affinity = await world.probe(client.netns, '10.96.0.12', 80, 5);
    expect(new Set(affinity.map((answer) => answer.split(' ')[0])).size).toBe(1);
    const saved = await ipvs();
    expect(saved.find((s) => s.service.address === '10.96.0.11')?.service.scheduler).toBe('sh');
    expect(saved.find((s) => s.service.address === '10.96.0.12')?.service.persistentSeconds).toBe(600);
  });

  it('explains a flow to a Service: its real servers, and the endpoint the probe reached, from IPVS’s connection table', async () => {
    const [answer] = await world.probe(client.netns, '10.96.0.11', 80, 1);
    const reached = answer?.split(' ')[0] === 'a' ? a.ip : b.ip;
    const path = await proxy.controller.explainServiceFlow({ source: client.ip, destination: '10.96.0.11', port: 80, protocol: 'TCP' });
    expect(path).toMatchObject({ service: 'default/sticky', kind: 'cluster-ip', via: 'IPVS TCP 10.96.0.11:80 sh' });
    expect(path?.endpoints.map((endpoint) => endpoint.address).sort()).toEqual([a.ip, b.ip].sort());
    // The sh scheduler sends every connection of this client to one real server: the one that answered.
    expect(path?.connections.length).toBeGreaterThan(0);
    expect(new Set(path?.connections.map((connection) => connection.endpoint.address))).toEqual(new Set([reached]));
    expect(path?.connections.every((connection) => connection.client.address === client.ip)).toBe(true);
    // ClientIP affinity: the template entry (the client's port 0) names the same real server as the connections.
    const [affine] = await world.probe(client.netns, '10.96.0.12', 80, 1);
    const affinity = await proxy.controller.explainServiceFlow({ source: client.ip, destination: '10.96.0.12', port: 80, protocol: 'TCP' });
    expect(affinity?.connections.some((connection) => connection.client.port === 0), JSON.stringify(affinity)).toBe(true);
    expect(new Set(affinity?.connections.map((connection) => connection.endpoint.address))).toEqual(new Set([affine?.split(' ')[0] === 'a' ? a.ip : b.ip]));
    expect(await proxy.controller.explainServiceFlow({ source: client.ip, destination: '10.96.0.99', port: 80, protocol: 'TCP' })).toBeUndefined();
  });

  it("answers a NodePort from outside the node; its local endpoints see the client's own address, as in kube-router", async () => {
    // kube-router SNATs only what is neither from nor to this node's pod CIDR (`! -s <cidr> ! -d <cidr>`): the outside
    // client reaching a local endpoint keeps its address (this agent used to masquerade it).
    const answers = await world.probe('tipvs-ext', NODE_IP, 30080, 4);
    expect(new Set(answers.map((answer) => answer.split(' ')[0]))).toEqual(new Set(['a', 'b']));
    expect(answers.map((answer) => answer.split(' ')[1])).toEqual(Array(4).fill(EXTERNAL_CLIENT_IP));
  });

  it('keeps only local endpoints and the client address under externalTrafficPolicy Local', async () => {
    const saved = await ipvs();
    const nodePort = saved.find((s) => s.service.address === NODE_IP && s.service.port === 30081);
    expect(nodePort?.destinations.map((d) => d.address)).toEqual([a.ip]);
    const clusterIp = saved.find((s) => s.service.address === '10.96.0.14');
    expect(clusterIp?.destinations.map((d) => d.address).sort()).toEqual([a.ip, '10.244.1.9'].sort());
    const answers = await world.probe('tipvs-ext', NODE_IP, 30081, 3);
    expect(answers).toEqual([`a ${EXTERNAL_CLIENT_IP}`, `a ${EXTERNAL_CLIENT_IP}`, `a ${EXTERNAL_CLIENT_IP}`]);
  });

  it('programs only the externalIPs that --strict-external-ip-validation allows, the sync still ok', async () => {
    const saved = await ipvs();
    expect(saved.filter((s) => s.service.address === '203.0.113.5').map((s) => s.destinations.map((d) => d.address))).toEqual([[a.ip]]);
    expect(saved.some((s) => s.service.address === '192.0.2.5')).toBe(false);
    const addresses = await vips();
    expect(addresses).toContain('203.0.113.5/32');
    expect(addresses).not.toContain('192.0.2.5');
    expect(await world.probe(client.netns, '203.0.113.5', 80, 2)).toEqual([`a ${client.ip}`, `a ${client.ip}`]);
  });

  it('lets a pod reach itself through its Service with kube-router.io/service.hairpin, seeing the VIP as the source', async () => {
    expect(await world.probe(a.netns, '10.96.0.18', 80, 2)).toEqual(['a 10.96.0.18', 'a 10.96.0.18']);
  });

  it('serves the healthCheckNodePort of a Local LoadBalancer from the agent: 200 while a local endpoint is ready', async () => {
    const response = await fetch(`http://127.0.0.1:${healthCheckPort}/healthz`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ service: { namespace: 'default', name: 'local' }, localEndpoints: 1 });
  });

  it('applies one endpoint change as one IPVS operation', async () => {
    const unchanged = await sync();
    expect(unchanged.ok).toBe(true);
    expect(proxy.controller.lastSync()?.ipvsOperations).toBe(0);
    proxy.server.upsert(sliceObject('spread', [{ ip: a.ip }, { ip: b.ip }, { ip: '10.244.0.200' }]));
    const outcome = await syncWhen(() => (slice('spread')?.endpoints?.length ?? 0) === 3);
    expect(outcome.ok).toBe(true);
    expect(proxy.controller.lastSync()?.ipvsOperations).toBe(1);
    proxy.server.upsert(sliceObject('spread', [{ ip: a.ip }, { ip: b.ip }]));
    await syncWhen(() => (slice('spread')?.endpoints?.length ?? 0) === 2);
  });

  it('puts back an IPVS service and a real server deleted by hand at the next periodic sync, and counts them as drift', async () => {
    expect((await sync()).ok).toBe(true);
    const before = { services: await drift('ipvs_service'), destinations: await drift('ipvs_destination') };
    const inNetns = world.netns ? { netns: world.netns } : {};
    await kernel.runner.run({ command: 'ipvsadm', args: ['-D', '-t', '10.96.0.11:80'], ...inNetns });
    await kernel.runner.run({ command: 'ipvsadm', args: ['-d', '-t', '10.96.0.10:80', '-r', `${a.ip}:8080`], ...inNetns });
    // An event sync plans from what the last apply left (no listing of every service): it does not see the drift.
    expect((await sync()).ok).toBe(true);
    expect(proxy.controller.lastSync()).toMatchObject({ ipvsStateFrom: 'model', ipvsOperations: 0 });
    expect((await ipvs()).some((s) => s.service.address === '10.96.0.11')).toBe(false);
    // The periodic sync reads IPVS back and repairs it.
    expect((await proxy.controller.runObservedSync('periodic')).ok).toBe(true);
    expect(proxy.controller.lastSync()).toMatchObject({ ipvsStateFrom: 'kernel' });
    expect((await ipvs()).some((s) => s.service.address === '10.96.0.11')).toBe(true);
    expect((await ipvs()).find((s) => s.service.address === '10.96.0.10')?.destinations.map((d) => d.address).sort()).toEqual([a.ip, b.ip].sort());
    expect(await drift('ipvs_service')).toBe(before.services + 1);
    expect(await drift('ipvs_destination')).toBe(before.destinations + 1);
    // Nothing else changed behind the agent: the next sync counts nothing.
    expect((await proxy.controller.runObservedSync('periodic')).ok).toBe(true);
    expect(await drift('ipvs_service')).toBe(before.services + 1);
    expect(await drift('ipvs_destination')).toBe(before.destinations + 1);
  });

  it('puts back its masquerade chain flushed and an ipset emptied by hand at the next periodic sync, counting each once', async () => {
    const started = performance.now();
    const inNetns = world.netns ? { netns: world.netns } : {};
    const periodic = async () => {
      const outcome = await proxy.controller.runObservedSync('periodic');
      expect(outcome.ok, outcome.ok ? '' : String(outcome.error)).toBe(true);
      return proxy.controller.lastSync()?.totalMs;
    };
    const counts = async () => ({ chain: await drift('chain'), ipset: await drift('ipset') });
    const masquerade = async () => (await kernel.sh(`iptables-save -t nat | grep -- '-A ${MASQUERADE_CHAIN} '; true`, inNetns)).stdout;
    const members = async () => (await kernel.sh(`ipset save ${SERVICE_IP_PORTS_SET} | grep '^add' | sort`, inNetns)).stdout;
    const before = await counts();
    const untouchedMs = await periodic();
    expect(await counts()).toEqual(before);
    const written = { masquerade: await masquerade(), members: await members() };
    expect(written.masquerade).toContain('MASQUERADE');
    expect(written.members).toContain('add kube-router-svip-prt 10.96.0.10,tcp:80');

    await kernel.sh(`iptables -t nat -F ${MASQUERADE_CHAIN} && ipset flush ${SERVICE_IP_PORTS_SET}`, inNetns);
    // With no service port in the set, KUBE-ROUTER-SERVICES rejects what is sent to a service address.
    expect(await world.probe(client.netns, '10.96.0.10', 80, 1)).toEqual(['error: ECONNREFUSED']);
    const logged = proxy.logs.length;
    const repairMs = await periodic();
    expect(await masquerade()).toBe(written.masquerade);
    expect(await members()).toBe(written.members);
    expect(await counts()).toEqual({ chain: before.chain + 1, ipset: before.ipset + 1 });
    expect(driftLines(proxy.logs.slice(logged), ['chain', 'ipset'])).toEqual([
      { object: 'chain', count: 1, names: [`ipv4/${MASQUERADE_CHAIN}`] },
      { object: 'ipset', count: 1, names: [SERVICE_IP_PORTS_SET] },
    ]);
    const [answer] = await world.probe(client.netns, '10.96.0.10', 80, 1);
    expect(answer).toMatch(new RegExp(`^[ab] ${client.ip.replace(/\./g, '\\.')}$`));
    // The hairpin SNAT lives in the masquerade chain: a pod reaches itself through its Service again.
    expect(await world.probe(a.netns, '10.96.0.18', 80, 1)).toEqual(['a 10.96.0.18']);

    // Put back, the kernel is as the proxy left it: nothing more counts.
    await periodic();
    expect(await counts()).toEqual({ chain: before.chain + 1, ipset: before.ipset + 1 });
    console.info(`proxy drift of chains and ipsets: untouched periodic sync ${untouchedMs} ms, repairing one ${repairMs} ms, case ${Math.round(performance.now() - started)} ms`);
  }, 120_000);

  it('drains a removed endpoint: no new connections, the open one kept, deleted after the graceful period', async () => {
    proxy.server.create(serviceObject({ name: 'drain', clusterIP: '10.96.0.15' }));
    proxy.server.create(sliceObject('drain', [{ ip: b.ip }]));
    await syncWhen(() => slice('drain') !== undefined && service('drain') !== undefined);
    const holder = await world.holdConnections(client.netns, '10.96.0.15', 80, 1, 20_000);
    for (let i = 0; i < 100 && !(await holder.output()).stdout; i++) await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await holder.output()).stdout).toContain(`b ${client.ip}`);

    proxy.server.upsert(sliceObject('drain', [{ ip: a.ip }]));
    await syncWhen(() => slice('drain')?.endpoints?.[0]?.addresses?.[0] === a.ip);
    const draining = (await ipvs()).find((s) => s.service.address === '10.96.0.15');
    expect(draining?.destinations).toEqual(
      expect.arrayContaining([
        { address: a.ip, port: 8080, forwarding: 'masquerade', weight: 1 },
        { address: b.ip, port: 8080, forwarding: 'masquerade', weight: 0 },
      ]),
    );
    expect(await world.probe(client.netns, '10.96.0.15', 80, 3)).toEqual([`a ${client.ip}`, `a ${client.ip}`, `a ${client.ip}`]);
    const { stdout: connections } = await kernel.runner.run({ command: 'ipvsadm', args: ['-Ln', '-t', '10.96.0.15:80'], ...(world.netns && { netns: world.netns }) });
    expect(connections).toMatch(new RegExp(`${b.ip.replace(/\./g, '\\.')}:8080\\s+Masq\\s+0\\s+1\\s`));

    await new Promise((resolve) => setTimeout(resolve, 8_500));
    await sync();
    expect((await ipvs()).find((s) => s.service.address === '10.96.0.15')?.destinations.map((d) => d.address)).toEqual([a.ip]);
    await holder.stop();
  }, 90_000);

  it('removes a deleted Service with its VIP', async () => {
    proxy.server.delete('v1', 'Service', 'default', 'drain');
    await syncWhen(() => service('drain') === undefined);
    expect((await ipvs()).some((s) => s.service.address === '10.96.0.15')).toBe(false);
    expect(await vips()).not.toContain('10.96.0.15/32');
    expect(await world.probe(client.netns, '10.96.0.15', 80, 1)).toEqual([expect.stringMatching(/^error: /)]);
  });

  it('sends to a serving terminating endpoint only while no ready one exists (KEP-1669)', async () => {
    proxy.server.create(serviceObject({ name: 'terminating', clusterIP: '10.96.0.21' }));
    proxy.server.create(sliceObject('terminating', [{ ip: a.ip }, { ip: b.ip, ready: false, serving: true, terminating: true }]));
    expect((await syncWhen(() => slice('terminating') !== undefined && service('terminating') !== undefined)).ok).toBe(true);
    expect(await world.probe(client.netns, '10.96.0.21', 80, 4)).toEqual(Array(4).fill(`a ${client.ip}`));

    // a goes too (not serving): b, still serving while it terminates, is all there is, so it gets the traffic.
    proxy.server.upsert(sliceObject('terminating', [{ ip: a.ip, ready: false, serving: false, terminating: true }, { ip: b.ip, ready: false, serving: true, terminating: true }]));
    expect((await syncWhen(() => slice('terminating')?.endpoints?.[0]?.conditions?.serving === false)).ok).toBe(true);
    expect(await world.probe(client.netns, '10.96.0.21', 80, 3)).toEqual(Array(3).fill(`b ${client.ip}`));
  }, 60_000);

  it('refuses a Service without endpoints at once (TCP reset, ICMP for UDP), and serves it once an endpoint appears', async () => {
    proxy.server.create(serviceObject({ name: 'empty', clusterIP: '10.96.0.23' }));
    proxy.server.create(serviceObject({ name: 'empty-udp', clusterIP: '10.96.0.24', port: 53, protocol: 'UDP' }));
    expect((await syncWhen(() => service('empty') !== undefined && service('empty-udp') !== undefined)).ok).toBe(true);
    const started = performance.now();
    expect(await world.probe(client.netns, '10.96.0.23', 80, 1)).toEqual(['error: ECONNREFUSED']);
    const refusedMs = Math.round(performance.now() - started);
    expect(await world.probe(client.netns, '10.96.0.24', 53, 1, 'udp')).toEqual(['error: ECONNREFUSED']);
    // The refusal is the proxy's rule (counted), not IPVS's own answer for a service without real servers.
    const inNetns = world.netns ? { netns: world.netns } : {};
    const counters = (await kernel.sh('iptables -L KUBE-ROUTER-SERVICES -v -n -x', inNetns)).stdout;
    expect(counters).toMatch(/^\s*[1-9]\d*\s+\d+\s+REJECT\s+(6|tcp)\b.*reject-with tcp-reset/m);

    proxy.server.create(sliceObject('empty', [{ ip: a.ip }]));
    expect((await syncWhen(() => slice('empty') !== undefined)).ok).toBe(true);
    expect(await world.probe(client.netns, '10.96.0.23', 80, 2)).toEqual([`a ${client.ip}`, `a ${client.ip}`]);
    console.info(`service without endpoints: connection refused after ${refusedMs} ms (probe process included)`);
  }, 60_000);

  it('admits only loadBalancerSourceRanges to a LoadBalancer IP; its NodePort and ClusterIP stay open', async () => {
    const lbIp = '198.51.100.10';
    const created = proxy.server.create(
      serviceObject({ name: 'fenced', clusterIP: '10.96.0.22', type: 'LoadBalancer', nodePort: 30082, loadBalancerSourceRanges: [`${client.ip}/32`] }),
    );
    proxy.server.updateStatus({ ...created, status: { loadBalancer: { ingress: [{ ip: lbIp }] } } });
    proxy.server.create(sliceObject('fenced', [{ ip: a.ip }]));
    expect((await syncWhen(() => slice('fenced') !== undefined && service('fenced')?.status?.loadBalancer?.ingress?.[0]?.ip === lbIp)).ok).toBe(true);
    // The pod is in the range; the outside client (192.168.77.2) is not: its SYN is dropped, so it times out.
    expect(await world.probe(client.netns, lbIp, 80, 2)).toEqual([`a ${client.ip}`, `a ${client.ip}`]);
    expect(await world.probe('tipvs-ext', lbIp, 80, 1)).toEqual(['error: timeout']);
    expect(await world.probe('tipvs-ext', NODE_IP, 30082, 1)).toEqual([`a ${EXTERNAL_CLIENT_IP}`]);

    // The outside client's range added: it is served.
    const fenced = proxy.server.get('v1', 'Service', 'default', 'fenced') as KubeObjectInput & { spec: object };
    proxy.server.update({ ...fenced, spec: { ...fenced.spec, loadBalancerSourceRanges: [`${client.ip}/32`, '192.168.77.0/24'] } });
    expect((await syncWhen(() => (service('fenced')?.spec?.loadBalancerSourceRanges?.length ?? 0) === 2)).ok).toBe(true);
    expect(await world.probe('tipvs-ext', lbIp, 80, 1)).toEqual([`a ${EXTERNAL_CLIENT_IP}`]);
  }, 60_000);

  it('deletes the UDP conntrack entry of an endpoint once it is gone, after its graceful period', async () => {
    const vip = '10.96.0.25';
    const inNetns = world.netns ? { netns: world.netns } : {};
    proxy.server.create(serviceObject({ name: 'udp-flow', clusterIP: vip, port: 53, protocol: 'UDP' }));
    proxy.server.create(sliceObject('udp-flow', [{ ip: a.ip }, { ip: b.ip }], 8080, 'UDP'));
    expect((await syncWhen(() => slice('udp-flow') !== undefined && service('udp-flow') !== undefined)).ok).toBe(true);
    const entries = async () =>
      (await kernel.runner.run({ command: 'conntrack', args: ['-L', '-p', 'udp', '--orig-dst', vip], okExitCodes: [0, 1], ...inNetns })).stdout
        .split('\n')
        .filter((line) => line.includes(`dst=${vip}`));
    // One flow (one source port), answered by one endpoint, refreshing its entry all along.
    const flow = await world.udpStream(client.netns, vip, 53, 200);
    let answered: string[];
    try {
      const answers = async () => (await flow.output()).stdout.split('\n').filter((line) => line.startsWith('answer '));
      await waitFor('the UDP flow to be answered', async () => (await answers()).length >= 2);
      answered = await answers();
    } finally {
      await flow.stop();
    }
    const first = answered[0]?.split(' ')[2] as string;
    const gone = first === 'a' ? a : b;
    const stays = first === 'a' ? b : a;
    const goneEntries = async () => (await entries()).filter((line) => line.includes(`src=${gone.ip} `));
    expect(await goneEntries()).toHaveLength(1);

    // The endpoint the flow reached goes: it drains (weight 0) through the graceful period, its entry kept; then it is
    // deleted, and its entry with it. The client has stopped sending, and the kernel's own flush of a deleted real
    // server's connections (expire_nodest_conn=1, which also drops their conntrack entries since Linux 5.9) is off for
    // the case: only the proxy's conntrack -D can remove the entry before conntrack's own timeout.
    await kernel.sh('sysctl -qw net.ipv4.vs.expire_nodest_conn=0', inNetns);
    try {
      proxy.server.upsert(sliceObject('udp-flow', [{ ip: stays.ip }], 8080, 'UDP'));
      expect((await syncWhen(() => slice('udp-flow')?.endpoints?.length === 1)).ok).toBe(true);
      expect(await goneEntries()).toHaveLength(1);
      await new Promise((resolve) => setTimeout(resolve, 8_500));
      expect((await sync()).ok).toBe(true);
    } finally {
      await kernel.sh('sysctl -qw net.ipv4.vs.expire_nodest_conn=1', inNetns);
    }
    expect((await ipvs()).find((s) => s.service.address === vip)?.destinations.map((d) => d.address)).toEqual([stays.ip]);
    expect(proxy.controller.lastSync()?.conntrackDeleted).toBe(1);
    expect(await goneEntries()).toEqual([]);
    // A new flow reaches the endpoint that stays.
    expect(await world.probe(client.netns, vip, 53, 2, 'udp')).toEqual([`${stays.name} ${client.ip}`, `${stays.name} ${client.ip}`]);
  }, 90_000);

  it('keeps every other Service when the kernel refuses one, fails the sync, stays live and records a Warning', async () => {
    proxy.server.create(serviceObject({ name: 'broken', clusterIP: '10.96.0.16', annotations: { 'kube-router.io/service.scheduler': 'nosuch' } }));
    proxy.server.create(sliceObject('broken', [{ ip: a.ip }]));
    proxy.server.create(serviceObject({ name: 'after-broken', clusterIP: '10.96.0.17' }));
    proxy.server.create(sliceObject('after-broken', [{ ip: b.ip }]));
    const outcome = await syncWhen(() => service('broken') !== undefined && service('after-broken') !== undefined && slice('after-broken') !== undefined);
    expect(outcome.ok).toBe(false);
    if (!outcome.ok) expect(String(outcome.error)).toMatch(/service\/default\/broken: IPVS refused tcp\/10\.96\.0\.16\/80: .*not found/i);
    expect(await world.probe(client.netns, '10.96.0.17', 80, 1)).toEqual([`b ${client.ip}`]);
    expect(await world.probe(client.netns, '10.96.0.10', 80, 2)).toHaveLength(2);

    const failures = (await proxy.metrics.registry.getSingleMetric('kube_router_controller_sync_failures_total')?.get())?.values.find((v) => v.labels.controller === 'proxy');
    expect(failures?.value).toBeGreaterThanOrEqual(1);
    const app = fastify();
    await app.register(healthRoutes, { registry: proxy.health });
    expect((await app.inject({ url: '/healthz' })).statusCode).toBe(200);
    await app.close();
    for (let i = 0; i < 100; i++) {
      if (proxy.server.list('v1', 'Event', 'default').some((e) => (e as { reason?: string }).reason === 'IpvsServiceNotProgrammed')) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const event = proxy.server.list('v1', 'Event', 'default').find((e) => (e as { reason?: string }).reason === 'IpvsServiceNotProgrammed') as
      | { type?: string; involvedObject?: { name?: string } }
      | undefined;
    expect(event?.type).toBe('Warning');
    expect(event?.involvedObject?.name).toBe('broken');
  });

  it('exports per-Service counters when scraped', async () => {
    const text = await proxy.metrics.registry.metrics();
    expect(text).toMatch(/kube_router_service_total_connections\{svc_namespace="default",service_name="spread",service_vip="10\.96\.0\.10",protocol="tcp",port="80"\} [1-9]/);
    expect(text).toMatch(/kube_router_controller_ipvs_services \d+/);
  });

  it('keeps an established and new connections through a proxy process SIGKILLed mid-sync and started again; the restart adopts what it finds, nothing twice, no drift', async () => {
    const started = performance.now();
    const inNetns = world.netns ? { netns: world.netns } : {};
    const lateIp = '10.96.0.30';
    const sorted = (text: string) => text.split('\n').filter((line) => line.trim() !== '').sort();
    /** Everything the proxy owns in the kernel, one line per object: nothing else runs there. */
    const owned = async () => ({
      ipvs: sorted((await kernel.runner.run({ command: 'ipvsadm', args: ['-Sn'], ...inNetns })).stdout),
      vips: sorted((await kernel.sh(`ip -o -4 addr show dev ${DUMMY_INTERFACE} | awk '{print $4}'`, inNetns)).stdout),
      sets: sorted((await kernel.sh('ipset list -n', inNetns)).stdout),
      members: sorted((await kernel.sh(`ipset save | grep '^add '`, inNetns)).stdout),
      rules: sorted((await kernel.sh(`{ iptables-save -t filter; iptables-save -t nat; } | grep -- 'KUBE-ROUTER'`, inNetns)).stdout),
    });
    const twice = (lines: readonly string[]) => lines.filter((line, index) => lines.indexOf(line) !== index);
    const noDrift = Object.fromEntries(DRIFT_OBJECTS.map((object) => [object, 0]));

    // The node's agent is now a process of its own: the test's controller steps aside as an agent stopped with SIGTERM
    // does (the kernel left as it is), and the Service the kernel refuses goes, so that every sync can succeed.
    await proxy.controller.stop();
    if (proxy.server.get('v1', 'Service', 'default', 'broken')) proxy.server.delete('v1', 'Service', 'default', 'broken');
    if (proxy.server.get('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'broken-a')) proxy.server.delete('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'broken-a');
    const kubeconfig = await proxy.server.writeKubeconfig();
    // Killed with the write of the new Service's IPVS service in flight: its VIP, ipset members and the rest of the
    // sync never happen in that process.
    const first = new ProxyAgentProcess(kernel.runner, { kubeconfig, options: proxyOptions }, {
      killWhileRunning: (spec) => spec.command === 'ipvsadm' && spec.args?.[0] === '-R' && (spec.input ?? '').includes(lateIp),
    });
    let second: ProxyAgentProcess | undefined;
    const background: BackgroundProcess[] = [];
    try {
      const adopted = await first.syncNumber(0);
      expect(adopted, first.stderr).toMatchObject({ reason: 'initial', ok: true, drift: noDrift });
      const before = await owned();
      expect(before.ipvs.some((line) => line.includes(lateIp))).toBe(false);

      // Each kept as soon as it runs, so that a failure starting the next one still stops it.
      const stream = await world.stream(client.netns, '10.96.0.10', 80, 100);
      background.push(stream);
      const prober = await world.prober(client.netns, '10.96.0.10', 80, 100, 3_000);
      background.push(prober);
      await waitFor('the long-lived connection and the prober to get answers', async () =>
        parseStream((await stream.output()).stdout).answers.length >= 3 && parseProbes((await prober.output()).stdout).some((probe) => probe.ok),
      );

      // The slice first, so that the sync the Service triggers writes it with its two real servers.
      proxy.server.create(sliceObject('late', [{ ip: a.ip }, { ip: b.ip }]));
      proxy.server.create(serviceObject({ name: 'late', clusterIP: lateIp }));
      await waitFor('the first proxy process to be killed in its sync of the new Service', () => !first.running, 60_000);
      expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
      const killed = await world.uptime();
      expect(first.killed?.spec.input).toContain(`-A -t ${lateIp}:80`);

      // Started again at once with the same options, as the kubelet's first restart of a crashed container.
      second = new ProxyAgentProcess(kernel.runner, { kubeconfig, options: proxyOptions });
      const restarted = await world.uptime();
      const initial = await second.syncNumber(0);
      const synced = await world.uptime();
      const restartToSyncMs = Math.round(performance.now() - second.spawnedAt);
      const killToSyncMs = synced.ms - killed.ms;
      expect(initial, second.stderr).toMatchObject({ reason: 'initial', ok: true, drift: noDrift });

      // The interrupted change is complete: the new Service answers from both endpoints.
      const answers = await world.probe(client.netns, lateIp, 80, 4);
      expect(new Set(answers.map((answer) => answer.split(' ')[0]))).toEqual(new Set(['a', 'b']));
      // Traffic keeps going for a while after the first sync; then a full sync of the restarted process finds the
      // kernel as it wrote it.
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const periodic = await second.sync('periodic');
      expect(periodic).toMatchObject({ ok: true, drift: noDrift });
      expect(periodic.report?.ipvsOperations).toBe(0);
      const ended = await world.uptime();
      const after = await owned();

      // As before the kill, plus exactly the new Service (its IPVS service and two real servers, its VIP, its two
      // ipset members), each object once; no rule of the chains changed, no set left over from the killed write.
      const withoutLate = (lines: readonly string[]) => lines.filter((line) => !line.includes(lateIp));
      for (const kind of ['ipvs', 'vips', 'sets', 'members', 'rules'] as const) {
        expect(twice(after[kind]), kind).toEqual([]);
        expect(withoutLate(after[kind]), kind).toEqual(before[kind]);
      }
      expect(after.ipvs.filter((line) => line.includes(lateIp))).toEqual(
        [`-A -t ${lateIp}:80 -s rr`, `-a -t ${lateIp}:80 -r ${a.ip}:8080 -m -w 1`, `-a -t ${lateIp}:80 -r ${b.ip}:8080 -m -w 1`].sort(),
      );
      expect(after.vips.filter((line) => line.includes(lateIp))).toEqual([`${lateIp}/32`]);
      expect(after.members.filter((line) => line.includes(lateIp))).toEqual([`add kube-router-svip ${lateIp}`, `add kube-router-svip-prt ${lateIp},tcp:80`]);
      expect(after.rules.filter((line) => line.includes(lateIp))).toEqual([]);
      const healthCheck = await fetch(`http://127.0.0.1:${healthCheckPort}/healthz`);
      expect(healthCheck.status).toBe(200);

      const streamed = parseStream((await stream.stop()).stdout);
      const probes = parseProbes((await prober.stop()).stdout);
      background.length = 0;
      // The established connection: never reset, answered throughout, to the end.
      expect(streamed.ended).toBeUndefined();
      const answeredAfterSync = streamed.answers.filter((time) => time > synced.ms).length;
      expect(answeredAfterSync).toBeGreaterThan(5);
      const gapMs = longestGap(streamed.answers, streamed.answers[0] as number, ended.ms);
      // 100 ms between lines; a connection the kernel dropped or reset would stop for good. The bound leaves room for
      // a loaded 2-core host emulating the guest.
      expect(gapMs).toBeLessThan(3_000);
      const outageGapMs = longestGap(streamed.answers, killed.ms, synced.ms);
      // New connections: the kernel kept everything of this Service while no proxy ran, so none fails, before the
      // first sync of the restarted process (marks late by at most their round trip) or after it.
      const outage = probes.filter((probe) => probe.startedAt >= killed.ms && probe.startedAt < synced.ms);
      const afterSync = probes.filter((probe) => probe.startedAt >= synced.ms && probe.startedAt <= ended.ms);
      expect(outage.length).toBeGreaterThan(5);
      expect(afterSync.length).toBeGreaterThan(5);
      expect(probes.filter((probe) => !probe.ok)).toEqual([]);
      console.info(
        `proxy-restart: killed with ${first.killed?.spec.command} ${first.killed?.spec.args?.join(' ')} in flight (${first.commands} commands relayed); ` +
          `restarted ${restarted.ms - killed.ms} ms after the kill, first sync done ${restartToSyncMs} ms after the restart (its sync ${initial.durationMs} ms, ` +
          `${initial.report?.ipvsOperations} IPVS operations; informers synced ${Math.round((second.startedAt ?? 0) - second.spawnedAt)} ms after the restart), ` +
          `${killToSyncMs} ms after the kill; established connection: ${streamed.answers.length}/${streamed.sent} lines answered, longest gap ${gapMs} ms (${outageGapMs} ms between the kill and the first sync), ` +
          `${answeredAfterSync} answered after the first sync, not reset; new connections: ${outage.length} during the outage (${outage.filter((probe) => !probe.ok).length} failed), ` +
          `${afterSync.length} after the first sync (${afterSync.filter((probe) => !probe.ok).length} failed), ${probes.length} in all; ` +
          `drift after the first and a full sync: ${JSON.stringify(periodic.drift)}; marks late by at most ${Math.max(killed.rttMs, synced.rttMs)} ms; case ${Math.round(performance.now() - started)} ms`,
      );
    } finally {
      for (const running of background) await running.stop().catch(() => undefined);
      first.kill();
      await second?.stop();
    }
  }, 150_000);

  it('cleanup removes its IPVS services, VIPs, kube-dummy-if, ipsets and chains', async () => {
    const plugin = createProxyIpvsPlugin({ runner: kernel.runner });
    const options = proxyIpvsOptions.parse({ ...(world.netns && { netns: world.netns }), enableIpv6: false });
    await plugin.cleanup?.({ nodeName: 'tipvs-node', logger: pino({ level: 'silent' }) }, options);
    expect(await ipvs()).toEqual([]);
    const where = world.netns ? { netns: world.netns } : {};
    const { stdout } = await kernel.sh(
      `ip link show ${DUMMY_INTERFACE} 2>&1; ipset list -n; iptables-save -t filter | grep -c KUBE-ROUTER-SERVICES; iptables-save -t nat | grep -c KUBE-ROUTER-SVC-MASQ; true`,
      where,
    );
    expect(stdout).toMatch(/does not exist/);
    expect(stdout).not.toMatch(/kube-router-/);
    expect(stdout.trim().split('\n').slice(-2)).toEqual(['0', '0']);
    // Nothing to remove is not an error.
    await plugin.cleanup?.({ nodeName: 'tipvs-node', logger: pino({ level: 'silent' }) }, options);
  });
});
