import { describe, expect, it } from 'vitest';
import { PolicyCompiler, compileNetworkPolicies } from './compiler.js';
import type { CompileInput } from './compiler.js';
import type { PolicyModel } from './model.js';
import { NODE, namespace, pod, policy } from './testing/fixtures.js';

/** The model's fingerprint covers everything in it; comparing it spares a deep comparison of thousands of lists. */
const fresh = (input: CompileInput): Pick<PolicyModel, 'fingerprint'> => ({
  fingerprint: compileNetworkPolicies({ nodeName: NODE, ...input }).fingerprint,
});

/** A cluster big enough to take many slices of a millisecond: 500 pods, 100 policies over 10 namespaces. */
function cluster(labelOffset = 0): CompileInput {
  const namespaces = Array.from({ length: 10 }, (_, i) => namespace(`ns-${i}`, { team: `t${i % 3}` }));
  const pods = Array.from({ length: 500 }, (_, i) =>
    pod(`ns-${i % 10}/pod-${i}`, {
      labels: { app: `app-${(i + labelOffset) % 15}` },
      ips: [`10.${1 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`],
      node: i % 8 === 0 ? NODE : 'node-b',
      ports: [{ name: 'http', port: 8000 + (i % 3) }],
    }),
  );
  const policies = Array.from({ length: 100 }, (_, i) =>
    policy(`ns-${i % 10}/policy-${i}`, {
      podSelector: { matchLabels: { app: `app-${i % 15}` } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: `t${i % 3}` } } }], ports: [{ port: 'http' }] }],
      egress: [{ to: [{ ipBlock: { cidr: '10.1.0.0/20' } }], ports: [{ port: 'http' }] }],
    }),
  );
  return { pods, namespaces, policies };
}

describe('PolicyCompiler.compileAsync', () => {
  it('gives the event loop turns during a large compile and returns what compile returns', async () => {
    const input = cluster();
    const compiler = new PolicyCompiler({ nodeName: NODE });
    let turns = 0;
    let ticking = true;
    const tick = () => {
      turns++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const model = await compiler.compileAsync(input, { sliceMs: 1 });
    ticking = false;
    expect(turns).toBeGreaterThan(2);
    expect(model).toMatchObject(fresh(input));
  });

  it('queues calls, each compiling against the state the previous one left', async () => {
    const first = cluster();
    const second = cluster(1);
    const compiler = new PolicyCompiler({ nodeName: NODE });
    const [a, b] = await Promise.all([
      compiler.compileAsync(first, { sliceMs: 1 }),
      compiler.compileAsync(second, { sliceMs: 1 }),
    ]);
    expect(a).toMatchObject(fresh(first));
    expect(b).toMatchObject(fresh(second));
    expect(compiler.compile(second)).toBe(b);
  });

  it('refuses a synchronous compile while an asynchronous one runs', async () => {
    const compiler = new PolicyCompiler({ nodeName: NODE });
    const running = compiler.compileAsync(cluster(), { sliceMs: 1 });
    await new Promise((resolve) => setImmediate(resolve));
    expect(() => compiler.compile(cluster())).toThrow(/while compileAsync is running/);
    await running;
  });
});
