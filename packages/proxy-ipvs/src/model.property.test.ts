/*
 * One Service with arbitrary ports, protocols and address spellings among good ones: the model never throws, programs
 * every good Service exactly as it would alone, blames only the odd one, and hands the kernel tools nothing they
 * cannot read (one such element once made ipset refuse the whole family's batch).
 */
import type { V1EndpointSlice, V1Node, V1Service, V1ServicePort } from '@kubernetes/client-node';
import { parseIp } from '@kube-router/kube';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildProxyModel } from './model.js';
import type { ModelInputs, ModelOptions } from './model.js';

const NODE = 'n1';
const node: V1Node = { metadata: { name: NODE }, status: { addresses: [{ type: 'InternalIP', address: '192.168.1.10' }, { type: 'InternalIP', address: 'fd00:1::10' }] } };
const options: ModelOptions = { families: ['ipv4', 'ipv6'], nodePortBindOnAllIp: false, serviceProxyName: 'kube-router' };

const good: V1Service[] = [
  { metadata: { namespace: 'ns', name: 'web' }, spec: { clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10', 'fd00:96::10'], ports: [{ name: 'http', protocol: 'TCP', port: 80 }] } },
  { metadata: { namespace: 'ns', name: 'dns' }, spec: { clusterIP: '10.96.0.11', ports: [{ name: 'dns', protocol: 'UDP', port: 53 }, { name: 'dns-tcp', protocol: 'TCP', port: 53 }] } },
  {
    metadata: { namespace: 'ns', name: 'edge' },
    spec: { type: 'LoadBalancer', clusterIP: '10.96.0.12', externalIPs: ['203.0.113.12'], ports: [{ name: 'https', protocol: 'SCTP', port: 443, nodePort: 30443 }] },
    status: { loadBalancer: { ingress: [{ ip: '198.51.100.12' }] } },
  },
];
const goodSlices: V1EndpointSlice[] = good.map((svc, i) => ({
  addressType: 'IPv4',
  metadata: { namespace: 'ns', name: `${svc.metadata?.name}-1`, labels: { 'kubernetes.io/service-name': svc.metadata?.name as string } },
  ports: (svc.spec?.ports ?? []).map((port) => ({ name: port.name, protocol: port.protocol, port: 8000 + port.port })),
  endpoints: [{ addresses: [`10.244.0.${i + 2}`], conditions: { ready: true }, nodeName: NODE }],
}));

// Spellings the fuzzing found or that readers disagree on, beside whatever fast-check makes up.
const TRICKY_ADDRESSES = ['010.0.0.1', '10.1', '0x0a.0.0.1', '::1.2.3.4', '::ffff:10.96.0.99', 'fe80::1%eth0', '10.0.0.1%0', '1.2.3.4/32', ' 10.0.0.1', '', 'None', '2001:DB8::1', '::', '0.0.0.0'];
const address = fc.oneof(
  fc.constantFrom(...TRICKY_ADDRESSES),
  fc.ipV4(),
  fc.ipV4Extended(),
  fc.ipV6(),
  fc.ipV6().map((ip) => `${ip}%eth0`),
  fc.string({ maxLength: 12 }),
);
const PROTOTYPE_KEYS = ['toString', '__proto__', 'constructor', 'hasOwnProperty', 'valueOf', '__defineGetter__', 'isPrototypeOf'];
const protocol = fc.oneof(fc.constantFrom('TCP', 'UDP', 'SCTP', 'tcp', '', ...PROTOTYPE_KEYS), fc.string({ maxLength: 8 }));
const portNumber = fc.oneof(
  fc.constantFrom(0, 1, 80, 65_535, 65_536, 70_000, -1, 80.5, 2 ** 31 - 1, -(2 ** 31)),
  fc.integer({ min: -100_000, max: 100_000 }),
);

const servicePort: fc.Arbitrary<V1ServicePort> = fc.record(
  { name: fc.constantFrom('http', 'dns', 'x', '__proto__'), protocol, port: portNumber, nodePort: portNumber, targetPort: fc.oneof(portNumber, fc.constantFrom('http', 'toString')) },
  { requiredKeys: ['port'] },
);

const odd = fc
  .record({
    type: fc.constantFrom('ClusterIP', 'NodePort', 'LoadBalancer'),
    clusterIP: address,
    clusterIPs: fc.array(address, { maxLength: 2 }),
    externalIPs: fc.array(address, { maxLength: 2 }),
    ingress: fc.array(address, { maxLength: 2 }),
    local: fc.boolean(),
    healthCheckNodePort: portNumber,
    ports: fc.array(servicePort, { minLength: 1, maxLength: 3 }),
    endpoints: fc.array(address, { maxLength: 3 }),
    slicePort: portNumber,
    slicePortName: fc.constantFrom('http', 'dns', 'x', '__proto__'),
    sliceProtocol: protocol,
  })
  .map(({ type, clusterIP, clusterIPs, externalIPs, ingress, local, healthCheckNodePort, ports, endpoints, slicePort, slicePortName, sliceProtocol }) => {
    const svc: V1Service = {
      metadata: { namespace: 'ns', name: 'odd' },
      spec: { type, clusterIP, clusterIPs, externalIPs, ports, healthCheckNodePort, ...(local && { externalTrafficPolicy: 'Local' }) },
      status: { loadBalancer: { ingress: ingress.map((ip) => ({ ip })) } },
    };
    const slice: V1EndpointSlice = {
      addressType: 'IPv4',
      metadata: { namespace: 'ns', name: 'odd-1', labels: { 'kubernetes.io/service-name': 'odd' } },
      ports: [{ name: slicePortName, protocol: sliceProtocol, port: slicePort }],
      endpoints: [{ addresses: endpoints, conditions: { ready: true }, nodeName: NODE }],
    };
    return { svc, slice };
  });

function inputs(services: V1Service[], slices: V1EndpointSlice[]): ModelInputs {
  return {
    services,
    slicesFor: (namespace, name) => slices.filter((s) => s.metadata?.namespace === namespace && s.metadata.labels?.['kubernetes.io/service-name'] === name),
    node,
    nodeName: NODE,
    localAddresses: [],
  };
}

const isPort = (port: number) => Number.isInteger(port) && port >= 1 && port <= 65_535;
const isCanonicalAddress = (text: string) => parseIp(text)?.text === text;

describe('buildProxyModel with one odd Service among good ones', () => {
  const alone = buildProxyModel(inputs(good, goodSlices), options);

  it('programs the good Services alone as they would be, and fails only the odd one', () => {
    expect(alone.problems).toEqual([]);
    expect(alone.virtualServers.size).toBe(9);
    fc.assert(
      fc.property(odd, ({ svc, slice }) => {
        // The good ones come first: an address or NodePort the odd one also claims stays theirs.
        const model = buildProxyModel(inputs([...good, svc], [...goodSlices, slice]), options);
        for (const [id, server] of alone.virtualServers) expect(model.virtualServers.get(id)).toEqual(server);
        for (const ip of alone.vips.ipv4) expect(model.vips.ipv4.has(ip)).toBe(true);
        for (const ip of alone.vips.ipv6) expect(model.vips.ipv6.has(ip)).toBe(true);
        for (const problem of model.problems) expect(problem.owner).toBe('ns/odd');
        expect(model.nodeProblems).toEqual([]);
        // What reaches ipvsadm, ipset and iptables is something each can read.
        for (const server of model.virtualServers.values()) {
          expect(['tcp', 'udp', 'sctp']).toContain(server.service.protocol);
          expect(isPort(server.service.port), `port ${server.service.port}`).toBe(true);
          expect(isCanonicalAddress(server.service.address), server.service.address).toBe(true);
          for (const destination of server.destinations) {
            expect(isPort(destination.port), `port ${destination.port}`).toBe(true);
            expect(isCanonicalAddress(destination.address), destination.address).toBe(true);
          }
        }
        for (const check of model.healthChecks) expect(isPort(check.port)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});
