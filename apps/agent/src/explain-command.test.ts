import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { createSyncController, definePlugin, servicePathExplainerKey } from '@kube-router/controller';
import type { ServicePath } from '@kube-router/controller';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addNetns, deleteNetns, ExecRunner, hasTool } from '@kube-router/netfilter';
import { startApiServer, waitFor, type ApiServer } from '@kube-router/testkit';
import { HealthRegistry } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import { createAgent, type Agent } from './agent.js';
import { firewallPlugins } from './catalog.js';
import { connectToCluster, type ClusterConnection } from './cluster.js';
import { formatExplanation, mergeReplies, parseDestination, runExplain } from './explain-command.js';
import { parseFlags } from './parse-flags.js';
import { startServers } from './servers.js';

const missing = process.getuid?.() !== 0 ? 'needs root' : ['ip', 'iptables-restore', 'ipset', 'nft'].find((tool) => !hasTool(tool));

describe('parseDestination', () => {
  it.each([
    ['web/server:80', { target: 'web/server', port: 80, protocol: 'TCP' }],
    ['10.0.0.5:53/udp', { target: '10.0.0.5', port: 53, protocol: 'UDP' }],
    ['[fd00::5]:443/SCTP', { target: 'fd00::5', port: 443, protocol: 'SCTP' }],
  ])('reads %s', (text, expected) => expect(parseDestination(text)).toEqual(expected));

  it.each([
    ['web/server', /give a destination and port/],
    ['fd00::5:80', /give a destination and port/],
    ['web/server:0', /port 0 is not in 1-65535/],
    ['web/server:80/icmp', /protocol icmp is not tcp, udp or sctp/],
  ])('refuses %s with a message', (text, message) => expect(parseDestination(text)).toMatch(message));
});

describe('the metrics server without --enable-explain', () => {
  it('has no /explain route (404)', async () => {
    const logger = pino({ level: 'silent' });
    const servers = await startServers({
      health: false,
      metrics: { addr: '127.0.0.1', port: 0, path: '/metrics' },
      healthRegistry: new HealthRegistry({ defaultGraceMs: 1_000 }),
      agentMetrics: new AgentMetrics({ collectDefaultMetrics: false }),
      logger,
    });
    try {
      expect((await fetch(`${new URL(servers.metricsUrl!).origin}/explain?from=a/b&to=c/d&port=80`)).status).toBe(404);
      // What the command says of such an agent: the flag it lacks, not fastify's "Not Found".
      let stderr = '';
      const code = await runExplain(['--from', 'a/b', '--to', 'c/d:80', '--agent', new URL(servers.metricsUrl!).origin], { stdout: () => undefined, stderr: (text) => (stderr += text) });
      expect({ code, stderr }).toEqual({ code: 2, stderr: expect.stringContaining('no /explain here: is the agent started with --enable-explain and the firewall on?') });
    } finally {
      await servers.close();
    }
  });
});

describe('mergeReplies', () => {
  it('says so when no agent answered', () => {
    expect(mergeReplies([{ agent: 'http://a', error: 'fetch failed' }])).toBe('no agent answered:\n  http://a: fetch failed');
  });

  it('warns when an agent could not write all of its rules, and names an agent that did not answer', () => {
    const side = { verdict: 'not-isolated' as const, pod: 'web/a', policies: [], failedPolicies: [] };
    const answer = {
      node: 'n1',
      appliedAt: '2026-01-01T00:00:00.000Z',
      writeFailures: ['node/ipv6'],
      flow: { source: '10.0.0.1', destination: '10.0.0.2', protocol: 'TCP' as const, port: 80 },
      from: { input: 'web/a', ip: '10.0.0.1', pod: 'web/a', node: 'n1' },
      to: { input: 'web/b', ip: '10.0.0.2', pod: 'web/b', node: 'n1' },
      explanation: { allowed: true, egress: side, ingress: { ...side, pod: 'web/b' } },
    };
    const merged = mergeReplies([{ agent: 'http://n1', answer }, { agent: 'http://n2', error: 'HTTP 503' }]);
    if (typeof merged === 'string') throw new Error(merged);
    expect(formatExplanation(merged)).toBe(
      [
        'web/a (10.0.0.1, node n1) -> web/b (10.0.0.2, node n1) TCP/80: ALLOWED',
        '  egress  (decided on n1): allowed: no network policy selects web/a for egress',
        '  ingress (decided on n1): allowed: no network policy selects web/b for ingress',
        '  warning: the last sync on n1 could not write node/ipv6: its kernel may differ',
        '  agent http://n2 did not answer: HTTP 503',
        '',
      ].join('\n'),
    );
  });
});

/**
 * A stand-in proxy for the Service part of explain: the real one (proxy-ipvs) needs IPVS, which this kernel lacks,
 * and is tested in the QEMU guest (`explains a flow to a Service` in proxy.real.test.ts). Its path names the pods
 * web/server and web/stranger as endpoints of 10.96.0.10:80; only the client's node holds a connection.
 */
const SERVICE_IP = '10.96.0.10';
const standInProxy = definePlugin({
  name: 'stand-in-proxy',
  host: '^1.0.0',
  options: { parse: () => ({}) },
  create(ctx) {
    ctx.services.provide(servicePathExplainerKey, {
      explainServiceFlow: async (flow): Promise<ServicePath | undefined> =>
        flow.destination !== SERVICE_IP || flow.port !== 80
          ? undefined
          : {
              service: 'web/front',
              portName: 'http',
              kind: 'cluster-ip',
              via: `stand-in TCP ${SERVICE_IP}:80 rr`,
              endpoints: [
                { address: '10.244.1.2', port: 80, weight: 1 },
                { address: '10.244.2.4', port: 80, weight: 1 },
              ],
              connections:
                ctx.nodeName === 'krt-ex-b' && flow.source !== undefined
                  ? [{ client: { address: flow.source, port: 40000 }, endpoint: { address: '10.244.1.2', port: 80 }, state: 'ESTABLISHED' }]
                  : [],
            },
    });
    return createSyncController(ctx, { name: 'stand-in-proxy', syncPeriodMs: 600_000, sync: async () => undefined });
  },
});

/** Pods on two nodes, and a third node whose agent nobody asks. */
const NODES = ['krt-ex-a', 'krt-ex-b'] as const;
const pods = [
  { namespace: 'web', name: 'server', node: NODES[0], ip: '10.244.1.2', labels: { app: 'server' } },
  { namespace: 'web', name: 'client', node: NODES[1], ip: '10.244.2.3', labels: { app: 'client' } },
  { namespace: 'web', name: 'stranger', node: NODES[1], ip: '10.244.2.4', labels: { app: 'stranger' } },
  { namespace: 'web', name: 'far', node: 'krt-ex-unasked', ip: '10.244.3.5', labels: { app: 'client' } },
];

describe.skipIf(missing !== undefined).each(['iptables', 'nftables'] as const)(`explain on real agents (%s)${missing ? ` (skipped: ${missing})` : ''}`, (backend) => {
  const runId = randomBytes(2).toString('hex');
  const exec = new ExecRunner();
  const netnses = NODES.map((node) => `krt-${node.slice(4)}-${runId}`);
  let server: ApiServer;
  const agents: Agent[] = [];
  const clusters: ClusterConnection[] = [];
  let urls: string[] = [];

  const explain = async (args: readonly string[]) => {
    let stdout = '';
    let stderr = '';
    const code = await runExplain(args, { stdout: (text) => (stdout += text), stderr: (text) => (stderr += text) });
    return { code, stdout, stderr };
  };

  beforeAll(async () => {
    server = await startApiServer();
    server.upsert({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'web' } });
    for (const pod of pods) {
      const object = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { namespace: pod.namespace, name: pod.name, labels: pod.labels },
        spec: { nodeName: pod.node, containers: [{ name: 'c', image: 'pause', ports: [{ name: 'http', containerPort: 80 }] }] },
      };
      server.create(object);
      server.updateStatus({ ...object, status: { phase: 'Running', podIP: pod.ip, podIPs: [{ ip: pod.ip }] } });
    }
    server.upsert({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { namespace: 'web', name: 'server-from-client' },
      spec: { podSelector: { matchLabels: { app: 'server' } }, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }], ports: [{ port: 'http' }] }] },
    });
    const kubeconfig = await server.writeKubeconfig();
    for (const [index, node] of NODES.entries()) {
      const netns = netnses[index]!;
      await addNetns(exec, netns);
      const parsed = parseFlags(
        [
          '--kubeconfig', kubeconfig, '--hostname-override', node, '--run-router=false', '--run-service-proxy=false',
          '--metrics-port=1', '--enable-explain', ...(backend === 'nftables' ? ['--use-nftables-for-netpol'] : []),
        ],
        {},
      );
      if (!parsed.ok) throw new Error(parsed.stderr);
      const logger = pino({ level: 'silent' });
      const cluster = connectToCluster({ nodeName: node, kubeconfig, logger });
      clusters.push(cluster);
      const agent = await createAgent({
        ...cluster,
        plugins: [...firewallPlugins(parsed.config, netns), { plugin: standInProxy }],
        // The flags' metrics settings (explain on) on a free loopback port.
        options: { nodeName: node, health: false, metrics: { ...parsed.config.metrics, addr: '127.0.0.1', port: 0 } },
        logger,
      });
      agents.push(agent);
      await agent.start();
    }
    urls = agents.map((agent) => new URL(agent.metricsUrl!).origin);
    // Each agent answers once its first sync is applied (503 until then).
    await waitFor(
      'both agents have applied a sync',
      async () => (await Promise.all(urls.map((url) => fetch(`${url}/explain?from=web/client&to=web/server&port=80`)))).every((r) => r.status === 200),
      60_000,
    );
  }, 120_000);

  afterAll(async () => {
    for (const agent of agents) await agent.stop();
    for (const cluster of clusters) await cluster.close();
    for (const netns of netnses) await deleteNetns(exec, netns).catch(() => undefined);
    await server?.close();
  }, 60_000);

  it('answers GET /explain with the verdict, the policies and the rule; 400 with the message for a bad request', async () => {
    const [a] = urls as [string, string];
    const response = await fetch(`${a}/explain?from=web/client&to=web/server&port=80&protocol=TCP`);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({
      node: NODES[0],
      flow: { source: '10.244.2.3', destination: '10.244.1.2', protocol: 'TCP', port: 80 },
      from: { pod: 'web/client', node: NODES[1] },
      to: { pod: 'web/server', node: NODES[0] },
      explanation: {
        allowed: true,
        egress: { verdict: 'not-local' },
        ingress: { verdict: 'allowed', pod: 'web/server', policies: ['web/server-from-client'], rule: { policy: 'web/server-from-client', direction: 'ingress', index: 0 } },
      },
    });
    for (const [query, error] of [
      ['from=web/ghost&to=web/server&port=80', 'from: no pod web/ghost in the cluster'],
      ['from=web/client&to=web/server&port=80&protocol=icmp', 'protocol "icmp" is not one of TCP, UDP, SCTP'],
      ['from=web/client&to=web/server', 'a destination port is needed (1-65535)'],
      ['from=web/client&from=web/far&to=web/server&port=80', 'from given more than once'],
    ]) {
      const bad = await fetch(`${a}/explain?${query}`);
      expect({ status: bad.status, body: await bad.json() }).toEqual({ status: 400, body: { error } });
    }
  });

  it('kube-router explain merges the agents: egress from the source node, ingress from the destination node', async () => {
    const agentFlags = urls.flatMap((url) => ['--agent', url]);
    const allowed = await explain(['--from', 'web/client', '--to', 'web/server:80', ...agentFlags]);
    expect(allowed, allowed.stderr).toMatchObject({ code: 0, stderr: '' });
    expect(allowed.stdout).toBe(
      [
        `web/client (10.244.2.3, node ${NODES[1]}) -> web/server (10.244.1.2, node ${NODES[0]}) TCP/80: ALLOWED`,
        `  egress  (decided on ${NODES[1]}): allowed: no network policy selects web/client for egress`,
        `  ingress (decided on ${NODES[0]}): allowed by web/server-from-client spec.ingress[0]; isolated by web/server-from-client`,
        '',
      ].join('\n'),
    );

    const denied = await explain(['--from', 'web/stranger', '--to', '10.244.1.2:80/tcp', ...agentFlags, '-o', 'json']);
    expect(denied.code).toBe(1);
    expect(JSON.parse(denied.stdout)).toMatchObject({
      verdict: 'denied',
      egress: { passes: true, verdict: 'not-isolated', decidedBy: { node: NODES[1] } },
      ingress: { passes: false, verdict: 'denied', policies: ['web/server-from-client'], decidedBy: { node: NODES[0], agent: urls[0] } },
    });
    // A port the rule does not name.
    expect((await explain(['--from', 'web/client', '--to', 'web/server:81', ...agentFlags])).code).toBe(1);
  });

  it('explains a flow to a Service address through the proxy: each endpoint’s verdict, and where the client’s connection went', async () => {
    const agentFlags = urls.flatMap((url) => ['--agent', url]);
    const fromClient = await explain(['--from', 'web/client', '--to', `${SERVICE_IP}:80`, ...agentFlags]);
    expect(fromClient, fromClient.stderr).toMatchObject({ code: 0, stderr: '' });
    expect(fromClient.stdout).toBe(
      [
        `web/client (10.244.2.3, node ${NODES[1]}) -> ${SERVICE_IP} TCP/80: ALLOWED`,
        `  service web/front port http (cluster-ip), on ${NODES[1]}: stand-in TCP ${SERVICE_IP}:80 rr`,
        '    endpoint 10.244.1.2:80 web/server: allowed by web/server-from-client spec.ingress[0]; isolated by web/server-from-client',
        '    endpoint 10.244.2.4:80 web/stranger: allowed: no network policy selects web/stranger for ingress',
        '    connection 10.244.2.3:40000 went to 10.244.1.2:80 (ESTABLISHED)',
        '',
      ].join('\n'),
    );
    // The policy admits web/client only: from web/stranger one endpoint refuses and the other (itself) lets it in.
    const fromStranger = await explain(['--from', 'web/stranger', '--to', `${SERVICE_IP}:80`, ...agentFlags, '-o', 'json']);
    expect(fromStranger.code).toBe(1);
    expect(JSON.parse(fromStranger.stdout)).toMatchObject({
      verdict: 'partly',
      service: {
        node: NODES[1],
        endpoints: [
          { endpoint: { address: '10.244.1.2' }, explanation: { verdict: 'denied', ingress: { verdict: 'denied', policies: ['web/server-from-client'] } } },
          { endpoint: { address: '10.244.2.4' }, explanation: { verdict: 'allowed' } },
        ],
      },
    });
    // Another port of that address is no Service: the address is explained as it is, no pod.
    const other = await explain(['--from', 'web/client', '--to', `${SERVICE_IP}:81`, ...agentFlags]);
    expect(other.stdout).not.toContain('service ');
  });

  it('says which side no agent asked decides, and exits 2 when that leaves the verdict open', async () => {
    const open = await explain(['--from', 'web/far', '--to', 'web/client:80', '--agent', urls[0]!]);
    expect(open.code).toBe(2);
    expect(open.stdout).toContain(`  egress : not decided by any agent asked: web/far runs on krt-ex-unasked`);
    expect(open.stdout).toContain(`  ingress: not decided by any agent asked: web/client runs on ${NODES[1]}`);
    // An outside address is no pod: its side passes, and the one asked agent decides the other.
    const outside = await explain(['--from', '192.0.2.1', '--to', 'web/server:80', '--agent', urls[0]!]);
    expect(outside.code).toBe(1);
    expect(outside.stdout).toContain('  egress : 192.0.2.1 is no pod of the cluster: no network policy applies to it');
  });

  it('refuses bad arguments and unreachable agents with exit code 2 and a message', async () => {
    expect(await explain(['--from', 'web/client', '--to', 'web/server'])).toMatchObject({ code: 2, stderr: expect.stringContaining('give a destination and port') });
    expect(await explain(['--from', 'web/ghost', '--to', 'web/server:80', '--agent', urls[0]!])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('from: no pod web/ghost in the cluster'),
    });
    expect(await explain(['--to', 'web/server:80'])).toMatchObject({ code: 2, stderr: expect.stringContaining('--from is required') });
    expect(await explain(['--from', 'a/b', '--to', 'web/server:80', '--bogus'])).toMatchObject({ code: 2, stderr: expect.stringContaining("Unknown option '--bogus'") });
    const unreachable = await explain(['--from', 'web/client', '--to', 'web/server:80', '--agent', 'http://127.0.0.1:1', '--timeout', '2s']);
    expect(unreachable).toMatchObject({ code: 2, stderr: expect.stringContaining('no agent answered:\n  http://127.0.0.1:1: fetch failed') });
  });
});
