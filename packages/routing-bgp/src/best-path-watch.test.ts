import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BestPathWatch } from './best-path-watch.js';
import { FakeGobgpd } from './testing/fake-gobgpd.js';

function harness() {
  const gobgpd = new FakeGobgpd();
  const client = gobgpd.client();
  const watchEvents = vi.spyOn(client, 'watchEvents');
  const onPaths = vi.fn();
  const onLost = vi.fn();
  const onEnd = vi.fn();
  const watch = new BestPathWatch({
    gobgp: () => client,
    handlers: { onPaths, onPeerChange: () => undefined },
    onLost,
    onEnd,
    logger: pino({ level: 'silent' }),
  });
  return { gobgpd, watch, watchEvents, onPaths, onLost, onEnd };
}

describe('BestPathWatch', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('opens one stream and passes its paths on', () => {
    const { gobgpd, watch, watchEvents, onPaths } = harness();
    watch.ensure();
    watch.ensure();
    expect(watchEvents).toHaveBeenCalledOnce();
    expect(watch.watching).toBe(true);
    gobgpd.watch?.onPaths([]);
    expect(onPaths).toHaveBeenCalledOnce();
  });

  it('a stream that ends asks for a sync after a pause; the next ensure opens a new one', async () => {
    const { gobgpd, watch, watchEvents, onLost, onEnd } = harness();
    watch.ensure();
    const error = new Error('gobgpd went away');
    gobgpd.watch?.onEnd(error);
    expect(watch.watching).toBe(false);
    // The end itself is reported at once: a table asked for will not come.
    expect(onEnd).toHaveBeenCalledExactlyOnceWith(error);
    await vi.advanceTimersByTimeAsync(999);
    expect(onLost).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(onLost).toHaveBeenCalledOnce();
    watch.ensure();
    expect(watchEvents).toHaveBeenCalledTimes(2);
  });

  it('cancel closes the stream of a gobgpd that was reset; stop also ends a pending retry and any later watch', async () => {
    const { gobgpd, watch, watchEvents, onLost } = harness();
    watch.ensure();
    watch.cancel();
    expect(gobgpd.watch).toBeUndefined();
    watch.ensure();
    gobgpd.watch?.onEnd();
    watch.stop();
    await vi.advanceTimersByTimeAsync(2_000);
    expect(onLost).not.toHaveBeenCalled();
    watch.ensure();
    expect(watchEvents).toHaveBeenCalledTimes(2);
  });

  it('reopen replaces an open stream with a new one (which starts with the table) and never opens one that was not', async () => {
    const { gobgpd, watch, watchEvents, onLost, onEnd } = harness();
    // Nothing reopened: the caller must not wait for a table.
    expect(watch.reopen()).toBe(false);
    expect(watchEvents).not.toHaveBeenCalled();
    watch.ensure();
    const first = gobgpd.watch;
    expect(watch.reopen()).toBe(true);
    expect(watchEvents).toHaveBeenCalledTimes(2);
    expect(gobgpd.watch).not.toBe(first);
    expect(watch.watching).toBe(true);
    // The replaced stream's cancel is not a loss.
    await vi.advanceTimersByTimeAsync(2_000);
    expect(onLost).not.toHaveBeenCalled();
    expect(onEnd).not.toHaveBeenCalled();
    watch.stop();
    expect(watch.reopen()).toBe(false);
    expect(watchEvents).toHaveBeenCalledTimes(2);
  });
});
