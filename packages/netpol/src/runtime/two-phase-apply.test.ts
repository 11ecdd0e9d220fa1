import { describe, expect, it } from 'vitest';
import { PhaseHandOff, TwoPhaseApply } from './two-phase-apply.js';
import type { TwoPhaseKernel } from './two-phase-apply.js';

describe('TwoPhaseApply', () => {
  it('renders the node once when nothing new failed, and passes the first render to both phases', async () => {
    const seen: unknown[] = [];
    const kernel: TwoPhaseKernel<string, { failed: string[] }, { enforcing: boolean }> = {
      applyPolicies: async (_policies, node) => (seen.push(node), { failedPolicies: new Map() }),
      applyNode: async (node) => (seen.push(node), { enforcing: true }),
    };
    let renders = 0;
    await new TwoPhaseApply().run(kernel, ['a'], (failed) => (renders++, { failed: [...failed] }));
    expect(renders).toBe(1);
    expect(seen[0]).toBe(seen[1]);
  });
});

describe('PhaseHandOff', () => {
  it('hands the first phase state to the second once, and refuses a second phase without a first', () => {
    const handOff = new PhaseHandOff<number>();
    expect(() => handOff.take()).toThrow(/without the policies phase/);
    handOff.hand(1);
    expect(handOff.take()).toBe(1);
    expect(() => handOff.take()).toThrow();
    handOff.hand(2);
    handOff.clear();
    expect(() => handOff.take()).toThrow();
  });
});
