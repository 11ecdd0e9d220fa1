import { afterAll, beforeAll } from 'vitest';
import { randomBytes } from 'node:crypto';
import { ExecRunner } from '../exec-runner.js';
import { hasTool } from '../executables.js';
import { addNetns, deleteNetns } from '../netns.js';

export const isRoot = process.getuid?.() === 0;

/** Why a real-kernel test cannot run here, or undefined when it can. */
export function missingForRealTests(...tools: string[]): string | undefined {
  if (!isRoot) return 'needs root';
  const missing = ['ip', ...tools].filter((tool) => !hasTool(tool));
  return missing.length > 0 ? `missing tools: ${missing.join(', ')}` : undefined;
}

export interface TestNetns {
  readonly name: string;
  readonly runner: ExecRunner;
  remove(): Promise<void>;
}

/** A fresh network namespace named krt-<random>, so parallel runs and leftovers of crashed runs never collide. */
export async function createTestNetns(): Promise<TestNetns> {
  const runner = new ExecRunner({ defaultTimeoutMs: 10_000 });
  const name = `krt-${randomBytes(4).toString('hex')}`;
  await addNetns(runner, name);
  return { name, runner, remove: () => deleteNetns(runner, name) };
}

/**
 * One namespace for the enclosing describe: created before its tests, removed after them, also when they fail. Call
 * it before the describe's own beforeAll hooks, which may then use it.
 */
export function useTestNetns(): TestNetns {
  let netns: TestNetns | undefined;
  beforeAll(async () => {
    netns = await createTestNetns();
  });
  afterAll(async () => {
    await netns?.remove();
  });
  const current = (): TestNetns => {
    if (!netns) throw new Error('the test namespace is used before its beforeAll hook ran');
    return netns;
  };
  return {
    get name() {
      return current().name;
    },
    get runner() {
      return current().runner;
    },
    remove: () => current().remove(),
  };
}
