import { describe, expect, it } from 'vitest';
import { fromIpRoute, InvalidRouteError, toKernelRoute, type InstalledRoute } from './kernel-route.js';
import { planRouteChanges, renderRouteChange } from './plan.js';

describe('toKernelRoute', () => {
  it('brings destinations and gateways of both families to canonical form', () => {
    expect(toKernelRoute({ destination: '10.244.1.7/24', gateway: '192.0.2.2' })).toEqual({
      family: 'ipv4',
      destination: '10.244.1.0/24',
      gateway: '192.0.2.2',
      table: 254,
    });
    expect(toKernelRoute({ destination: 'FD00:10:244:0001:0::/64', gateway: '2001:DB8:0::2', device: 'eth0', table: 100 })).toEqual({
      family: 'ipv6',
      destination: 'fd00:10:244:1::/64',
      gateway: '2001:db8::2',
      device: 'eth0',
      table: 100,
    });
  });

  it.each([
    [{ destination: '10.244.1.0' }, 'not a CIDR'],
    [{ destination: '10.244.1.0/33', gateway: '192.0.2.1' }, 'not a CIDR'],
    [{ destination: '10.244.1.0/24', gateway: 'gw' }, 'not an IP address'],
    [{ destination: '10.244.1.0/24', gateway: '10' }, 'not an IP address'],
    [{ destination: '012.244.1.0/24', gateway: '192.0.2.1' }, 'not a CIDR'],
    [{ destination: '10.244.1.0/24/8', gateway: '192.0.2.1' }, 'not a CIDR'],
    [{ destination: '10.244.1.0/24', gateway: '2001:db8::1' }, 'not of the destination family'],
    // ip cannot parse a zone: it stopped the batch there, and no route after it was programmed.
    [{ destination: 'fd00:1::/64', gateway: 'fe80::1%eth0' }, 'not an IP address'],
    [{ destination: '10.244.1.0/24', gateway: '010.0.0.1' }, 'not an IP address'],
    [{ destination: 'fd00:1::%eth0/64', gateway: 'fd00::1' }, 'not a CIDR'],
    [{ destination: '::ffff:10.0.0.0/104', gateway: '10.0.0.1' }, 'not a CIDR'],
    [{ destination: '10.244.1.0/024', gateway: '192.0.2.1' }, 'not a CIDR'],
    [{ destination: '10.244.1.0/24', device: 'eth0 table 5' }, 'not an interface name'],
    [{ destination: '10.244.1.0/24' }, 'needs a gateway, a device or both'],
    [{ destination: '10.244.1.0/24', device: 'eth0', table: 255 }, 'table must be'],
  ])('refuses %j (%s)', (route, reason) => {
    expect(() => toKernelRoute(route)).toThrow(InvalidRouteError);
    expect(() => toKernelRoute(route)).toThrow(reason);
  });
});

describe('fromIpRoute', () => {
  it('reads host routes, default routes, tables and metrics as ip -j lists them', () => {
    expect(fromIpRoute('ipv4', { dst: '10.3.0.1', gateway: '192.0.2.3', dev: 'trs0', table: '100', flags: [] })).toEqual({
      family: 'ipv4',
      destination: '10.3.0.1/32',
      gateway: '192.0.2.3',
      device: 'trs0',
      table: 100,
    });
    expect(fromIpRoute('ipv6', { dst: 'default', gateway: 'fe80::1', dev: 'eth0', metric: 1024, flags: [] })).toMatchObject({
      destination: '::/0',
      table: 254,
      metric: 1024,
    });
    expect(fromIpRoute('ipv4', { dst: '10.0.0.0/8', dev: 'x', table: 'custom', flags: [] })).toBeUndefined();
  });
});

describe('planRouteChanges', () => {
  const wanted = (destination: string, gateway: string) => toKernelRoute({ destination, gateway });
  const installed = (destination: string, gateway: string, extra: Partial<InstalledRoute> = {}): InstalledRoute => ({
    ...toKernelRoute({ destination, gateway }),
    ...extra,
  });

  it('adds what is missing, replaces a changed next hop, removes what nobody wants, and leaves the rest', () => {
    const changes = planRouteChanges(
      [wanted('10.1.0.0/24', '192.0.2.2'), wanted('10.2.0.0/24', '192.0.2.3'), wanted('10.3.0.0/24', '192.0.2.4')],
      [installed('10.1.0.0/24', '192.0.2.2'), installed('10.2.0.0/24', '192.0.2.9'), installed('10.9.0.0/24', '192.0.2.2')],
    );
    expect(changes.map((c) => [c.kind, c.route.destination])).toEqual([
      ['remove', '10.9.0.0/24'],
      ['replace', '10.2.0.0/24'],
      ['add', '10.3.0.0/24'],
    ]);
  });

  it('accepts any device when the wanted route names none, and tells tables apart', () => {
    expect(planRouteChanges([wanted('10.1.0.0/24', '192.0.2.2')], [installed('10.1.0.0/24', '192.0.2.2', { device: 'eth0' })])).toEqual([]);
    const inTable = { ...wanted('10.1.0.0/24', '192.0.2.2'), table: 100 };
    expect(planRouteChanges([inTable], [installed('10.1.0.0/24', '192.0.2.2')]).map((c) => [c.kind, c.route.table])).toEqual([
      ['remove', 254],
      ['add', 100],
    ]);
  });

  it('removes a duplicate of ours at another metric, and counts IPv6 metric 1024 as the default', () => {
    const v6 = toKernelRoute({ destination: 'fd00:1::/64', gateway: '2001:db8::2' });
    const changes = planRouteChanges([v6], [{ ...v6, metric: 1024 }, { ...v6, metric: 50 }]);
    expect(changes).toEqual([{ kind: 'remove', route: { ...v6, metric: 50 } }]);
  });

  it('renders ip -batch lines that always carry the protocol number', () => {
    const route = toKernelRoute({ destination: '10.1.0.0/24', gateway: '192.0.2.2', device: 'trs0' });
    expect(renderRouteChange({ kind: 'add', route }, 17)).toBe('route add 10.1.0.0/24 via 192.0.2.2 dev trs0 proto 17 table 254');
    expect(renderRouteChange({ kind: 'replace', route }, 17)).toBe('route replace 10.1.0.0/24 via 192.0.2.2 dev trs0 proto 17 table 254');
    expect(renderRouteChange({ kind: 'remove', route: { ...route, metric: 5 } }, 17)).toBe('route del 10.1.0.0/24 proto 17 table 254 metric 5');
  });
});
