import { describe, expect, it } from 'vitest';
import { PolicyCompiler, compileNetworkPolicies } from './compiler.js';
import { NODE, namespace, pod, policy, seededRandom } from './testing/fixtures.js';
import type { NamespaceLike, NetworkPolicyLike, PodLike } from './types.js';

const baseNamespaces = [namespace('prod', { env: 'prod' }), namespace('dev', { env: 'dev' })];
const basePods = [
  pod('prod/web', { labels: { app: 'web' }, ips: ['10.0.0.1'] }),
  pod('prod/db', { labels: { app: 'db' }, ips: ['10.0.0.2'] }),
  pod('prod/api', { labels: { app: 'api' }, ips: ['10.0.0.3'], node: 'node-b' }),
  pod('dev/client', { labels: { app: 'client' }, ips: ['10.1.0.1'], node: 'node-b' }),
  pod('dev/stray', { labels: { app: 'stray' }, ips: ['10.1.0.2'], node: 'node-c' }),
  pod('prod/batch', { labels: { app: 'batch' }, ips: ['10.0.0.9'], node: 'node-c' }),
];
const basePolicies = [
  policy('prod/web', {
    podSelector: { matchLabels: { app: 'web' } },
    ingress: [{ from: [{ podSelector: { matchLabels: { app: 'api' } } }] }],
  }),
  policy('prod/db', {
    podSelector: { matchLabels: { app: 'db' } },
    ingress: [{ from: [{ namespaceSelector: { matchLabels: { env: 'dev' } } }] }],
  }),
];

function withPod(pods: readonly PodLike[], replacement: PodLike): PodLike[] {
  const id = (p: PodLike) => `${p.metadata?.namespace}/${p.metadata?.name}`;
  return [...pods.filter((p) => id(p) !== id(replacement)), replacement];
}

describe('PolicyCompiler', () => {
  it('returns the same model object when nothing changed', () => {
    const compiler = new PolicyCompiler({ nodeName: NODE });
    const first = compiler.compile({ pods: basePods, namespaces: baseNamespaces, policies: basePolicies });
    expect(compiler.lastStats).toMatchObject({ policiesRecompiled: 2, policiesTotal: 2 });
    // New but equal objects, as a re-list would deliver them.
    const second = compiler.compile({
      pods: basePods.map((p) => structuredClone(p)),
      namespaces: baseNamespaces.map((n) => structuredClone(n)),
      policies: basePolicies.map((p) => structuredClone(p)),
    });
    expect(second).toBe(first);
    expect(compiler.lastStats).toMatchObject({
      podsChanged: 0,
      namespacesChanged: 0,
      policiesChanged: 0,
      policiesRecompiled: 0,
    });
  });

  it('ignores changes that no policy reads', () => {
    const compiler = new PolicyCompiler({ nodeName: NODE });
    const first = compiler.compile({ pods: basePods, namespaces: baseNamespaces, policies: basePolicies });
    // A remote pod that is no peer of any policy gets a new label and IP.
    const pods = withPod(
      basePods,
      pod('prod/batch', { labels: { app: 'batch', version: '2' }, ips: ['10.0.0.19'], node: 'node-c' }),
    );
    const second = compiler.compile({ pods, namespaces: baseNamespaces, policies: basePolicies });
    expect(second).toBe(first);
    expect(compiler.lastStats).toMatchObject({ podsChanged: 1, policiesRecompiled: 0 });
  });

  it('recompiles only the policies a changed peer concerns, keeping the others as they were', () => {
    const compiler = new PolicyCompiler({ nodeName: NODE });
    const first = compiler.compile({ pods: basePods, namespaces: baseNamespaces, policies: basePolicies });
    const pods = withPod(basePods, pod('prod/api', { labels: { app: 'api' }, ips: ['10.0.0.33'], node: 'node-b' }));
    const second = compiler.compile({ pods, namespaces: baseNamespaces, policies: basePolicies });
    expect(compiler.lastStats).toMatchObject({ podsChanged: 1, policiesRecompiled: 1 });
    const byId = (model: typeof first) => new Map(model.policies.map((p) => [p.id, p]));
    expect(byId(second).get('prod/db')).toBe(byId(first).get('prod/db'));
    expect(byId(second).get('prod/web')?.fingerprint).not.toBe(byId(first).get('prod/web')?.fingerprint);
    expect(byId(second).get('prod/web')?.ingress.rules[0]?.peers.pods.ipv4).toEqual(['10.0.0.33']);
  });

  it('keeps the model\'s local pods when only peers changed, and works them out again when a target changed', () => {
    const compiler = new PolicyCompiler({ nodeName: NODE });
    const first = compiler.compile({ pods: basePods, namespaces: baseNamespaces, policies: basePolicies });
    // A remote peer moves: prod/web's peers change, no local pod's policies do.
    const moved = withPod(basePods, pod('prod/api', { labels: { app: 'api' }, ips: ['10.0.0.33'], node: 'node-b' }));
    const second = compiler.compile({ pods: moved, namespaces: baseNamespaces, policies: basePolicies });
    expect(second).not.toBe(first);
    expect(second.pods).toBe(first.pods);
    // prod/web stops isolating its pod in ingress (it now allows everyone): the pods are worked out again.
    const opened = [policy('prod/web', { podSelector: { matchLabels: { app: 'web' } }, policyTypes: ['Egress'] }), basePolicies[1] as NetworkPolicyLike];
    const third = compiler.compile({ pods: moved, namespaces: baseNamespaces, policies: opened });
    expect(third.pods).not.toBe(second.pods);
    expect(third).toEqual(compileNetworkPolicies({ nodeName: NODE, pods: moved, namespaces: baseNamespaces, policies: opened }));
  });

  it('works out the model again when a policy listed twice under one name stops selecting local pods', () => {
    // Informers never list a key twice, but the compiler must not trust its input: the last copy wins.
    const pods = [pod('web/a', { labels: { app: 'a' }, ips: ['10.0.0.1'] })];
    const namespaces = [namespace('web', {})];
    const compiler = new PolicyCompiler({ nodeName: NODE });
    compiler.compile({ pods, namespaces, policies: [policy('web/p', { podSelector: {} })] });
    const twice = [policy('web/p', { podSelector: {}, ingress: [{}] }), policy('web/p', { podSelector: { matchLabels: { app: 'none' } } })];
    const model = compiler.compile({ pods, namespaces, policies: twice });
    expect(model.policies).toEqual([]);
    expect(model.pods[0]?.ingress.isolated).toBe(false);
    expect(() => model.fingerprint).not.toThrow();
    expect(model).toEqual(compileNetworkPolicies({ nodeName: NODE, pods, namespaces, policies: twice }));
  });

  it('recompiles a policy when a pod stops matching its peer selector', () => {
    const compiler = new PolicyCompiler({ nodeName: NODE });
    compiler.compile({ pods: basePods, namespaces: baseNamespaces, policies: basePolicies });
    const pods = withPod(basePods, pod('prod/api', { labels: { app: 'retired' }, ips: ['10.0.0.3'], node: 'node-b' }));
    const model = compiler.compile({ pods, namespaces: baseNamespaces, policies: basePolicies });
    expect(compiler.lastStats.policiesRecompiled).toBe(1);
    expect(model.policies.find((p) => p.id === 'prod/web')?.ingress.rules[0]?.peers.pods.ipv4).toEqual([]);
  });

  it('recompiles the policies whose namespaceSelector a namespace label change concerns', () => {
    const compiler = new PolicyCompiler({ nodeName: NODE });
    compiler.compile({ pods: basePods, namespaces: baseNamespaces, policies: basePolicies });
    const namespaces = [namespace('prod', { env: 'prod' }), namespace('dev', { env: 'staging' })];
    const model = compiler.compile({ pods: basePods, namespaces, policies: basePolicies });
    expect(compiler.lastStats).toMatchObject({ namespacesChanged: 1, policiesRecompiled: 1 });
    expect(model.policies.find((p) => p.id === 'prod/db')?.ingress.rules[0]?.peers.pods.ipv4).toEqual([]);
  });

  it('recompiles a changed policy and drops a deleted one', () => {
    const compiler = new PolicyCompiler({ nodeName: NODE });
    compiler.compile({ pods: basePods, namespaces: baseNamespaces, policies: basePolicies });
    const changed = policy('prod/web', { podSelector: { matchLabels: { app: 'web' } }, ingress: [] });
    const model = compiler.compile({ pods: basePods, namespaces: baseNamespaces, policies: [changed] });
    expect(compiler.lastStats).toMatchObject({ policiesChanged: 2, policiesRecompiled: 1, policiesTotal: 1 });
    expect(model.policies.map((p) => p.id)).toEqual(['prod/web']);
    expect(model.pods.find((p) => p.id === 'prod/db')?.ingress.isolated).toBe(false);
  });

  it('puts a new local pod under the policies that select it', () => {
    const compiler = new PolicyCompiler({ nodeName: NODE });
    compiler.compile({ pods: basePods, namespaces: baseNamespaces, policies: basePolicies });
    const model = compiler.compile({
      pods: [...basePods, pod('prod/web-2', { labels: { app: 'web' }, ips: ['10.0.0.4'] })],
      namespaces: baseNamespaces,
      policies: basePolicies,
    });
    expect(model.policies.find((p) => p.id === 'prod/web')?.targetIPs.ipv4).toEqual(['10.0.0.1', '10.0.0.4']);
    expect(model.pods.find((p) => p.id === 'prod/web-2')?.ingress.policies).toEqual(['prod/web']);
  });

  it('treats a pod leaving the node or finishing like a deleted one', () => {
    const compiler = new PolicyCompiler({ nodeName: NODE });
    compiler.compile({ pods: basePods, namespaces: baseNamespaces, policies: basePolicies });
    const finished = withPod(basePods, pod('prod/web', { labels: { app: 'web' }, ips: ['10.0.0.1'], phase: 'Failed' }));
    const model = compiler.compile({ pods: finished, namespaces: baseNamespaces, policies: basePolicies });
    expect(model.policies.map((p) => p.id)).toEqual(['prod/db']);
    expect(model.pods.map((p) => p.id)).toEqual(['prod/db']);
  });

  it('always agrees with a fresh compile, over random changes', () => {
    const random = seededRandom(2162);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
    const apps = ['web', 'db', 'api', 'cache'];
    const envs = ['prod', 'dev', 'test'];
    const namespaceNames = ['a', 'b', 'c'];
    const selectors = [
      {},
      { matchLabels: { app: 'web' } },
      { matchLabels: { app: 'api' } },
      { matchExpressions: [{ key: 'app', operator: 'In', values: ['db', 'cache'] }] },
      { matchExpressions: [{ key: 'tier', operator: 'Exists' }] },
    ];
    const namespaceSelectors = [
      {},
      { matchLabels: { env: 'prod' } },
      { matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['dev'] }] },
    ];
    const randomPod = (id: string): PodLike =>
      pod(id, {
        labels: { app: pick(apps), ...(random() < 0.3 ? { tier: 'x' } : {}) },
        ips:
          random() < 0.5
            ? [
                `10.0.${Math.floor(random() * 4)}.${Math.floor(random() * 250) + 1}`,
                `fd00::${Math.floor(random() * 999) + 1}`,
              ]
            : [`10.9.${Math.floor(random() * 4)}.${Math.floor(random() * 250) + 1}`],
        node: pick([NODE, NODE, 'node-b', 'node-c']),
        ports: random() < 0.5 ? [{ name: 'http', port: pick([80, 8080, 8443]) }] : [],
        phase: random() < 0.1 ? 'Succeeded' : 'Running',
      });
    const randomPeer = () => {
      const kind = random();
      if (kind < 0.3) return { podSelector: pick(selectors) };
      if (kind < 0.55) return { namespaceSelector: pick(namespaceSelectors) };
      if (kind < 0.8) return { namespaceSelector: pick(namespaceSelectors), podSelector: pick(selectors) };
      return { ipBlock: { cidr: '10.0.0.0/16', except: ['10.0.1.0/24'] } };
    };
    const randomRule = (peerField: 'from' | 'to') => ({
      ...(random() < 0.8 ? { [peerField]: [randomPeer(), ...(random() < 0.3 ? [randomPeer()] : [])] } : {}),
      ...(random() < 0.6
        ? { ports: [random() < 0.5 ? { port: 'http' } : { protocol: pick(['TCP', 'UDP', 'SCTP']), port: 53 }] }
        : {}),
    });
    const randomPolicy = (id: string): NetworkPolicyLike =>
      policy(id, {
        podSelector: pick(selectors),
        ...(random() < 0.8 ? { ingress: [randomRule('from')] } : {}),
        ...(random() < 0.5 ? { egress: [randomRule('to')] } : {}),
        ...(random() < 0.1 ? { ingress: [{ from: [{ ipBlock: { cidr: 'broken' } }] }] } : {}),
      });

    let pods = Array.from({ length: 30 }, (_, i) => randomPod(`${pick(namespaceNames)}/pod-${i}`));
    let namespaces: NamespaceLike[] = namespaceNames.map((name) => namespace(name, { env: pick(envs) }));
    let policies = Array.from({ length: 12 }, (_, i) => randomPolicy(`${pick(namespaceNames)}/policy-${i}`));
    const compiler = new PolicyCompiler({ nodeName: NODE });
    let recompiled = 0;
    for (let step = 0; step < 200; step++) {
      const change = random();
      if (change < 0.5) {
        const index = Math.floor(random() * pods.length);
        const id = `${pods[index]?.metadata?.namespace}/${pods[index]?.metadata?.name}`;
        pods = pods.map((p, i) => (i === index ? randomPod(id) : p));
      } else if (change < 0.6) {
        pods = [...pods.slice(1), randomPod(`${pick(namespaceNames)}/new-${step}`)];
      } else if (change < 0.75) {
        const name = pick(namespaceNames);
        namespaces = namespaces.map((n) => (n.metadata?.name === name ? namespace(name, { env: pick(envs) }) : n));
      } else if (change < 0.95) {
        const index = Math.floor(random() * policies.length);
        const id = `${policies[index]?.metadata?.namespace}/${policies[index]?.metadata?.name}`;
        policies = policies.map((p, i) => (i === index ? randomPolicy(id) : p));
      } else {
        policies = [...policies.slice(1), randomPolicy(`${pick(namespaceNames)}/new-${step}`)];
      }
      const incremental = compiler.compile({ pods, namespaces, policies });
      recompiled += compiler.lastStats.policiesRecompiled;
      const fresh = compileNetworkPolicies({ nodeName: NODE, pods, namespaces, policies });
      // Comparing serialised models is much faster than a deep equality over hundreds of steps; diff only on failure.
      if (JSON.stringify(incremental) !== JSON.stringify(fresh)) expect(incremental, `step ${step}`).toEqual(fresh);
    }
    // The incremental path must actually have skipped work for this test to mean anything.
    expect(recompiled).toBeLessThan(200 * 12 * 0.6);
  });
  it('compiles a policy again when it changes only in a value that JSON cannot write (NaN), as a fresh compile would', () => {
    const allTcp = (port: unknown) =>
      policy('prod/web', { podSelector: { matchLabels: { app: 'web' } }, ingress: [{ ports: [{ protocol: 'TCP', port }] }] });
    const compiler = new PolicyCompiler({ nodeName: NODE });
    const input = (port: unknown) => ({ pods: basePods, namespaces: baseNamespaces, policies: [allTcp(port)] });
    const fresh = (port: unknown) => compileNetworkPolicies({ nodeName: NODE, ...input(port) });
    // null is "every port"; NaN (a spec built in code, or `.nan` in YAML) is no port at all, and JSON writes it as null.
    for (const port of [null, Number.NaN, null, Number.POSITIVE_INFINITY]) {
      const model = compiler.compile(input(port));
      expect(model.fingerprint).toBe(fresh(port).fingerprint);
      expect(model.problems.length > 0).toBe(port !== null);
    }
  });

  it('reports a pod\'s problem at its new path when only the path changed', () => {
    const badPort = (container: number) => {
      const bad = pod('prod/web', { labels: { app: 'web' }, ips: ['10.0.0.1'] });
      const containers = [{ ports: [] as unknown[] }, { ports: [] as unknown[] }];
      (containers[container] as { ports: unknown[] }).ports.push({ name: 'http', containerPort: 70000 });
      return withPod(basePods, { ...bad, spec: { ...bad.spec, containers } } as PodLike);
    };
    const compiler = new PolicyCompiler({ nodeName: NODE });
    compiler.compile({ pods: badPort(0), namespaces: baseNamespaces, policies: basePolicies });
    const moved = compiler.compile({ pods: badPort(1), namespaces: baseNamespaces, policies: basePolicies });
    expect(moved.podProblems.map((problem) => problem.path)).toEqual(['spec.containers[1].ports[0].containerPort']);
  });
});
