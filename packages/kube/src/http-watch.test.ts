// The watch transport against the embedded API server, with handlers that fail the way client-node's async ones do.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HttpWatch } from './http-watch.js';
import type { HttpWatchOptions } from './http-watch.js';
import { pod, startTestCluster, waitFor } from './testing/fixtures.js';
import type { TestCluster } from './testing/fixtures.js';

let cluster: TestCluster;
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown): void => {
  unhandled.push(reason);
};

beforeEach(async () => {
  unhandled.length = 0;
  process.on('unhandledRejection', onUnhandled);
  cluster = await startTestCluster();
});

afterEach(async () => {
  await cluster.close();
  process.off('unhandledRejection', onUnhandled);
});

function transport(overrides: Partial<HttpWatchOptions> = {}) {
  const failures: unknown[] = [];
  const watch = new HttpWatch(cluster.kubeConfig, {
    connectTimeoutMs: 2000,
    timeoutSeconds: () => 60,
    beforeWatch: () => true,
    onConnected: () => {},
    readObject: (object) => ({ readable: true, object }),
    onMalformedEvent: () => {},
    onExpired: () => {},
    onHandlerFailure: (error) => failures.push(error),
    ...overrides,
  });
  return { watch, failures };
}

describe('HttpWatch', () => {
  it('ends the watch with the error when an async event handler rejects, instead of an unhandled rejection', async () => {
    cluster.server.create(pod('first'));
    const { watch } = transport();
    const ended: unknown[] = [];
    const controller = await watch.watch(
      '/api/v1/pods',
      {},
      async (phase) => {
        if (phase === 'ADDED') throw new Error('the handler failed');
      },
      (error) => {
        ended.push(error);
      },
    );
    await waitFor('the end of the watch', () => ended.length === 1);
    expect(String(ended[0])).toBe('Error: the handler failed');
    expect(controller.signal.aborted).toBe(true);
    expect(unhandled).toEqual([]);
  });

  it('reports a done handler that rejects (the ListWatch lists and re-watches in it)', async () => {
    const { watch, failures } = transport();
    await watch.watch(
      '/api/v1/pods',
      { timeoutSeconds: 1 },
      () => {},
      async () => {
        throw new Error('the relist failed');
      },
    );
    cluster.server.faults.closeWatches('pods');
    await waitFor('the failure report', () => failures.length === 1);
    expect(String(failures[0])).toBe('Error: the relist failed');
    expect(unhandled).toEqual([]);
  });
});
