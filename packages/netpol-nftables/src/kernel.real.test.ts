import { randomBytes } from 'node:crypto';
import { addNetns, deleteNetns, ExecRunner, Mutex, Nft } from '@kube-router/netfilter';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KernelApplier } from './kernel.js';
import type { DesiredState } from './kernel.js';
import { INGRESS_MAP } from './names.js';
import { chain } from './objects.js';
import type { SetRender } from './objects.js';
import type { NodeRender } from './render-node.js';
import { missingForRealTests } from './testing/world.js';

const missing = missingForRealTests('ip');
const TABLE = 'ip kube-router-filter-ipv4';

/** The node's part alone: two pod chains and the ingress map pointing addresses at them. */
function nodeWith(elements: readonly string[]): DesiredState {
  const map: SetRender = { name: INGRESS_MAP, type: 'ipv4_addr', kind: 'hash', map: 'verdict', elements: [...elements].sort() };
  const render: NodeRender = {
    sharedChains: [],
    podChains: [chain('KUBE-POD-FW-AAAAAAAAAAAAAAAA', [{ text: 'accept' }]), chain('KUBE-POD-FW-BBBBBBBBBBBBBBBB', [{ text: 'drop' }])],
    sets: [map],
    baseChains: [chain('KUBE-ROUTER-INPUT', [{ text: `ip daddr vmap @${INGRESS_MAP}` }], 'input')],
  };
  return { policies: [], renderNode: () => render };
}

// The script shapes the unit tests check (kernel.test.ts), as the kernel takes them.
describe.skipIf(missing !== undefined)(`netpol-nftables set changes against the kernel${missing ? ` (skipped: ${missing})` : ''}`, () => {
  const runner = new ExecRunner();
  const netns = `krt-tnfk${randomBytes(2).toString('hex')}`;
  const nft = new Nft({ runner, netns, lock: new Mutex() });
  const listMap = async () => (await runner.run({ command: 'ip', args: ['netns', 'exec', netns, 'nft', 'list', 'map', ...TABLE.split(' '), INGRESS_MAP] })).stdout;

  beforeAll(() => addNetns(runner, netns));
  afterAll(() => deleteNetns(runner, netns));

  it('moves a map key to another chain and adds one in the same transaction, with no `add element`', async () => {
    const applier = new KernelApplier({ families: ['ipv4'], nft, logger: pino({ level: 'silent' }) });
    const first = await applier.apply(nodeWith(['10.0.0.1 : jump KUBE-POD-FW-AAAAAAAAAAAAAAAA']));
    expect(first.transactions).toBe(1);
    expect(await listMap()).toContain('10.0.0.1 : jump KUBE-POD-FW-AAAAAAAAAAAAAAAA');

    const inputs: string[] = [];
    const watched = new KernelApplier({
      families: ['ipv4'],
      nft: new Nft({ runner: { run: (spec) => (inputs.push(spec.input ?? ''), runner.run(spec)) }, netns, lock: new Mutex() }),
      logger: pino({ level: 'silent' }),
    });
    const moved = await watched.apply(nodeWith(['10.0.0.1 : jump KUBE-POD-FW-BBBBBBBBBBBBBBBB', '10.0.0.2 : jump KUBE-POD-FW-AAAAAAAAAAAAAAAA']));
    expect(moved.nodeFailure).toBeUndefined();
    expect(moved.writeFailure).toBeUndefined();
    const listing = await listMap();
    expect(listing).toContain('10.0.0.1 : jump KUBE-POD-FW-BBBBBBBBBBBBBBBB');
    expect(listing).toContain('10.0.0.2 : jump KUBE-POD-FW-AAAAAAAAAAAAAAAA');
    expect(listing).not.toContain('10.0.0.1 : jump KUBE-POD-FW-AAAAAAAAAAAAAAAA');
    const script = inputs.find((input) => input.includes(INGRESS_MAP)) ?? '';
    expect(script).toContain(`delete element ${TABLE} ${INGRESS_MAP} { 10.0.0.1 }`);
    expect(script).not.toContain('add element');
  });

  it('refills a set that is small beside the chains nft would read before a `delete element`', async () => {
    // Chains of another name in our table: the applier leaves them, and nft reads them all the same.
    const others = Array.from({ length: 12 }, (_, index) => `add chain ${TABLE} other-${index}`).join('\n');
    await runner.run({ command: 'ip', args: ['netns', 'exec', netns, 'nft', '-f', '-'], input: `${others}\n` });
    const inputs: string[] = [];
    const applier = new KernelApplier({
      families: ['ipv4'],
      nft: new Nft({ runner: { run: (spec) => (inputs.push(spec.input ?? ''), runner.run(spec)) }, netns, lock: new Mutex() }),
      logger: pino({ level: 'silent' }),
    });
    const result = await applier.apply(nodeWith(['10.0.0.2 : jump KUBE-POD-FW-AAAAAAAAAAAAAAAA']));
    expect(result.nodeFailure).toBeUndefined();
    const listing = await listMap();
    expect(listing).toContain('10.0.0.2 : jump KUBE-POD-FW-AAAAAAAAAAAAAAAA');
    expect(listing).not.toContain('10.0.0.1');
    const script = inputs.find((input) => input.includes(INGRESS_MAP)) ?? '';
    // One element left, 15 chains read: the map is refilled in the transaction.
    expect(script).toContain(`flush map ${TABLE} ${INGRESS_MAP}\n`);
    expect(script).not.toContain('delete element');
  });
});
