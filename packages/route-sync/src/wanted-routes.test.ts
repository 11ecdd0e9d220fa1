import { describe, expect, it } from 'vitest';
import { WantedRoutes } from './wanted-routes.js';

describe('WantedRoutes', () => {
  it('replaces an owner’s whole set, so a withdrawn route is simply gone', () => {
    const wanted = new WantedRoutes();
    wanted.setRoutes('bgp', [{ destination: '10.1.0.0/24', gateway: '192.0.2.2' }, { destination: '10.2.0.0/24', gateway: '192.0.2.3' }]);
    wanted.setRoutes('bgp', [{ destination: '10.2.0.0/24', gateway: '192.0.2.3' }]);
    expect(wanted.wantedRoutes()).toEqual([{ destination: '10.2.0.0/24', gateway: '192.0.2.3' }]);
    wanted.setRoutes('bgp', []);
    expect(wanted.wantedRoutes()).toEqual([]);
  });

  it('notifies on every change and stops after unsubscribe', () => {
    const wanted = new WantedRoutes();
    let calls = 0;
    const unsubscribe = wanted.onChange(() => calls++);
    wanted.setRoutes('a', [{ destination: '10.1.0.0/24', device: 'eth0' }]);
    unsubscribe();
    wanted.setRoutes('a', []);
    expect(calls).toBe(1);
  });

  it('keeps the first owner by name on a conflict and reports the other; identical duplicates are fine', () => {
    const wanted = new WantedRoutes();
    wanted.setRoutes('zeta', [{ destination: '10.1.0.0/24', gateway: '192.0.2.9' }, { destination: '10.2.0.0/24', device: 'eth0' }]);
    wanted.setRoutes('alpha', [{ destination: '10.1.0.1/24', gateway: '192.0.2.2' }, { destination: '10.2.0.0/24', device: 'eth0' }]);
    const { routes, problems } = wanted.resolve();
    expect(routes.map((r) => [r.destination, r.gateway ?? r.device])).toEqual([
      ['10.1.0.0/24', '192.0.2.2'],
      ['10.2.0.0/24', 'eth0'],
    ]);
    expect(problems.map((p) => [p.object, p.error.message])).toEqual([
      ['route/10.1.0.0/24', "zeta wants via 192.0.2.9 but alpha wants via 192.0.2.2; alpha's route is installed"],
    ]);
    expect(wanted.wantedRoutes()).toHaveLength(2);
  });

  it('reports an invalid route without dropping the valid ones', () => {
    const wanted = new WantedRoutes();
    wanted.setRoutes('bgp', [{ destination: 'nonsense', gateway: '192.0.2.2' }, { destination: '10.2.0.0/24', gateway: '192.0.2.3' }]);
    const { routes, problems } = wanted.resolve();
    expect(routes.map((r) => r.destination)).toEqual(['10.2.0.0/24']);
    expect(problems.map((p) => p.object)).toEqual(['route/nonsense']);
  });

  it('keeps its own copies of what owners hand over', () => {
    const wanted = new WantedRoutes();
    const routes = [{ destination: '10.1.0.0/24', gateway: '192.0.2.2' }];
    wanted.setRoutes('bgp', routes);
    routes[0]!.gateway = '192.0.2.99';
    expect(wanted.wantedRoutes()[0]?.gateway).toBe('192.0.2.2');
  });
});
