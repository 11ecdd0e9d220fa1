import { Backoff } from '@kube-router/kube';
import type { NflogPacket, NflogReader, NflogReaderEnd, NflogReaderOptions } from '@kube-router/netfilter';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { PodLike } from '../types.js';
import { DropLog } from './drop-log.js';
import type { DropLogOptions } from './drop-log.js';

/** A reader that the test feeds and ends: tcpdump's stand-in (the real one is tested in netfilter and netpol-testing). */
class FakeReaders {
  readonly started: { options: NflogReaderOptions; end(end: Partial<NflogReaderEnd>): void; stopped: boolean }[] = [];
  readonly start = (options: NflogReaderOptions): NflogReader => {
    let settle: (end: NflogReaderEnd) => void = () => undefined;
    const ended = new Promise<NflogReaderEnd>((resolve) => (settle = resolve));
    const entry = {
      options,
      stopped: false,
      end: (end: Partial<NflogReaderEnd>) => settle({ stopped: false, code: 1, signal: null, reason: 'tcpdump exited with code 1', ...end }),
    };
    this.started.push(entry);
    return {
      listening: Promise.resolve(),
      ended,
      stop: () => {
        entry.stopped = true;
        settle({ stopped: true, code: 0, signal: null, reason: 'was stopped' });
        return ended;
      },
    };
  };
  get current() {
    return this.started.at(-1)!;
  }
  send(packet: Partial<NflogPacket>): void {
    this.current.options.onPacket({
      time: new Date(),
      group: 100,
      family: 'ipv4',
      src: '10.0.0.3',
      dst: '10.0.0.2',
      protocol: 'tcp',
      srcPort: 40000,
      dstPort: 80,
      length: 60,
      ...packet,
    });
  }
}

const pod = (namespace: string, name: string, ...ips: string[]): PodLike => ({
  metadata: { namespace, name },
  spec: { nodeName: 'node-a' },
  status: { phase: 'Running', podIP: ips[0]!, podIPs: ips.map((ip) => ({ ip })) },
});

describe('DropLog', () => {
  let readers: FakeReaders;
  let lines: { level: string; details: Record<string, unknown>; message: string }[];
  let events: string[];
  let pods: PodLike[];
  let podsChanged: () => void;
  const logger = {
    info: (details: object, message: string) => lines.push({ level: 'info', details: details as Record<string, unknown>, message }),
    warn: (details: object, message: string) => lines.push({ level: 'warn', details: details as Record<string, unknown>, message }),
  };
  const dropLog = (options: Partial<DropLogOptions> = {}) =>
    new DropLog(
      { events: false, intervalMs: 10_000, netns: 'krt-node', ...options },
      {
        logger,
        nodeName: 'node-a',
        pods: () => pods,
        onChange: (handler) => {
          podsChanged = handler;
          return () => (podsChanged = () => undefined);
        },
        warnPod: (namespace, name, reason, message) => events.push(`${namespace}/${name} ${reason}: ${message}`),
        startReader: readers.start,
        backoff: new Backoff({ initialMs: 1_000, maxMs: 8_000, jitter: 0 }),
        now: () => Date.now(),
      },
    );
  const drops = () => lines.filter((line) => line.message === 'packet dropped by network policy').map((line) => line.details);

  beforeEach(() => {
    vi.useFakeTimers();
    readers = new FakeReaders();
    lines = [];
    events = [];
    pods = [
      pod('web', 'server', '10.0.0.2', 'fd00::2'),
      pod('other', 'client', '10.0.0.3', 'fd00::3'),
      { ...pod('host', 'agent', '10.0.0.9'), spec: { hostNetwork: true } },
    ];
    podsChanged = () => undefined;
  });
  afterEach(() => vi.useRealTimers());

  it('runs nothing until started, and reads group 100 of the backend netns', async () => {
    const log = dropLog();
    expect(readers.started).toHaveLength(0);
    log.start();
    expect(readers.started).toHaveLength(1);
    expect(readers.current.options).toMatchObject({ group: 100, netns: 'krt-node' });
    await log.stop();
    expect(readers.current.stopped).toBe(true);
  });

  it('logs each drop with both pods, once per pair and window, then how many it held back', async () => {
    const log = dropLog();
    log.start();
    for (let i = 0; i < 5; i++) readers.send({ srcPort: 40000 + i });
    readers.send({ family: 'ipv6', src: 'fd00:0:0::3', dst: 'fd00::2', srcPort: 41000 });
    readers.send({ src: '10.0.0.9', dst: '10.0.0.2', protocol: 'udp', dstPort: 53, srcPort: 5353 });
    expect(drops()).toEqual([
      { src: '10.0.0.3', dst: '10.0.0.2', srcPod: 'other/client', dstPod: 'web/server', protocol: 'tcp', port: 80, srcPort: 40000, family: 'ipv4' },
      { src: 'fd00::3', dst: 'fd00::2', srcPod: 'other/client', dstPod: 'web/server', protocol: 'tcp', port: 80, srcPort: 41000, family: 'ipv6' },
      // A host-network pod's address is the node's: not named after one of its pods.
      { src: '10.0.0.9', dst: '10.0.0.2', dstPod: 'web/server', protocol: 'udp', port: 53, srcPort: 5353, family: 'ipv4' },
    ]);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(lines.filter((line) => line.details.suppressed !== undefined).map((line) => line.details)).toEqual([
      { src: '10.0.0.3', dst: '10.0.0.2', srcPod: 'other/client', dstPod: 'web/server', protocol: 'tcp', port: 80, family: 'ipv4', suppressed: 4, windowMs: 10_000 },
    ]);
    // A new window: the next drop of the pair is logged at once.
    readers.send({ srcPort: 42000 });
    expect(drops()).toHaveLength(4);
    await log.stop();
  });

  it('logs every drop with no window, and names pods as they are now', async () => {
    const log = dropLog({ intervalMs: 0 });
    log.start();
    readers.send({});
    pods = [pod('web', 'server-2', '10.0.0.2')];
    readers.send({});
    podsChanged();
    readers.send({});
    expect(drops().map((drop) => `${drop.srcPod ?? '-'} -> ${drop.dstPod ?? '-'}`)).toEqual([
      'other/client -> web/server',
      // Read again only once pods changed.
      'other/client -> web/server',
      '- -> web/server-2',
    ]);
    await log.stop();
  });

  it('writes the summaries it holds when stopped', async () => {
    const log = dropLog();
    log.start();
    readers.send({});
    readers.send({});
    await log.stop();
    expect(lines.at(-1)?.details).toMatchObject({ suppressed: 1, dstPod: 'web/server' });
  });

  it('records a PolicyDrop Event on the pod the drop was meant for, only with events on', async () => {
    const quiet = dropLog();
    quiet.start();
    readers.send({});
    await quiet.stop();
    expect(events).toEqual([]);

    const log = dropLog({ events: true });
    log.start();
    readers.send({});
    readers.send({});
    readers.send({ src: '10.0.0.3', dst: '192.0.2.1', dstPort: 443 });
    readers.send({ src: '192.0.2.7', dst: '192.0.2.1', dstPort: 443 });
    expect(events).toEqual([
      'web/server PolicyDrop: network policy dropped TCP from 10.0.0.3 (other/client) to 10.0.0.2 (web/server):80',
      // On its way out of the cluster: the sending pod's.
      'other/client PolicyDrop: network policy dropped TCP from 10.0.0.3 (other/client) to 192.0.2.1:443',
    ]);
    // To a pod on another node, rejected here: the local sender's egress, not the remote pod whose policies let it in.
    pods.push({ ...pod('web', 'remote', '10.0.1.5'), spec: { nodeName: 'node-b' } });
    podsChanged();
    readers.send({ src: '10.0.0.3', dst: '10.0.1.5', dstPort: 8080 });
    expect(events.at(-1)).toBe('other/client PolicyDrop: network policy dropped TCP from 10.0.0.3 (other/client) to 10.0.1.5 (web/remote):8080');
    await log.stop();
  });

  it('starts tcpdump again with backoff when it ends, and logs why; never after stop', async () => {
    const log = dropLog();
    log.start();
    readers.current.end({ reason: 'tcpdump -i nflog:100 exited with code 1; stderr: busy' });
    await vi.advanceTimersByTimeAsync(0);
    expect(lines.at(-1)).toMatchObject({ level: 'warn', details: { restartInMs: 1_000, reason: expect.stringContaining('busy') } });
    await vi.advanceTimersByTimeAsync(999);
    expect(readers.started).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(readers.started).toHaveLength(2);
    readers.current.end({});
    await vi.advanceTimersByTimeAsync(0);
    expect(lines.at(-1)?.details).toMatchObject({ restartInMs: 2_000 });
    await vi.advanceTimersByTimeAsync(2_000);
    expect(readers.started).toHaveLength(3);
    // The restarted reader still logs.
    readers.send({});
    expect(drops()).toHaveLength(1);

    readers.current.end({});
    await vi.advanceTimersByTimeAsync(0);
    await log.stop();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(readers.started).toHaveLength(3);
  });

  it('holds at most 10000 pairs and counts the drops of others', async () => {
    const log = dropLog();
    log.start();
    for (let i = 0; i < 10_005; i++) readers.send({ srcPort: 1, dstPort: 1 + (i % 60_000), src: `10.1.${i >> 8}.${i & 255}` });
    expect(drops()).toHaveLength(10_000);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(lines.find((line) => line.level === 'warn')?.details).toEqual({ suppressed: 5, trackedPairs: 10_000 });
    await log.stop();
  });
});
