import { randomBytes } from 'node:crypto';
import { addNetns, deleteNetns, ExecRunner, Mutex, Nft } from '@kube-router/netfilter';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TwoPhaseApply } from '@kube-router/netpol';
import { missingForRealTests, runNetpolKernelSuite } from '@kube-router/netpol-testing';
import { KernelApplier } from './kernel.js';
import { INGRESS_MAP } from './names.js';
import { chain } from './objects.js';
import type { SetRender } from './objects.js';
import type { PolicyRender } from './render-policy.js';
import type { NodeRender } from './render-node.js';
import { nftablesBackend } from './testing/backend.js';

runNetpolKernelSuite(nftablesBackend);

const missing = missingForRealTests(nftablesBackend);
const TABLE = 'ip kube-router-filter-ipv4';
const POD_A = 'KUBE-POD-FW-AAAAAAAAAAAAAAAA';
const POD_B = 'KUBE-POD-FW-BBBBBBBBBBBBBBBB';
const POLICY_CHAIN = 'KUBE-NWPLCY-CCCCCCCCCCCCCCCC';

/** The node's part (two pod chains, the ingress map pointing addresses at them) and one policy with two sets. */
function desired(map: readonly string[], peers: readonly string[] = [], blocks: readonly string[] = []): { policies: PolicyRender[]; node: { ipv4: NodeRender } } {
  const render: NodeRender = {
    sharedChains: [],
    podChains: [chain(POD_A, [{ text: 'accept' }]), chain(POD_B, [{ text: 'drop' }])],
    sets: [{ name: INGRESS_MAP, type: 'ipv4_addr', kind: 'hash', map: 'verdict', elements: [...map].sort() }],
    baseChains: [chain('KUBE-ROUTER-INPUT', [{ text: `ip daddr vmap @${INGRESS_MAP}` }], 'input')],
  };
  const sets: SetRender[] = [
    { name: 'KUBE-SRC-PEERS00000000000', type: 'ipv4_addr', kind: 'hash', elements: [...peers].sort() },
    { name: 'KUBE-SRC-BLOCKS0000000000', type: 'ipv4_addr . inet_proto', kind: 'interval', elements: blocks.map((range) => `${range} . 0-255`) },
  ];
  const rules = [
    { text: 'ip saddr @KUBE-SRC-PEERS00000000000 accept' },
    { text: 'ip saddr . meta l4proto @KUBE-SRC-BLOCKS0000000000 accept' },
  ];
  const policy: PolicyRender = { id: 'web/p', families: { ipv4: { chains: [chain(POLICY_CHAIN, rules)], sets } } };
  return { policies: [policy], node: { ipv4: render } };
}

// The script shapes the unit tests check (kernel.test.ts), as the kernel takes them; each test in a namespace of its own.
describe.skipIf(missing !== undefined)(`netpol-nftables set changes against the kernel${missing ? ` (skipped: ${missing})` : ''}`, () => {
  const runner = new ExecRunner();
  let netns = '';
  const inNetns = async (...args: string[]) => (await runner.run({ command: 'ip', args: ['netns', 'exec', netns, ...args] })).stdout;
  const list = (kind: 'map' | 'set', name: string) => inNetns('nft', 'list', kind, ...TABLE.split(' '), name);
  /** A fresh applier (it reads the kernel first), and every script it writes. */
  const watched = () => {
    const scripts: string[] = [];
    const kernel = new KernelApplier({
      families: ['ipv4'],
      nft: new Nft({ runner: { run: (spec) => (scripts.push(spec.input ?? ''), runner.run(spec)) }, netns, lock: new Mutex() }),
      logger: pino({ level: 'silent' }),
    });
    const phases = new TwoPhaseApply();
    const applier = {
      apply: async ({ policies, node }: ReturnType<typeof desired>) => (await phases.run(kernel, policies, () => node)).node,
    };
    return { applier, scripts };
  };

  beforeEach(async () => {
    netns = `krt-tnfk${randomBytes(3).toString('hex')}`;
    await addNetns(runner, netns);
  });
  afterEach(() => deleteNetns(runner, netns));

  it('moves a map key to another chain and adds set elements in their declaration, with no `add element`', async () => {
    expect((await watched().applier.apply(desired([`10.0.0.1 : jump ${POD_A}`]))).transactions).toBe(1);
    // More than one line of elements (500 a line) for the peer set.
    const peers = Array.from({ length: 1_200 }, (_, index) => `10.1.${index >> 8}.${index & 0xff}`);
    const { applier, scripts } = watched();
    const moved = await applier.apply(desired([`10.0.0.1 : jump ${POD_B}`, `10.0.0.2 : jump ${POD_A}`], peers));
    expect(moved.nodeFailure).toBeUndefined();
    expect(moved.writeFailure).toBeUndefined();
    const map = await list('map', INGRESS_MAP);
    expect(map).toContain(`10.0.0.1 : jump ${POD_B}`);
    expect(map).toContain(`10.0.0.2 : jump ${POD_A}`);
    expect(map).not.toContain(`10.0.0.1 : jump ${POD_A}`);
    expect((await list('set', 'KUBE-SRC-PEERS00000000000')).match(/10\.1\.\d+\.\d+/g)).toHaveLength(1_200);
    const script = scripts.join('\n');
    expect(script).toContain(`delete element ${TABLE} ${INGRESS_MAP} { 10.0.0.1 }`);
    expect(script).toMatch(/^add set ip kube-router-filter-ipv4 KUBE-SRC-PEERS00000000000 \{ type ipv4_addr; elements = \{ 10\.1\./m);
    expect(script).not.toContain('add element');
  });

  it('refills a set that is small beside the chains nft would read before a `delete element`, and every interval set', async () => {
    await watched().applier.apply(desired([`10.0.0.1 : jump ${POD_A}`, `10.0.0.2 : jump ${POD_A}`], [], ['192.168.0.0-192.168.0.255']));
    // Chains of another name in our table: the applier leaves them, and nft reads them all the same.
    const others = Array.from({ length: 12 }, (_, index) => `add chain ${TABLE} other-${index}`).join('\n');
    await runner.run({ command: 'ip', args: ['netns', 'exec', netns, 'nft', '-f', '-'], input: `${others}\n` });
    const { applier, scripts } = watched();
    const result = await applier.apply(desired([`10.0.0.2 : jump ${POD_A}`], [], ['192.168.1.0-192.168.1.255', '10.9.0.0-10.9.255.255']));
    expect(result.nodeFailure).toBeUndefined();
    expect(result.failedPolicies.size).toBe(0);
    const map = await list('map', INGRESS_MAP);
    expect(map).toContain(`10.0.0.2 : jump ${POD_A}`);
    expect(map).not.toContain('10.0.0.1');
    const blocks = await list('set', 'KUBE-SRC-BLOCKS0000000000');
    expect(blocks).toContain('192.168.1.0/24 . 0-255');
    expect(blocks).toContain('10.9.0.0/16 . 0-255');
    expect(blocks).not.toContain('192.168.0.0');
    const script = scripts.join('\n');
    // One map element left, 16 chains read: the map is refilled in the transaction; the interval set always is.
    expect(script).toContain(`flush map ${TABLE} ${INGRESS_MAP}\n`);
    expect(script).toContain(`flush set ${TABLE} KUBE-SRC-BLOCKS0000000000\n`);
    expect(script).not.toContain('delete element');
  });
});
