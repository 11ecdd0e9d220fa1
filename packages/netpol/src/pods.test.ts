import { describe, expect, it } from 'vitest';
import { isPodActionable, podIps, podView, samePodView } from './pods.js';
import { NODE, pod } from './testing/fixtures.js';
import type { PodLike } from './types.js';

describe('isPodActionable', () => {
  it.each([
    ['a running pod with an IP', pod('a/p', { ips: ['10.0.0.1'] }), true],
    ['a pending pod that already has an IP', pod('a/p', { ips: ['10.0.0.1'], phase: 'Pending' }), true],
    [
      'a pod being deleted (still running through its grace period)',
      pod('a/p', { ips: ['10.0.0.1'], deleting: true }),
      true,
    ],
    ['a pod without IP', pod('a/p', { ips: [] }), false],
    ['a pod with only an invalid IP', pod('a/p', { ips: ['not-an-ip'] }), false],
    ['a host-network pod', pod('a/p', { ips: ['10.0.0.1'], hostNetwork: true }), false],
    ['a succeeded pod', pod('a/p', { ips: ['10.0.0.1'], phase: 'Succeeded' }), false],
    ['a failed pod', pod('a/p', { ips: ['10.0.0.1'], phase: 'Failed' }), false],
    ['a pod without namespace', { metadata: { name: 'p' }, status: { podIP: '10.0.0.1' } } as PodLike, false],
  ])('%s: %s', (_case, candidate, expected) => {
    expect(isPodActionable(candidate)).toBe(expected);
  });
});

describe('podIps', () => {
  it('keeps each address once, in the order first listed, however long a malformed list is', () => {
    const listed = (ips: string[]) => ({ status: { podIPs: ips.map((ip) => ({ ip })) } }) as PodLike;
    expect(podIps(listed(['10.0.0.1', 'fd00::1'])).map((ip) => ip.text)).toEqual(['10.0.0.1', 'fd00::1']);
    expect(podIps(listed(['10.0.0.1', '10.0.0.1'])).map((ip) => ip.text)).toEqual(['10.0.0.1']);
    // Written two ways, one address.
    expect(podIps(listed(['fd00::1', '10.0.0.1', 'FD00:0::1', 'bad', '10.0.0.1', '10.0.0.2'])).map((ip) => ip.text)).toEqual([
      'fd00::1',
      '10.0.0.1',
      '10.0.0.2',
    ]);
  });

  it('reads a list of one or two entries, the usual pod, with the same rules', () => {
    const listed = (ips: unknown[]) => ({ status: { podIP: '10.9.9.9', podIPs: ips.map((ip) => ({ ip })) } }) as PodLike;
    const texts = (ips: unknown[]) => podIps(listed(ips)).map((ip) => ip.text);
    expect(texts(['fd00::1'])).toEqual(['fd00::1']);
    expect(texts(['bad', '10.0.0.1'])).toEqual(['10.0.0.1']);
    expect(texts(['10.0.0.1', 7])).toEqual(['10.0.0.1']);
    expect(texts(['fd00::1', 'FD00:0::1'])).toEqual(['fd00::1']);
    expect(texts(['bad', 'worse'])).toEqual([]);
    // status.podIP is read only when podIPs lists nothing.
    expect(texts([])).toEqual(['10.9.9.9']);
  });
});

describe('podView', () => {
  it('reads IPs of both families, canonical, sorted and deduplicated', () => {
    const view = podView(pod('a/p', { ips: ['FD00::0:1', '10.0.0.2', '10.0.0.1', 'fd00::1'] }), NODE);
    expect(view?.ips).toEqual({ ipv4: ['10.0.0.1', '10.0.0.2'], ipv6: ['fd00::1'] });
  });

  it('falls back to status.podIP', () => {
    const view = podView({ metadata: { namespace: 'a', name: 'p' }, status: { podIP: '10.0.0.7' } }, NODE);
    expect(view?.ips.ipv4).toEqual(['10.0.0.7']);
    expect(view?.local).toBe(false);
  });

  it('collects named ports of containers and sidecars, defaulting the protocol to TCP', () => {
    const view = podView(
      {
        metadata: { namespace: 'a', name: 'p' },
        spec: {
          nodeName: NODE,
          containers: [
            { ports: [{ name: 'http', containerPort: 80 }, { containerPort: 81 }] },
            { ports: [{ name: 'dns', containerPort: 53, protocol: 'UDP' }] },
          ],
          initContainers: [
            { restartPolicy: 'Always', ports: [{ name: 'proxy', containerPort: 15001 }] },
            { ports: [{ name: 'setup', containerPort: 9999 }] },
          ],
        },
        status: { podIP: '10.0.0.1' },
      },
      NODE,
    );
    expect(Object.fromEntries(view?.namedPorts ?? [])).toEqual({ 'http/TCP': 80, 'dns/UDP': 53, 'proxy/TCP': 15001 });
    expect(view?.local).toBe(true);
  });

  it('tells two views of a pod apart exactly when something the compiler reads differs', () => {
    const base = podView(pod('a/p', { labels: { app: 'x' }, ips: ['10.0.0.1'] }), NODE)!;
    const view = (options: Parameters<typeof pod>[1]) => podView(pod('a/p', options), NODE)!;
    expect(samePodView(view({ labels: { app: 'x' }, ips: ['10.0.0.1'], phase: 'Pending' }), base)).toBe(true);
    expect(samePodView(view({ labels: { app: 'y' }, ips: ['10.0.0.1'] }), base)).toBe(false);
    expect(samePodView(view({ labels: { app: 'x' }, ips: ['10.0.0.2'] }), base)).toBe(false);
    expect(samePodView(view({ labels: { app: 'x' }, ips: ['10.0.0.1'], node: 'other' }), base)).toBe(false);
    expect(samePodView(view({ labels: { app: 'x' }, ips: ['10.0.0.1'], ports: [{ name: 'h', port: 1 }] }), base)).toBe(false);
    // A pod that appears or goes is a change; no pod before and after is none.
    expect(samePodView(undefined, base)).toBe(false);
    expect(samePodView(base, undefined)).toBe(false);
    expect(samePodView(undefined, undefined)).toBe(true);
    // Asked again, the answer holds (each view's signature is built once and kept).
    expect(samePodView(view({ labels: { app: 'y' }, ips: ['10.0.0.1'] }), base)).toBe(false);
    expect(samePodView(base, base)).toBe(true);
  });
});
