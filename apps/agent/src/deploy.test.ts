import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parse } from 'yaml';
import { AgentMetrics } from '@kube-router/metrics';
import { formatGoDuration } from './duration.js';
import { DEFAULT_GOBGP_PROTO_DIR } from '@kube-router/routing-bgp';
import { defaultCatalog, pluginsForConfig } from './catalog.js';
import { FLAGS, type FlagDefinition } from './flags.js';
import { helpText, parseFlags } from './parse-flags.js';
import { hasTool, run } from './testing/support.js';

const repo = fileURLToPath(new URL('../../../', import.meta.url));
const read = (path: string) => readFileSync(`${repo}${path}`, 'utf8');
const documents = (path: string) => parseAllDocuments(read(path)).map((doc) => doc.toJS() as Record<string, any>); // eslint-disable-line @typescript-eslint/no-explicit-any

describe('deploy/ Prometheus rules', () => {
  it('keeps the PrometheusRule groups identical to the plain rules file', () => {
    const [crd] = documents('deploy/prometheus-rule.yaml');
    const plain = parse(read('deploy/prometheus/rules.yaml')) as { groups: unknown[] };
    expect(crd?.kind).toBe('PrometheusRule');
    expect(plain.groups.length).toBeGreaterThan(0);
    expect(crd?.spec.groups).toEqual(plain.groups);
  });

  it('alerts on both sync metrics, and on netpol rejects rising for a namespace', () => {
    const plain = parse(read('deploy/prometheus/rules.yaml')) as { groups: Array<{ rules: Array<{ alert: string; expr: string }> }> };
    const rules = plain.groups.flatMap((group) => group.rules);
    expect(rules.map((rule) => rule.alert)).toEqual(['KubeRouterControllerSyncStale', 'KubeRouterControllerSyncFailing', 'KubeRouterNetpolRejectsRising']);
    expect(rules[0]?.expr).toContain('kube_router_controller_sync_last_success');
    expect(rules[1]?.expr).toContain('kube_router_controller_sync_failures_total');
    expect(rules[2]?.expr).toContain('kube_router_netpol_rejected_packets_total');
  });

  describe.skipIf(!hasTool('promtool'))('with promtool (skipped when missing: apt-get install prometheus)', () => {
    it('promtool check rules accepts the rules', async () => {
      const result = await run('promtool', ['check', 'rules', 'deploy/prometheus/rules.yaml'], { cwd: repo });
      expect(result.code, result.stdout + result.stderr).toBe(0);
      expect(result.stdout).toContain('SUCCESS: 3 rules found');
    });

    it('promtool test rules passes: firing and quiet cases of each alert', async () => {
      const result = await run('promtool', ['test', 'rules', 'deploy/prometheus/rules.test.yaml'], { cwd: repo });
      expect(result.code, result.stdout + result.stderr).toBe(0);
      expect(result.stdout).toContain('SUCCESS');
    });
  });
});

const DAEMONSETS = {
  'deploy/kube-router-all-features.yaml': { firewall: true, 'service-proxy': true, router: true, loadbalancer: false },
  'deploy/kube-router-firewall-only.yaml': { firewall: true, 'service-proxy': false, router: false, loadbalancer: false },
  'deploy/kube-router-proxy-only.yaml': { firewall: false, 'service-proxy': true, router: false, loadbalancer: false },
};

describe.each(Object.entries(DAEMONSETS))('%s', (path, features) => {
  const [daemonSet] = documents(path);
  const pod = daemonSet?.spec.template.spec;
  const container = pod?.containers[0];

  it('passes args that the CLI accepts, enabling the right features', () => {
    expect(daemonSet?.kind).toBe('DaemonSet');
    const flags = parseFlags(container.args, { NODE_NAME: 'n' });
    expect(flags.ok, flags.ok ? '' : flags.stderr).toBe(true);
    if (!flags.ok) return;
    expect(flags.config.features).toEqual(features);
    expect(container.ports).toContainEqual({ name: 'metrics', containerPort: flags.config.metrics.port, protocol: 'TCP' });
    expect(container.ports).toContainEqual({ name: 'health', containerPort: flags.config.health.port, protocol: 'TCP' });
  });

  it('probes /healthz for liveness with an explained kill budget, and /readyz for readiness', () => {
    expect(container.livenessProbe).toMatchObject({ httpGet: { path: '/healthz', port: 20244 } });
    const { periodSeconds, failureThreshold } = container.livenessProbe;
    expect(periodSeconds * failureThreshold).toBe(9);
    expect(read(path)).toContain(`periodSeconds x failureThreshold = ${periodSeconds}s x ${failureThreshold} = 9s`);
    expect(read(path)).toMatch(/sync that FAILS keeps this probe green/);
    expect(container.readinessProbe).toMatchObject({ httpGet: { path: '/readyz', port: 20244 } });
  });

  it('runs as the ServiceAccount of deploy/rbac.yaml, on the host network, with the node name', () => {
    const account = documents('deploy/rbac.yaml').find((doc) => doc.kind === 'ServiceAccount');
    expect(pod.serviceAccountName).toBe(account?.metadata.name);
    expect(daemonSet?.metadata.namespace).toBe(account?.metadata.namespace);
    expect(pod.hostNetwork).toBe(true);
    expect(container.env).toContainEqual({ name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } });
  });
});

describe('deploy/rbac.yaml', () => {
  it('grants what the agent reads and writes', () => {
    const docs = documents('deploy/rbac.yaml');
    const role = docs.find((doc) => doc.kind === 'ClusterRole');
    const binding = docs.find((doc) => doc.kind === 'ClusterRoleBinding');
    const can = (group: string, resource: string, verb: string) =>
      (role?.rules as Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }>).some(
        (rule) => rule.apiGroups.includes(group) && rule.resources.includes(resource) && rule.verbs.includes(verb),
      );
    // Each grant is shown needed by rbac.test.ts; here, the ones a reader looks for first.
    for (const resource of ['pods', 'namespaces', 'nodes', 'services']) {
      for (const verb of ['list', 'watch']) expect(can('', resource, verb), `${verb} ${resource}`).toBe(true);
    }
    expect(can('discovery.k8s.io', 'endpointslices', 'watch')).toBe(true);
    expect(can('networking.k8s.io', 'networkpolicies', 'watch')).toBe(true);
    expect(can('', 'services/status', 'update')).toBe(true);
    expect(can('coordination.k8s.io', 'leases', 'update')).toBe(true);
    expect(can('', 'events', 'create')).toBe(true);
    expect(can('', 'pods', 'delete')).toBe(false);
    expect(binding?.roleRef.name).toBe(role?.metadata.name);
  });
});

describe('deploy/Dockerfile', () => {
  it('builds on node:20-bookworm-slim with the dataplane tools and runs kube-router', () => {
    const dockerfile = read('deploy/Dockerfile');
    expect(dockerfile).toMatch(/^FROM node:20-bookworm-slim\b/m);
    for (const tool of ['iptables', 'ipset', 'nftables', 'iproute2', 'ipvsadm', 'conntrack']) {
      expect(dockerfile).toMatch(new RegExp(`apt-get install [^\\n]*\\b${tool}\\b`));
    }
    expect(dockerfile).toContain('npm ci');
    expect(dockerfile).toContain('ENTRYPOINT ["kube-router"]');
  });

  it("installs every executable the build's plugins name in `tools`, and gobgpd's protos (the image had no gobgpd)", () => {
    const dockerfile = read('deploy/Dockerfile');
    for (const tool of pluginTools()) {
      const pkg = debianPackageOf(tool);
      expect(pkg, `no Debian package known for ${tool}`).toBeDefined();
      expect(dockerfileRuntimePackages(), `${tool} (${pkg})`).toContain(pkg);
    }
    // routing-bgp loads gobgpd's API protos at run time, from where Debian's golang-github-osrg-gobgp-dev puts them.
    expect(dockerfile).toMatch(/^FROM node:20-bookworm-slim AS build[\s\S]*apt-get install[^\n]*golang-github-osrg-gobgp-dev/m);
    expect(dockerfile).toContain(`COPY --from=build ${DEFAULT_GOBGP_PROTO_DIR}/*.proto ${DEFAULT_GOBGP_PROTO_DIR}/`);
  });
});

// `npm run image` builds the image on a machine without a registry to pull node:20-bookworm-slim from: the same
// Debian packages by mmdebstrap, Node from the npm registry. Its list cannot drift from the Dockerfile's.
describe('deploy/build-image.mjs', () => {
  const script = read('deploy/build-image.mjs');

  it("installs the Dockerfile runtime stage's packages, so every plugin's tools, and gobgpd's protos", () => {
    const list = /^const RUNTIME_PACKAGES = \[([^\]]*)\];/m.exec(script)?.[1];
    expect(list, 'const RUNTIME_PACKAGES = [...] on one line').toBeDefined();
    const packages = [...list!.matchAll(/'([^']+)'/g)].map((match) => match[1]);
    expect(packages).toEqual(dockerfileRuntimePackages());
    for (const tool of pluginTools()) expect(packages, tool).toContain(debianPackageOf(tool));
    expect(script).toContain(`const PROTO_DIR = '${DEFAULT_GOBGP_PROTO_DIR}';`);
    expect(script).toContain("const PROTO_PACKAGE = 'golang-github-osrg-gobgp-dev';");
    expect(script).toContain("'--entrypoint=[\"kube-router\"]'");
    expect(read('package.json')).toContain('"image": "node deploy/build-image.mjs"');
  });

  it("pins a Node 20 that the packages' engines accept", () => {
    const version = /^\s*version: '(\d+)\.(\d+)\.(\d+)',$/m.exec(script)?.slice(1).map(Number);
    expect(version, 'NODE.version').toBeDefined();
    const [major, minor] = version!;
    expect(major).toBe(20);
    const engines = (JSON.parse(read('package.json')) as { engines: { node: string } }).engines.node;
    const [, wantMajor, wantMinor] = /^>=(\d+)\.(\d+)$/.exec(engines)!.map(Number);
    expect(major! > wantMajor! || (major === wantMajor && minor! >= wantMinor!), `${version!.join('.')} satisfies ${engines}`).toBe(true);
    expect(script).toMatch(/integrity: 'sha512-[A-Za-z0-9+/]+={0,2}'/);
  });
});

/** Every executable the plugins of an all-features build (IPv6 and the allocator too) name in `tools`. */
function pluginTools(): Set<string> {
  const every = parseFlags(['--run-firewall', '--run-router', '--run-service-proxy', '--run-loadbalancer', '--enable-ipv6', '--netpol-drop-log'], {
    NODE_NAME: 'node',
  });
  if (!every.ok) throw new Error(every.stderr);
  const plugins = pluginsForConfig(every.config, defaultCatalog);
  const tools = new Set(plugins.flatMap(({ plugin, options }) => [...(plugin.tools?.(plugin.options.parse(options ?? {})) ?? [])]));
  expect(tools).toContain('gobgpd');
  return tools;
}

/** Where Debian (bookworm) ships each executable the plugins run. */
function debianPackageOf(tool: string): string | undefined {
  const packageOf: Record<string, string> = {
    gobgpd: 'gobgpd',
    ip: 'iproute2',
    bridge: 'iproute2',
    ipset: 'ipset',
    ipvsadm: 'ipvsadm',
    conntrack: 'conntrack',
    nft: 'nftables',
    sysctl: 'procps',
    modprobe: 'kmod',
    tcpdump: 'tcpdump',
  };
  return /^ip6?tables/.test(tool) ? 'iptables' : packageOf[tool];
}

/** What the Dockerfile's runtime stage (the last FROM) installs. */
function dockerfileRuntimePackages(): string[] {
  const dockerfile = read('deploy/Dockerfile');
  const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  return [...runtime.matchAll(/apt-get install ([^\n&]*)/g)]
    .flatMap((line) => line[1]!.trim().split(/\s+/))
    .filter((word) => /^[a-z0-9][a-z0-9+.-]*$/.test(word));
}

describe('docs/', () => {
  it('docs/metrics.md describes every kube_router_ metric', async () => {
    const doc = read('docs/metrics.md');
    const names = (await new AgentMetrics({ collectDefaultMetrics: false }).registry.getMetricsAsJSON()).map((m) => m.name);
    expect(names.length).toBeGreaterThanOrEqual(3);
    for (const name of names) expect(doc).toContain(name);
  });

  it('docs/agent.md lists every CLI flag with its type, default and feature as the code has them', () => {
    const doc = read('docs/agent.md');
    const rows = new Map(
      [...doc.matchAll(/^\| (?:`-\w`, )?`--([a-z0-9-]+)` \| ([^|]+) \| ([^|]*) \| ([^|]+) \|/gm)].map((m) => [
        m[1],
        { type: m[2]!.trim(), defaultText: m[3]!.trim().replaceAll('`', ''), feature: m[4]!.trim() },
      ]),
    );
    for (const [name, definition] of Object.entries(FLAGS as Record<string, FlagDefinition>)) {
      const row = rows.get(name);
      expect(row, `docs/agent.md has no row for --${name}`).toBeDefined();
      const shown =
        definition.type === 'duration'
          ? formatGoDuration(definition.default as number)
          : Array.isArray(definition.default)
            ? definition.default.join(',')
            : typeof definition.default === 'object'
              ? ''
              : String(definition.default);
      expect(row, `--${name}`).toEqual({
        type: definition.type,
        defaultText: shown,
        feature: definition.features.length > 0 ? definition.features.join(', ') : 'agent',
      });
    }
    expect([...rows.keys()].filter((name) => !Object.hasOwn(FLAGS, name ?? ''))).toEqual([]);
    for (const flag of new Set([...helpText().matchAll(/--[a-z0-9-]+/g)].map((m) => m[0]))) expect(doc, flag).toContain(`\`${flag}`);
  });
});
