import { Ipset, Iptables, Mutex, RecordingRunner } from '@kube-router/netfilter';
import type { CommandSpec } from '@kube-router/netfilter';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { KernelApplier } from './kernel.js';
import type { NodeRender } from './kernel.js';
import { TEMP_SET, targetSetName } from './names.js';
import { TwoPhaseApply, policyChainName } from '@kube-router/netpol';
import { renderNode } from './render-node.js';
import { renderPolicy } from './render-policy.js';
import type { PolicyRender } from './render-policy.js';
import type { NetworkPolicyLike } from '@kube-router/netpol';
import { compileSmallCluster } from '@kube-router/netpol-testing';
import { fixturePolicy as policy } from '@kube-router/testkit/netpol-conformance';

// A fake runner beside the real tests of the same path (netpol.real.test.ts, restart.real.test.ts): here the point
// is exactly which chains and sets each sync writes.
const NODE_OPTIONS = { defaultDeny: false, isolateUnselectedPods: false, serviceClusterIpRanges: [], serviceExternalIpRanges: [], nodePortRange: '30000-32767' };

/** What one sync wants in the kernel: the policies, and the node rendered for the policies that failed. */
interface DesiredState {
  readonly policies: readonly PolicyRender[];
  renderNode(failed: ReadonlySet<string>): NodeRender;
}

function desiredFor(policies: readonly NetworkPolicyLike[]): DesiredState {
  const model = compileSmallCluster(policies);
  return {
    policies: model.policies.map((compiled) => renderPolicy(compiled, ['ipv4'])),
    renderNode: (failed) => ({ ipv4: { chains: renderNode(model, 'ipv4', NODE_OPTIONS, failed) } }),
  };
}

/** An applier that `apply` syncs as the controller does: its two phases, the node rendered between them. */
function applier(runner: RecordingRunner) {
  const lock = new Mutex();
  const kernel = new KernelApplier({
    families: ['ipv4'],
    iptables: { ipv4: new Iptables({ runner, family: 'ipv4', lock }) },
    ipset: new Ipset({ runner, lock: new Mutex() }),
    logger: pino({ level: 'silent' }),
  });
  const phases = new TwoPhaseApply();
  return Object.assign(kernel, { apply: async (desired: DesiredState) => (await phases.run(kernel, desired.policies, desired.renderNode)).node });
}

const a = policy('web/a', { podSelector: { matchLabels: { app: 'server' } }, ingress: [{ from: [{ podSelector: {} }] }] });
const b = policy('web/b', { podSelector: { matchLabels: { app: 'client' } }, ingress: [{ from: [{ podSelector: {} }] }] });
const bOtherPort = policy('web/b', {
  podSelector: { matchLabels: { app: 'client' } },
  ingress: [{ from: [{ podSelector: {} }], ports: [{ port: 81 }] }],
});
const bOtherPeers = policy('web/b', {
  podSelector: { matchLabels: { app: 'client' } },
  ingress: [{ from: [{ podSelector: { matchLabels: { app: 'server' } } }], ports: [{ port: 81 }] }],
});

const restores = (runner: RecordingRunner) => runner.invocations.filter((i) => i.command === 'iptables-restore');
const ipsetRestores = (runner: RecordingRunner) =>
  runner.invocations.filter((i) => i.command === 'ipset' && i.args[0] === 'restore');

/**
 * A filter table for the fake runner: what `iptables-restore --noflush` writes (a declared chain is emptied, rules
 * appended, inserted, deleted, chains deleted) is what `iptables-save` prints, so that read-backs see the writes.
 */
function fakeFilterTable(runner: RecordingRunner): Map<string, string[]> {
  const builtins = ['INPUT', 'FORWARD', 'OUTPUT'];
  const chains = new Map<string, string[]>(builtins.map((name) => [name, []]));
  runner.on('iptables-restore', (spec) => {
    for (const line of (spec.input ?? '').split('\n')) {
      const [op = '', name = '', ...rest] = line.split(' ');
      const rules = chains.get(name);
      if (op.startsWith(':')) chains.set(op.slice(1), []);
      else if (op === '-A') rules?.push(rest.join(' '));
      else if (op === '-I') rules?.splice(Number(rest[0]) - 1, 0, rest.slice(1).join(' '));
      else if (op === '-D' && rules?.includes(rest.join(' '))) rules.splice(rules.indexOf(rest.join(' ')), 1);
      else if (op === '-X') chains.delete(name);
    }
    return {};
  });
  runner.on('iptables-save', () => ({
    stdout: [
      '*filter',
      ...[...chains.keys()].map((name) => `:${name} ${builtins.includes(name) ? 'ACCEPT' : '-'} [0:0]`),
      ...[...chains].flatMap(([name, rules]) => rules.map((rule) => `-A ${name} ${rule}`)),
      'COMMIT',
      '',
    ].join('\n'),
  }));
  return chains;
}

describe('KernelApplier', () => {
  it('writes only the chains and sets whose content changed', async () => {
    const runner = new RecordingRunner();
    const kernel = applier(runner);
    await kernel.apply(desiredFor([a, b]));
    expect(restores(runner).length).toBeGreaterThan(0);

    runner.invocations.length = 0;
    const unchanged = await kernel.apply(desiredFor([a, b]));
    expect(unchanged.chainsWritten + unchanged.setsWritten).toBe(0);
    expect(restores(runner)).toEqual([]);
    expect(ipsetRestores(runner)).toEqual([]);

    runner.invocations.length = 0;
    const changed = await kernel.apply(desiredFor([a, bOtherPort]));
    expect(changed.chainsWritten).toBe(1);
    // Another port is another rule: its peers get a set of their own (named by what the rule matches), and the old
    // set goes once the rewritten chain no longer refers to it; no moment pairs the old port with a changed set.
    expect(changed.setsWritten).toBe(1);
    expect(changed.setsDestroyed).toBe(1);
    const [input] = restores(runner).map((r) => r.input ?? '');
    expect(input).toContain(`:${policyChainName('web/b', 'ingress', 'ipv4')} `);
    expect(input).not.toContain(policyChainName('web/a', 'ingress', 'ipv4'));
    expect(input).not.toContain('KUBE-POD-FW-');

    // Other peers: the same rule over a set with other members. Only that set is rewritten, under the same name.
    runner.invocations.length = 0;
    const peers = await kernel.apply(desiredFor([a, bOtherPeers]));
    expect(peers.setsWritten).toBe(1);
    expect(peers.chainsWritten).toBe(0);
    expect(peers.setsDestroyed).toBe(0);
    expect(ipsetRestores(runner)).toHaveLength(1);
    expect(restores(runner)).toEqual([]);
  });

  it('rewrites a chain whose rule was replaced in place, and finds the edit again until a write succeeds', async () => {
    const runner = new RecordingRunner();
    const table = fakeFilterTable(runner);
    const kernel = applier(runner);
    const periodicSync = () => {
      kernel.invalidate();
      return kernel.apply(desiredFor([a]));
    };
    await kernel.apply(desiredFor([a]));
    // Two read-backs in a row find the chains as written: nothing is written again.
    expect((await periodicSync()).chainsWritten).toBe(0);
    expect((await periodicSync()).chainsWritten).toBe(0);

    const chain = policyChainName('web/a', 'ingress', 'ipv4');
    const written = [...(table.get(chain) ?? [])];
    expect(written.length).toBeGreaterThan(0);
    // Someone else's `iptables -R`: the first rule accepts everything, and the chain keeps its rule count.
    const edit = () => table.set(chain, ['-j ACCEPT', ...written.slice(1)]);
    edit();
    runner.invocations.length = 0;
    expect((await periodicSync()).chainsWritten).toBe(1);
    expect(table.get(chain)).toEqual(written);
    // Read back at once: a save after the restore that wrote it.
    const commands = runner.invocations.map((invocation) => invocation.command);
    const wrote = runner.invocations.findIndex((invocation) => (invocation.input ?? '').includes(`:${chain} `));
    expect(commands.lastIndexOf('iptables-save')).toBeGreaterThan(wrote);
    // So the same edit before the next periodic sync is found too, not adopted.
    edit();
    expect((await periodicSync()).chainsWritten).toBe(1);
    expect(table.get(chain)).toEqual(written);

    // A write that fails leaves the chain to be found changed again: the next read-back rewrites it, and the edit
    // after that is found as well.
    edit();
    const refusing = (spec: CommandSpec) => spec.command === 'iptables-restore' && (spec.input ?? '').includes(`:${chain} `);
    runner.once(refusing, { exitCode: 1, stderr: 'iptables-restore: line 2 failed' });
    runner.once(refusing, { exitCode: 1, stderr: 'iptables-restore: line 2 failed' });
    expect((await periodicSync()).failedPolicies.has('web/a')).toBe(true);
    expect(table.get(chain)?.[0]).toBe('-j ACCEPT');
    await periodicSync();
    expect(table.get(chain)).toEqual(written);
    edit();
    await periodicSync();
    expect(table.get(chain)).toEqual(written);
  });

  it('deletes the chains and sets of a removed policy after the jumps to them are gone', async () => {
    const runner = new RecordingRunner();
    const kernel = applier(runner);
    await kernel.apply(desiredFor([a, b]));
    runner.invocations.length = 0;
    const result = await kernel.apply(desiredFor([a]));
    // b's chain, and the client's pod chain: nothing isolates the client any more.
    expect(result.chainsDeleted).toBe(2);
    const inputs = restores(runner).map((r) => r.input ?? '');
    const deleted = policyChainName('web/b', 'ingress', 'ipv4');
    // First the chains that jumped to it are rewritten; then, in a transaction of its own, the stale chains go, so
    // that a chain the kernel refuses to delete cannot hold back the rewrite.
    expect(inputs).toHaveLength(2);
    expect(inputs[0]).toMatch(/^-A KUBE-ROUTER-FORWARD /m);
    expect(inputs[0]).not.toMatch(/^-X /m);
    expect(inputs[1]!.split('\n')).toContain(`-X ${deleted}`);
    expect(inputs[1]).not.toMatch(/^-A /m);
    const ipsetCalls = runner.invocations.filter((i) => i.command === 'ipset');
    expect(ipsetCalls.at(-1)?.input).toMatch(/^destroy KUBE-/m);
    expect(result.setsDestroyed).toBe(2);
  });

  it('inserts the jumps from the built-in chains once', async () => {
    const runner = new RecordingRunner();
    const kernel = applier(runner);
    await kernel.apply(desiredFor([a]));
    const first = restores(runner).map((r) => r.input ?? '').join('\n');
    for (const builtin of ['INPUT', 'FORWARD', 'OUTPUT']) {
      expect(first).toContain(`-I ${builtin} 1 -m comment --comment "kube-router netpol" -j KUBE-ROUTER-${builtin}`);
    }
    runner.invocations.length = 0;
    await kernel.apply(desiredFor([a, b]));
    expect(restores(runner).map((r) => r.input ?? '').join('\n')).not.toContain('-I FORWARD');
  });

  it('fails only the policy whose sets the kernel refuses, and fails its pods closed', async () => {
    const runner = new RecordingRunner();
    const kernel = applier(runner);
    const bad = policy('web/b', { podSelector: { matchLabels: { app: 'client' } }, ingress: [{}] });
    runner.on(
      (spec) => spec.command === 'ipset' && spec.args?.[0] === 'restore',
      (spec) => (spec.input?.includes(`swap ${TEMP_SET} ${targetSetName('web/b', 'ipv4')}`) ? { exitCode: 1, stderr: 'ipset v7: Error in line 2: refused' } : {}),
    );
    const result = await kernel.apply(desiredFor([a, bad]));
    expect([...result.failedPolicies.keys()]).toEqual(['web/b']);
    const node = restores(runner).map((r) => r.input ?? '').join('\n');
    expect(node).not.toContain(`:${policyChainName('web/b', 'ingress', 'ipv4')} `);
    expect(node).toContain(`:${policyChainName('web/a', 'ingress', 'ipv4')} `);
    expect(node).toContain('could not be programmed');
  });
});
