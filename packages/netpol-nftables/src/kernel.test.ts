import { Mutex, Nft, RecordingRunner } from '@kube-router/netfilter';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { KernelApplier } from './kernel.js';
import type { NodeRenders } from './kernel.js';
import { assemble } from './kernel-script.js';
import { TwoPhaseApply, podChainName, policyChainName, renderedOnRead } from '@kube-router/netpol';
import { renderNode } from './render-node.js';
import { renderPolicy } from './render-policy.js';
import type { PolicyRender } from './render-policy.js';
import type { IpFamily, NetworkPolicyLike } from '@kube-router/netpol';
import type { CommandResult, CommandRunner, CommandSpec } from '@kube-router/netfilter';
import { compileSmallCluster } from '@kube-router/netpol-testing';
import { fixturePod, fixturePolicy as policy } from '@kube-router/testkit/netpol-conformance';
import type { FixturePod } from '@kube-router/testkit/netpol-conformance';

// A fake runner beside the real tests of the same path (netpol.real.test.ts, restart.real.test.ts, the conformance
// suite): here the point is exactly which transactions each sync makes and what is in them.
const NODE_OPTIONS = {
  defaultDeny: false,
  podCidrs: [],
  isolateUnselectedPods: false,
  serviceClusterIpRanges: [],
  serviceExternalIpRanges: [],
  serviceLoadBalancerIpRanges: [],
  nodePortRange: '30000-32767',
};

/** What one sync wants in the kernel: the policies, the node rendered for the policies that failed, and those seen. */
interface DesiredState {
  readonly policies: readonly PolicyRender[];
  renderNode(failed: ReadonlySet<string>): NodeRenders;
  readonly failedSeen: Set<string>[];
}

function desiredFor(
  policies: readonly NetworkPolicyLike[],
  families: readonly IpFamily[] = ['ipv4'],
  extraPods: readonly FixturePod[] = [],
): DesiredState {
  const model = compileSmallCluster(policies, extraPods);
  const failedSeen: Set<string>[] = [];
  return {
    policies: model.policies.map((compiled) => renderPolicy(compiled, families)),
    renderNode: (failed) => {
      failedSeen.push(new Set(failed));
      return renderedOnRead(families, (family) => renderNode(model, family, NODE_OPTIONS, failed));
    },
    failedSeen,
  };
}

/** `kernel` with an `apply` that syncs as the controller does: its two phases, the node rendered between them. */
function syncing(kernel: KernelApplier) {
  const phases = new TwoPhaseApply();
  return Object.assign(kernel, { apply: async (desired: DesiredState) => (await phases.run(kernel, desired.policies, desired.renderNode)).node });
}

/** Records when each nft call starts and ends; every call takes `delayMs`. */
class TimedRunner implements CommandRunner {
  readonly events: string[] = [];
  constructor(
    readonly inner: RecordingRunner,
    readonly delayMs = 20,
  ) {}
  async run(spec: CommandSpec): Promise<CommandResult> {
    const table = /ip6? kube-router-filter-ipv[46]/.exec(spec.input ?? '')?.[0] ?? 'list';
    this.events.push(`start ${table}`);
    await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    try {
      return await this.inner.run(spec);
    } finally {
      this.events.push(`end ${table}`);
    }
  }
}

/** An Nft per table and one that holds both tables' locks, as the controller makes them. */
function dualStackApplier(runner: CommandRunner) {
  const [four, six] = [new Mutex(), new Mutex()];
  const nft = { ipv4: new Nft({ runner, lock: four }), ipv6: new Nft({ runner, lock: six }), both: new Nft({ runner, lock: [four, six] }) };
  return syncing(new KernelApplier({ families: ['ipv4', 'ipv6'], nft, logger: pino({ level: 'silent' }) }));
}

function applier(runner: RecordingRunner) {
  return syncing(new KernelApplier({ families: ['ipv4'], nft: new Nft({ runner, lock: new Mutex() }), logger: pino({ level: 'silent' }) }));
}

const a = policy('web/a', { podSelector: { matchLabels: { app: 'server' } }, ingress: [{ from: [{ podSelector: {} }] }] });
const b = policy('web/b', { podSelector: { matchLabels: { app: 'client' } }, ingress: [{ from: [{ podSelector: {} }] }] });
const bFromServer = policy('web/b', {
  podSelector: { matchLabels: { app: 'client' } },
  ingress: [{ from: [{ podSelector: { matchLabels: { app: 'server' } } }] }],
});
const aFromClient = policy('web/a', {
  podSelector: { matchLabels: { app: 'server' } },
  ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }] }],
});
const aFromAllClients = policy('web/a', {
  podSelector: { matchLabels: { app: 'server' } },
  ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: 'client' } } }] }],
});

/** A runner whose nft refuses every transaction that writes the chain, as the kernel refuses a rule (ENFILE). */
function refusingChain(chain: string): RecordingRunner {
  return new RecordingRunner().on(
    (spec) => (spec.args ?? []).includes('-f') && (spec.input ?? '').includes(`chain ${chain} {`),
    { exitCode: 1, stderr: 'Error: Could not process rule: Too many open files in system' },
  );
}

const transactions = (runner: RecordingRunner) => runner.invocations.filter((i) => i.args.includes('-f')).map((i) => i.input ?? '');

describe('assemble', () => {
  it('puts each family\'s parts in one table block, flushes first and once, element changes after', () => {
    const lines = assemble([
      { family: 'ipv4', before: ['flush chain ip t A'], block: ['chain A {', '}'], after: ['add element ip t S { 1.2.3.4 }'] },
      { family: 'ipv6', before: [], block: ['chain B {', '}'], after: [] },
      { family: 'ipv4', before: ['flush chain ip t A'], block: ['chain C {', '}'], after: [] },
    ]);
    expect(lines).toEqual([
      'flush chain ip t A',
      'table ip kube-router-filter-ipv4 {',
      'chain A {', '}', 'chain C {', '}',
      '}',
      'add element ip t S { 1.2.3.4 }',
      'table ip6 kube-router-filter-ipv6 {',
      'chain B {', '}',
      '}',
    ]);
  });

  it('takes a table of more lines than a call takes arguments (a full sync of a large cluster)', () => {
    const block = Array.from({ length: 300_000 }, (_, index) => `rule ${index}`);
    const lines = assemble([{ family: 'ipv4', before: [], block, after: [] }]);
    expect(lines).toHaveLength(300_002);
    expect(lines.at(-2)).toBe('rule 299999');
  });
});

describe('KernelApplier (nftables)', () => {
  it('writes the shared chains, the policies and the dispatch in one transaction, and nothing when nothing changed', async () => {
    const runner = new RecordingRunner();
    const kernel = applier(runner);
    const first = await kernel.apply(desiredFor([a, b]));
    expect(first.transactions).toBe(1);
    const [dispatch = ''] = transactions(runner);
    // New objects go in one table block.
    expect(dispatch.startsWith('add table ip kube-router-filter-ipv4\ntable ip kube-router-filter-ipv4 {\n')).toBe(true);
    expect(dispatch.match(/^table /gm)).toHaveLength(1);
    expect(dispatch.trimEnd().endsWith('}')).toBe(true);
    const at = (text: string) => {
      const index = dispatch.indexOf(text);
      expect(index, text).toBeGreaterThanOrEqual(0);
      return index;
    };
    // The default chain before the policies that go to it, the policies before the pod chains, the base chains last.
    expect(at('chain KUBE-NWPLCY-DEFAULT {')).toBeLessThan(at(`chain ${policyChainName('web/a', 'ingress', 'ipv4')} {`));
    expect(at(`chain ${policyChainName('web/b', 'ingress', 'ipv4')} {`)).toBeLessThan(at(`chain ${podChainName('web/client', 'ingress', 'ipv4')} {`));
    expect(dispatch.match(/^chain KUBE-NWPLCY-DEFAULT \{$/gm)).toHaveLength(1);
    expect(at('map kube-router-pod-ingress { type ipv4_addr : verdict;')).toBeLessThan(at(`chain ${policyChainName('web/b', 'ingress', 'ipv4')} {`));
    expect(dispatch).toContain(`10.0.0.2 : jump ${podChainName('web/server', 'ingress', 'ipv4')}`);
    expect(at('chain KUBE-ROUTER-OUTPUT {')).toBeGreaterThan(at(`chain ${podChainName('web/server', 'ingress', 'ipv4')} {`));

    runner.invocations.length = 0;
    const again = await kernel.apply(desiredFor([a, b]));
    expect(again.transactions).toBe(0);
  });

  it('changes set membership with element adds (in the set\'s declaration) and deletes, without rewriting chains', async () => {
    const runner = new RecordingRunner();
    const kernel = applier(runner);
    await kernel.apply(desiredFor([aFromAllClients]));
    runner.invocations.length = 0;
    // Another client in the web namespace: one more member of the set the rule's selectors name.
    await kernel.apply(desiredFor([aFromAllClients], ['ipv4'], [fixturePod('web/client-2', ['10.0.0.9'], { app: 'client' }, { node: 'node-b' })]));
    const [script] = transactions(runner);
    // Not `add element`, before which nft 1.0.6 reads every chain of the namespace.
    expect(script).toMatch(/^add set ip kube-router-filter-ipv4 KUBE-SRC-[0-9A-F]{16} \{ type ipv4_addr; elements = \{ 10\.0\.0\.9 \} \}$/m);
    expect(script).not.toContain('add element');
    expect(script).not.toContain('flush chain');
    expect(transactions(runner)).toHaveLength(1);
    runner.invocations.length = 0;
    await kernel.apply(desiredFor([aFromAllClients]));
    expect(transactions(runner)[0]).toMatch(/^delete element ip kube-router-filter-ipv4 KUBE-SRC-[0-9A-F]{16} \{ 10\.0\.0\.9 \}$/m);
  });

  it('adds a chain the kernel does not hold without flushing it, and flushes a chain it replaces', async () => {
    const runner = new RecordingRunner();
    const kernel = applier(runner);
    const aFromAnyone = policy('web/a', { podSelector: { matchLabels: { app: 'server' } }, ingress: [{}] });
    await kernel.apply(desiredFor([aFromAnyone]));
    expect(transactions(runner)[0]).not.toContain('flush chain');
    runner.invocations.length = 0;
    await kernel.apply(desiredFor([aFromClient]));
    const chain = policyChainName('web/a', 'ingress', 'ipv4');
    const [replaced = ''] = transactions(runner);
    // Flushed before the block that fills it again.
    expect(replaced.startsWith(`flush chain ip kube-router-filter-ipv4 ${chain}\n`)).toBe(true);
    expect(replaced).toContain(`\nchain ${chain} {\n`);
  });

  it('skips a policy it wrote while its render is the same object, and compares it again after reading the kernel back', async () => {
    const runner = new RecordingRunner();
    const kernel = applier(runner);
    const desired = desiredFor([a, b]);
    await kernel.apply(desired);
    runner.invocations.length = 0;
    expect((await kernel.apply(desired)).transactions).toBe(0);
    // The kernel read back is empty (the recording runner lists nothing): the same renders are written again.
    kernel.invalidate();
    const again = await kernel.apply(desired);
    expect(again.transactions).toBe(1);
    expect(transactions(runner)[0]).toContain(`chain ${policyChainName('web/b', 'ingress', 'ipv4')} {`);
  });

  it('halves a refused transaction until the refused policy is alone, fails its pods closed and programs the rest', async () => {
    const refused = policyChainName('web/b', 'ingress', 'ipv4');
    const runner = refusingChain(refused);
    const kernel = applier(runner);
    const desired = desiredFor([a, b]);
    const result = await kernel.apply(desired);
    expect([...result.failedPolicies.keys()]).toEqual(['web/b']);
    expect(String(result.failedPolicies.get('web/b'))).toContain('Too many open files');
    expect(desired.failedSeen.at(-1)).toEqual(new Set(['web/b']));
    const written = transactions(runner);
    // Everything at once (refused), then in steps: the shared chains, the policies (refused), a alone (committed),
    // b alone (refused), the dispatch.
    expect(written).toHaveLength(6);
    expect(written[3]).toContain(policyChainName('web/a', 'ingress', 'ipv4'));
    expect(written[5]).toContain(podChainName('web/client', 'ingress', 'ipv4'));
    expect(written[5]).not.toContain(`jump ${refused}`);
  });

  it('gives rules with the same selectors one set: declared once, changed once, deleted with the last policy using it', async () => {
    const runner = new RecordingRunner();
    const kernel = applier(runner);
    // a and b both allow every pod of their namespace.
    await kernel.apply(desiredFor([a, b]));
    const [first] = transactions(runner);
    const declared = [...(first ?? '').matchAll(/^set (KUBE-SRC-[0-9A-F]{16}) \{/gm)].map((match) => match[1]);
    expect(declared).toHaveLength(1);
    const shared = declared[0] as string;
    expect(first?.split(`ip saddr @${shared} `)).toHaveLength(3);

    runner.invocations.length = 0;
    await kernel.apply(desiredFor([a, b], ['ipv4'], [fixturePod('web/client-2', ['10.0.0.9'], { app: 'client' }, { node: 'node-b' })]));
    const [change] = transactions(runner);
    expect(change?.match(/^add set .*\{ 10\.0\.0\.9 \} \}$/gm)).toEqual([`add set ip kube-router-filter-ipv4 ${shared} { type ipv4_addr; elements = { 10.0.0.9 } }`]);

    runner.invocations.length = 0;
    await kernel.apply(desiredFor([a]));
    const afterB = transactions(runner).join('\n');
    expect(afterB).toContain(`delete chain ip kube-router-filter-ipv4 ${policyChainName('web/b', 'ingress', 'ipv4')}`);
    expect(afterB).not.toContain('delete set');

    runner.invocations.length = 0;
    await kernel.apply(desiredFor([]));
    expect(transactions(runner).join('\n')).toContain(`delete set ip kube-router-filter-ipv4 ${shared}`);
  });

  it('writes a shared set with another policy when the one that carried it is refused', async () => {
    const refused = policyChainName('web/a', 'ingress', 'ipv4');
    const runner = refusingChain(refused);
    const kernel = applier(runner);
    const result = await kernel.apply(desiredFor([a, b]));
    expect([...result.failedPolicies.keys()]).toEqual(['web/a']);
    const bAlone = transactions(runner).find((script) => script.includes(`chain ${policyChainName('web/b', 'ingress', 'ipv4')} {`) && !script.includes(refused));
    // b's chain names the set a's transaction would have made: b's own transaction makes it.
    expect(bAlone).toMatch(/^set KUBE-SRC-[0-9A-F]{16} \{ type ipv4_addr;$/m);
  });

  it('stops writing when a transaction fails without nft refusing it: no policy is called refused, the next sync reads back', async () => {
    let timeOut = true;
    const runner = new RecordingRunner().on((spec) => timeOut && (spec.args ?? []).includes('-f'), { timedOut: true });
    const kernel = applier(runner);
    const result = await kernel.apply(desiredFor([a, b]));
    expect(result.writeFailure).toMatchObject({ timedOut: true });
    expect(result.failedPolicies.size).toBe(0);
    // One transaction, not the step-by-step search for a refused policy that a timeout cannot point at.
    expect(transactions(runner)).toHaveLength(1);

    timeOut = false;
    runner.invocations.length = 0;
    const next = await kernel.apply(desiredFor([a, b]));
    expect(next.writeFailure).toBeUndefined();
    expect(runner.invocations[0]?.args).toContain('list');
    expect(transactions(runner)[0]).toContain(`chain ${policyChainName('web/b', 'ingress', 'ipv4')} {`);
  });

  it('lists a set two rules of one policy share once, so that a pod leaving is one element delete in one transaction', async () => {
    const twoPorts = policy('web/a', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [
        { from: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: 'client' } } }], ports: [{ port: 80 }] },
        { from: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: 'client' } } }], ports: [{ port: 443 }] },
      ],
    });
    const extra = fixturePod('web/client-2', ['10.0.0.9'], { app: 'client' }, { node: 'node-b' });
    const runner = new RecordingRunner();
    const kernel = applier(runner);
    const desired = desiredFor([twoPorts], ['ipv4'], [extra]);
    expect(desired.policies[0]?.families.ipv4?.sets).toHaveLength(1);
    await kernel.apply(desired);
    runner.invocations.length = 0;
    const result = await kernel.apply(desiredFor([twoPorts]));
    expect(result.failedPolicies.size).toBe(0);
    expect(transactions(runner)).toHaveLength(1);
    expect(transactions(runner)[0]?.match(/^delete element .*\{ 10\.0\.0\.9 \}$/gm)).toHaveLength(1);
  });

  it('reports both tables\' failures when both transactions fail without nft refusing them', async () => {
    const runner = new TimedRunner(
      new RecordingRunner()
        .on((spec) => (spec.input ?? '').includes('kube-router-filter-ipv4'), { timedOut: true })
        .on((spec) => (spec.input ?? '').includes('kube-router-filter-ipv6') && !(spec.input ?? '').includes('kube-router-filter-ipv4'), {
          exitCode: 1,
          stderr: 'exec of "nft" failed: No such file or directory',
        }),
      1,
    );
    // Large enough that each table goes by a transaction of its own.
    const many = Array.from({ length: 400 }, (_, index) =>
      policy(`web/p${index}`, { podSelector: { matchLabels: { app: 'server' } }, ingress: [{ ports: [{ port: 1000 + index }] }] }),
    );
    const result = await dualStackApplier(runner).apply(desiredFor(many, ['ipv4', 'ipv6']));
    expect(result.writeFailure).toBeInstanceOf(AggregateError);
    expect((result.writeFailure as AggregateError).errors).toHaveLength(2);
    // A joined sync error shows messages: this one carries both tables' own.
    expect((result.writeFailure as Error).message).toMatch(/timed out.*; .*exec of "nft" failed/);
    expect(result.failedPolicies.size).toBe(0);
  });

  it('calls only nft\'s own refusal a refusal: entering the namespace failing stops the sync like a timeout', async () => {
    const runner = new RecordingRunner().on((spec) => (spec.args ?? []).includes('-f'), {
      exitCode: 1,
      stderr: 'Cannot open network namespace "gone": No such file or directory',
    });
    const result = await applier(runner).apply(desiredFor([a, b]));
    expect(result.failedPolicies.size).toBe(0);
    expect(String(result.writeFailure)).toContain('Cannot open network namespace');
    expect(transactions(runner)).toHaveLength(1);
  });

  it('keeps the policies it found refused when a later step of the search times out', async () => {
    const runner = new RecordingRunner()
      .on((spec) => (spec.input ?? '').includes(`chain ${policyChainName('web/a', 'ingress', 'ipv4')} {`), {
        exitCode: 1,
        stderr: 'Error: Could not process rule: Too many open files in system',
      })
      // b alone, after a was found refused on its own.
      .on((spec) => (spec.input ?? '').includes(`chain ${policyChainName('web/b', 'ingress', 'ipv4')} {`) && !(spec.input ?? '').includes(policyChainName('web/a', 'ingress', 'ipv4')), {
        timedOut: true,
      });
    const kernel = applier(runner);
    const result = await kernel.apply(desiredFor([a, b]));
    expect([...result.failedPolicies.keys()]).toEqual(['web/a']);
    expect(result.writeFailure).toMatchObject({ timedOut: true });
    // Its failed-closed dispatch never went in: the next sync's first transaction already fails a's targets closed.
    const seen = desiredFor([a, b]);
    await kernel.apply(seen);
    expect([...(seen.failedSeen[0] ?? [])]).toEqual(['web/a']);
  });

  it('writes a small change of both tables in one transaction, and large ones table by table at once', async () => {
    const small = new RecordingRunner();
    const result = await dualStackApplier(small).apply(desiredFor([a, b], ['ipv4', 'ipv6']));
    expect(result.transactions).toBe(1);
    const [both = ''] = transactions(small);
    expect(both).toContain('table ip kube-router-filter-ipv4 {');
    expect(both).toContain('table ip6 kube-router-filter-ipv6 {');

    // Hundreds of policies: thousands of lines per table, where two nft processes at once beat one.
    const many = Array.from({ length: 400 }, (_, index) =>
      policy(`web/p-${index}`, { podSelector: { matchLabels: { app: 'server' } }, ingress: [{ from: [{ podSelector: { matchLabels: { n: `${index}` } } }, { podSelector: {} }], ports: [{ port: 1000 + index }] }] }),
    );
    const recording = new RecordingRunner();
    // Long enough that building the IPv6 script of 400 policies fits in the IPv4 transaction's time.
    const runner = new TimedRunner(recording, 500);
    expect((await dualStackApplier(runner).apply(desiredFor(many, ['ipv4', 'ipv6']))).transactions).toBe(2);
    const [first = '', second = ''] = transactions(recording);
    expect(first.split('\n').length).toBeGreaterThan(2_000);
    expect(first.length).toBeGreaterThan(64 * 1024);
    expect(first).not.toContain('ip6 kube-router-filter-ipv6');
    expect(second).not.toContain('ip kube-router-filter-ipv4 ');
    expect(runner.events.filter((event) => !event.endsWith('list'))).toEqual([
      'start ip kube-router-filter-ipv4',
      'start ip6 kube-router-filter-ipv6',
      'end ip kube-router-filter-ipv4',
      'end ip6 kube-router-filter-ipv6',
    ]);
  });

  it('fails closed in both families a policy that the kernel refused in one, and keeps the other family\'s transaction', async () => {
    const refused = policyChainName('web/b', 'ingress', 'ipv4');
    const runner = refusingChain(refused);
    const desired = desiredFor([a, b], ['ipv4', 'ipv6']);
    const result = await dualStackApplier(runner).apply(desired);
    expect([...result.failedPolicies.keys()]).toEqual(['web/b']);
    const written = transactions(runner);
    const ipv6 = written.filter((script) => script.includes('ip6 kube-router-filter-ipv6'));
    // The two tables went together and were refused together; IPv6 alone went in with b enforced; then its dispatch
    // again, with b's targets failed closed.
    expect(ipv6[0]).toContain('ip kube-router-filter-ipv4');
    const ipv6Alone = ipv6.filter((script) => !script.includes('ip kube-router-filter-ipv4'));
    expect(ipv6Alone[0]).toContain(`jump ${policyChainName('web/b', 'ingress', 'ipv6')}`);
    const last = ipv6.at(-1) ?? '';
    expect(last).toContain(`flush chain ip6 kube-router-filter-ipv6 ${podChainName('web/client', 'ingress', 'ipv6')}`);
    expect(last).not.toContain(`jump ${policyChainName('web/b', 'ingress', 'ipv6')}`);
    expect(written.at(-1)).not.toContain(`jump ${refused}`);
  });

  it('keeps the targets of a policy refused before failed closed in every family while it is refused, and lets them out once it goes in', async () => {
    const refusedChain = policyChainName('web/b', 'ingress', 'ipv4');
    let refusing = true;
    const runner = new RecordingRunner().on(
      (spec) => refusing && (spec.args ?? []).includes('-f') && (spec.input ?? '').includes(`chain ${refusedChain} {`),
      { exitCode: 1, stderr: 'Error: Could not process rule: Too many open files in system' },
    );
    const kernel = dualStackApplier(runner);
    await kernel.apply(desiredFor([a, b], ['ipv4', 'ipv6']));
    const throughB = `jump ${policyChainName('web/b', 'ingress', 'ipv6')}`;
    runner.invocations.length = 0;
    const again = await kernel.apply(desiredFor([a, b], ['ipv4', 'ipv6']));
    expect([...again.failedPolicies.keys()]).toEqual(['web/b']);
    // No transaction the kernel took in this sync sent b's targets through b's IPv6 rules, not even for a moment.
    const committed = transactions(runner).filter((script) => !script.includes(`chain ${refusedChain} {`));
    expect(committed.length).toBeGreaterThan(0);
    expect(committed.filter((script) => script.includes(throughB))).toEqual([]);

    refusing = false;
    runner.invocations.length = 0;
    const fixed = await kernel.apply(desiredFor([a, b], ['ipv4', 'ipv6']));
    expect(fixed.failedPolicies.size).toBe(0);
    expect(transactions(runner).some((script) => script.includes(throughB))).toBe(true);
  });

  it('in the fallback, writes each table\'s dispatch alone: one the kernel refuses keeps the other table\'s out no longer', async () => {
    const refused = policyChainName('web/b', 'ingress', 'ipv4');
    const ipv6Dispatch = `flush chain ip6 kube-router-filter-ipv6 ${podChainName('web/client', 'ingress', 'ipv6')}`;
    const refuses = (input: string) => input.includes(`chain ${refused} {`) || input.includes(ipv6Dispatch);
    const runner = new RecordingRunner().on((spec) => (spec.args ?? []).includes('-f') && refuses(spec.input ?? ''), {
      exitCode: 1,
      stderr: 'Error: Could not process rule: Too many open files in system',
    });
    const result = await dualStackApplier(runner).apply(desiredFor([a, b], ['ipv4', 'ipv6']));
    expect([...result.failedPolicies.keys()]).toEqual(['web/b']);
    expect(String(result.nodeFailure)).toContain('Too many open files');
    const committed = transactions(runner).filter((script) => !refuses(script));
    const failedClosed = committed.at(-1) ?? '';
    // The IPv4 dispatch with b's targets failed closed went in, without the IPv6 one the kernel refused.
    expect(failedClosed).toContain(`chain ${podChainName('web/client', 'ingress', 'ipv4')} {`);
    expect(failedClosed).toContain('could not be programmed');
    expect(failedClosed).not.toContain(`jump ${refused}`);
    expect(failedClosed).not.toContain('kube-router-filter-ipv6');
  });

  it('deletes what nothing refers to any more: pod chains before policy chains, then sets', async () => {
    const runner = new RecordingRunner();
    const kernel = applier(runner);
    await kernel.apply(desiredFor([bFromServer]));
    runner.invocations.length = 0;
    const result = await kernel.apply(desiredFor([]));
    const [dispatch, stale] = transactions(runner);
    // Its last element gone, the map is emptied by a flush: cheaper than a `delete element` (see setScript).
    expect(dispatch).toContain('flush map ip kube-router-filter-ipv4 kube-router-pod-ingress\n');
    expect(dispatch).not.toContain('10.0.0.3');
    const lines = stale?.trim().split('\n') ?? [];
    expect(lines).toEqual([
      `delete chain ip kube-router-filter-ipv4 ${podChainName('web/client', 'ingress', 'ipv4')}`,
      `delete chain ip kube-router-filter-ipv4 ${policyChainName('web/b', 'ingress', 'ipv4')}`,
      expect.stringMatching(/^delete set ip kube-router-filter-ipv4 KUBE-SRC-[0-9A-F]{16}$/),
    ]);
    expect(result.deleted).toBe(3);
  });
});
