import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { acceptedUnknownOptionKeys, ReleaseStack, runControllerContractSuite, UNKNOWN_OPTION_KEYS } from './contract.js';
import { createSyncController } from './sync-controller.js';
import { definePlugin } from './controller.js';
import { testContext } from './testing/context.js';

const schemaPlugin = <O>(options: z.ZodType<O>) =>
  definePlugin({ name: 'schema', host: '*', options, create: () => Promise.reject(new Error('not created')) });

describe('acceptedUnknownOptionKeys', () => {
  it('is empty for a strict schema, whose refusal names the key', () => {
    const plugin = schemaPlugin(z.strictObject({ ranges: z.array(z.string()).default([]) }));
    expect(acceptedUnknownOptionKeys(plugin, { ranges: ['10.0.0.0/24'] })).toEqual([]);
  });

  it('lists every unknown key that a stripping or passthrough schema accepts', () => {
    expect(acceptedUnknownOptionKeys(schemaPlugin(z.object({ ranges: z.array(z.string()) })), { ranges: [] })).toEqual([
      ...UNKNOWN_OPTION_KEYS,
    ]);
    expect(acceptedUnknownOptionKeys(schemaPlugin(z.looseObject({})), {})).toEqual([...UNKNOWN_OPTION_KEYS]);
  });

  it('lists a key whose refusal does not name it', () => {
    const vague = {
      name: 'vague',
      options: {
        parse: (input: unknown) => {
          if (Object.keys(input as object).length > 0) throw new Error('bad options');
          return {};
        },
      },
    };
    expect(acceptedUnknownOptionKeys(vague, {})).toEqual([...UNKNOWN_OPTION_KEYS]);
  });
});

describe('ReleaseStack (what a contract setup defers)', () => {
  it('releases last first, runs every release though one fails, then throws the first failure', async () => {
    const stack = new ReleaseStack();
    const released: string[] = [];
    stack.defer(() => released.push('netns'));
    stack.defer(async () => {
      released.push('server');
      throw new Error('server would not close');
    });
    stack.defer(() => released.push('informers'));
    await expect(stack.releaseAll()).rejects.toThrow('server would not close');
    expect(released).toEqual(['informers', 'server', 'netns']);
    // Released once: a second call has nothing left.
    await stack.releaseAll();
    expect(released).toHaveLength(3);
  });

  it('joins several failures instead of keeping the first', async () => {
    const stack = new ReleaseStack();
    stack.defer(() => {
      throw new Error('netns busy');
    });
    stack.defer(() => {
      throw new Error('server would not close');
    });
    const failure = await stack.releaseAll().then(() => undefined, (error: unknown) => error);
    expect(failure).toBeInstanceOf(AggregateError);
    expect((failure as AggregateError).errors.map((error: Error) => error.message)).toEqual(['server would not close', 'netns busy']);
  });
});

// The suite's own options check, run on a plugin with a strict schema (the other checks run in sync-controller.test.ts).
const strictPlugin = definePlugin({
  name: 'strict',
  host: '*',
  options: z.strictObject({ syncPeriodMs: z.number().int().positive().default(60_000) }),
  create: (ctx, options) => createSyncController(ctx, { name: 'strict', syncPeriodMs: options.syncPeriodMs, sync: async () => {} }),
});
runControllerContractSuite({
  name: 'strict (options check)',
  plugin: { plugin: strictPlugin, validOptions: { syncPeriodMs: 30_000 } },
  hangBoundMs: 2_000,
  async setup() {
    const ctx = testContext();
    let mode: 'ok' | 'fail' | 'hang' = 'ok';
    let release: (() => void) | undefined;
    const controller = createSyncController(ctx, {
      name: 'strict',
      syncPeriodMs: 60_000,
      syncTimeoutMs: 300,
      async sync({ signal }) {
        if (mode === 'fail') throw new Error('strict: broken');
        if (mode === 'hang') {
          await new Promise<void>((resolve, reject) => {
            release = resolve;
            signal.addEventListener('abort', () => reject(signal.reason), { once: true });
          });
        }
      },
    });
    return {
      controller,
      health: ctx.health,
      metrics: ctx.metrics,
      faults: {
        fail: () => void (mode = 'fail'),
        hang: () => void (mode = 'hang'),
        heal: () => {
          mode = 'ok';
          release?.();
        },
      },
      teardown: async () => undefined,
    };
  },
});

describe('the contract suite docs', () => {
  it('list every check the suite makes, by its test name (packages/controller/README.md)', () => {
    const suite = readFileSync(new URL('./contract.ts', import.meta.url), 'utf8');
    const checks = [...suite.matchAll(/\bit(?:\.todo)?\('([^']+)'/g)].map((m) => m[1] as string).filter((t) => !t.includes('pass `plugin`'));
    expect(checks.length).toBeGreaterThanOrEqual(6);
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    expect(checks.filter((title) => !readme.includes(`| ${title} |`))).toEqual([]);
  });
});
