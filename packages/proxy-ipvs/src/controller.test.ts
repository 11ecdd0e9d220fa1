import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { parseIp } from '@kube-router/kube';
import { RecordingRunner } from '@kube-router/netfilter';
import type { CommandSpec, ScriptedResult } from '@kube-router/netfilter';
import { describe, expect, it } from 'vitest';
import { controllerHarness } from './testing/controller-harness.js';

const node: V1Node = { metadata: { name: 'n1' }, status: { addresses: [{ type: 'InternalIP', address: '192.168.1.10' }] } };

function svc(name: string, spec: V1Service['spec']): V1Service {
  return { metadata: { namespace: 'ns', name }, spec: { ports: [{ name: 'http', protocol: 'TCP', port: 80 }], ...spec } };
}
const web = svc('web', { clusterIP: '10.96.0.2', clusterIPs: ['10.96.0.2', 'fd00:96::2'] });
const webSlice: V1EndpointSlice = {
  addressType: 'IPv4',
  metadata: { namespace: 'ns', name: 'web-1', labels: { 'kubernetes.io/service-name': 'web' } },
  ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
  endpoints: [{ addresses: ['10.244.0.2'], conditions: { ready: true }, nodeName: 'n1' }],
};
/** One bad Service of each kind the fuzzing found; each once stopped the ipset refresh of its whole family. */
const bad = [
  svc('port-70000', { clusterIP: '10.96.0.3', ports: [{ name: 'http', protocol: 'TCP', port: 70_000 }] }),
  svc('zoned', { clusterIP: '10.96.0.4', clusterIPs: ['10.96.0.4', 'fe80::1%eth0'] }),
  svc('to-string', { clusterIP: '10.96.0.5', ports: [{ name: 'http', protocol: 'toString', port: 80 }] }),
];

/**
 * ipset restore as the real one behaves (ipsets.real.test.ts shows it): one element it cannot read fails the whole
 * batch, so no set of the script is replaced.
 */
function ipsetRestore(spec: CommandSpec): ScriptedResult {
  const lines = (spec.input ?? '').split('\n');
  for (const [index, line] of lines.entries()) {
    const [verb, set = '', element = ''] = line.split(' ');
    if (verb !== 'add') continue;
    // Every set but the local and service IPs holds `ip,proto:port` (the LoadBalancer source ranges a network after it).
    const match = /local-ips|svip(-t)?$/.test(set) ? [element, element] : /^([^,]+),(tcp|udp|sctp):(\d+)(,[^,]+)?$/.exec(element);
    const readable = match !== null && parseIp(match[1] as string) !== undefined && Number(match[3] ?? 0) <= 65_535;
    if (!readable) return { exitCode: 1, stderr: `ipset v7.17: Error in line ${index + 1}: Syntax error: cannot parse ${element}` };
  }
  return {};
}

function fakeNode(): RecordingRunner {
  return new RecordingRunner()
    .on((spec) => spec.command === 'ip' && (spec.args ?? []).includes('-j'), { stdout: '[]' })
    .on((spec) => spec.command === 'ipset' && spec.args?.[0] === 'restore', ipsetRestore);
}
const ipsetInput = (runner: RecordingRunner) =>
  runner.invocations.filter((invocation) => invocation.command === 'ipset' && invocation.args[0] === 'restore').map((invocation) => invocation.input ?? '').join('');
const ipvsInput = (runner: RecordingRunner) =>
  runner.invocations.filter((invocation) => invocation.command === 'ipvsadm' && invocation.args.includes('-R')).map((invocation) => invocation.input ?? '').join('');

describe('proxy controller with bad Services beside good ones', () => {
  it('programs the good Services’ ipset entries and IPVS services in the same sync; each bad one fails alone with a Warning', async () => {
    const runner = fakeNode();
    const proxy = controllerHarness(runner, { services: [web, ...bad], slices: [webSlice], node });
    const failed = await proxy.sync();

    expect(failed.sort()).toEqual(['service/ns/port-70000', 'service/ns/to-string', 'service/ns/zoned']);
    const sets = ipsetInput(runner);
    expect(sets).toContain('add kube-router-svip-prt-t 10.96.0.2,tcp:80\n');
    expect(sets).toContain('add inet6:kube-router-svip-prt-t fd00:96::2,tcp:80\n');
    // The zoned Service's IPv4 cluster IP is still its own and is programmed; its zoned address is not.
    expect(sets).toContain('add kube-router-svip-prt-t 10.96.0.4,tcp:80\n');
    expect(sets).not.toMatch(/70000|fe80|toString|function/);
    const ipvs = ipvsInput(runner);
    expect(ipvs).toContain('-A -t 10.96.0.2:80 -s rr\n-a -t 10.96.0.2:80 -r 10.244.0.2:8080 -m -w 1');
    expect(ipvs).toContain('-A -t [fd00:96::2]:80 -s rr');
    expect(ipvs).not.toMatch(/70000|fe80|undefined|10\.96\.0\.5/);
    expect(proxy.warnings.map((warning) => [warning.owner, warning.reason])).toEqual([
      ['ns/port-70000', 'InvalidServicePort'],
      ['ns/zoned', 'InvalidServiceAddress'],
      ['ns/to-string', 'UnsupportedProtocol'],
    ]);
  });

  it('reads an address of a Service or an endpoint as the kernel does: 010.0.0.1 and ::1.2.3.4 are not IPv4 8.0.0.1 and 1.2.3.4', async () => {
    const runner = fakeNode();
    const octal = svc('octal', { clusterIP: '10.96.0.6', externalIPs: ['010.0.0.1', '::1.2.3.4'] });
    const octalSlice: V1EndpointSlice = { ...webSlice, metadata: { ...webSlice.metadata, name: 'octal-1', labels: { 'kubernetes.io/service-name': 'octal' } }, endpoints: [{ addresses: ['010.244.0.3'] }, { addresses: ['10.244.0.4'] }] };
    const proxy = controllerHarness(runner, { services: [web, octal], slices: [webSlice, octalSlice], node });

    expect(await proxy.sync()).toEqual(['service/ns/octal', 'service/ns/octal']);
    const sets = ipsetInput(runner);
    expect(sets).not.toMatch(/\b8\.0\.0\.1\b|\b1\.2\.3\.4\b/);
    expect(sets).toContain('add inet6:kube-router-svip-prt-t ::102:304,tcp:80\n');
    const ipvs = ipvsInput(runner);
    expect(ipvs).toContain('-a -t 10.96.0.6:80 -r 10.244.0.4:8080 -m -w 1');
    expect(ipvs).not.toMatch(/8\.244\.0\.3|8\.0\.0\.1/);
    expect(proxy.warnings.map((warning) => warning.message)).toEqual([
      'externalip "010.0.0.1" is not an IP address',
      'EndpointSlice octal-1: endpoint address "010.244.0.3" is not an IP address; it is not used',
    ]);
  });

  it("masquerades as kube-router: not from and not to this node's pod CIDR, with --random-fully where iptables has it", async () => {
    const runner = fakeNode().on('iptables -V', { stdout: 'iptables v1.8.9 (nf_tables)' });
    const proxy = controllerHarness(runner, { services: [web], slices: [webSlice], node: { ...node, spec: { podCIDRs: ['10.244.0.0/24'] } } });
    expect(await proxy.sync()).toEqual([]);
    const rules = runner.invocations.filter((invocation) => invocation.command === 'iptables-restore').map((invocation) => invocation.input ?? '').join('');
    const masq = rules.split('\n').filter((line) => line.startsWith('-A KUBE-ROUTER-SVC-MASQ'));
    expect(masq).toEqual([
      '-A KUBE-ROUTER-SVC-MASQ -s 10.244.0.0/24 -m ipvs --ipvs --vdir ORIGINAL --vmethod MASQ -j RETURN',
      '-A KUBE-ROUTER-SVC-MASQ -d 10.244.0.0/24 -m ipvs --ipvs --vdir ORIGINAL --vmethod MASQ -j RETURN',
      '-A KUBE-ROUTER-SVC-MASQ -m ipvs --ipvs --vdir ORIGINAL --vmethod MASQ -j MASQUERADE --random-fully',
    ]);
  });

  it('fails the sync for a Node pod CIDR that is not one and keeps it out of the masquerade rules of every Service', async () => {
    const runner = fakeNode();
    const oddNode: V1Node = { ...node, spec: { podCIDRs: ['10.244.0.0/24', 'not-a-cidr'] } };
    const proxy = controllerHarness(runner, { services: [web], slices: [webSlice], node: oddNode });

    expect(await proxy.sync()).toEqual(['node/n1']);
    const rules = runner.invocations.filter((invocation) => invocation.command === 'iptables-restore').map((invocation) => invocation.input ?? '').join('');
    expect(rules).toContain('-A KUBE-ROUTER-SVC-MASQ -m ipvs --ipvs --vdir ORIGINAL --vmethod MASQ -j MASQUERADE');
    expect(rules).not.toContain('not-a-cidr');
    expect(ipsetInput(runner)).toContain('add kube-router-svip-prt-t 10.96.0.2,tcp:80\n');
  });

  it("looks for a hairpin Service's local endpoint on kube-bridge, and a port not found fails only that endpoint", async () => {
    const hairpin: V1Service = { ...web, metadata: { namespace: 'ns', name: 'web', annotations: { 'kube-router.io/service.hairpin': '' } } };
    const bridgeAddress = JSON.stringify([{ ifname: 'kube-bridge', addr_info: [{ family: 'inet', local: '10.244.0.1', prefixlen: 24, scope: 'global' }] }]);
    const runner = fakeNode().on('ip -j address show dev kube-bridge', { stdout: bridgeAddress });
    const proxy = controllerHarness(runner, { services: [hairpin], slices: [webSlice], node });

    expect(await proxy.sync()).toEqual(['bridge-hairpin/10.244.0.2']);
    expect(ipsetInput(runner)).toContain('add kube-router-svip-prt-t 10.96.0.2,tcp:80\n');
    expect(runner.lines()).toContain('ip -force -batch -');

    const plain = fakeNode();
    expect(await controllerHarness(plain, { services: [web], slices: [webSlice], node }).sync()).toEqual([]);
    expect(plain.lines().filter((line) => line.includes('kube-bridge') || line.startsWith('bridge'))).toEqual([]);
  });
  it('deletes the UDP conntrack entries of a real server that goes, and tries a failed deletion again at the next sync', async () => {
    const dns: V1Service = svc('dns', { clusterIP: '10.96.0.10', ports: [{ name: 'dns', protocol: 'UDP', port: 53 }] });
    const dnsSlice: V1EndpointSlice = {
      addressType: 'IPv4',
      metadata: { namespace: 'ns', name: 'dns-1', labels: { 'kubernetes.io/service-name': 'dns' } },
      ports: [{ name: 'dns', protocol: 'UDP', port: 5353 }],
      endpoints: [{ addresses: ['10.244.0.2'], conditions: { ready: true } }],
    };
    const twoServers = '-A -u 10.96.0.10:53 -s rr\n-a -u 10.96.0.10:53 -r 10.244.0.2:5353 -m -w 1\n-a -u 10.96.0.10:53 -r 10.244.0.3:5353 -m -w 1\n';
    const runner = fakeNode()
      .on('ipvsadm -S -n', { stdout: twoServers })
      .once('conntrack', { exitCode: 1, stderr: 'conntrack v1.4.7 (conntrack-tools): Operation failed: such conntrack doesn\'t exist' });
    const proxy = controllerHarness(runner, { services: [dns], slices: [dnsSlice], node }, { enableIpv6: false });

    expect(await proxy.sync()).toEqual(['conntrack/udp/10.96.0.10/53>10.244.0.3:5353']);
    expect(ipvsInput(runner)).toContain('-d -u 10.96.0.10:53 -r 10.244.0.3:5353');
    const deletion = 'conntrack -D -p udp -f ipv4 --orig-dst 10.96.0.10 --orig-port-dst 53 --reply-src 10.244.0.3 --reply-port-src 5353';
    expect(runner.lines().filter((line) => line.startsWith('conntrack'))).toEqual([deletion]);

    runner.invocations.length = 0;
    runner.on('ipvsadm -S -n', { stdout: '-A -u 10.96.0.10:53 -s rr\n-a -u 10.96.0.10:53 -r 10.244.0.2:5353 -m -w 1\n' });
    runner.on('conntrack', { exitCode: 0, stderr: 'conntrack v1.4.7 (conntrack-tools): 1 flow entries have been deleted.' });
    expect(await proxy.sync('cluster changed')).toEqual([]);
    expect(runner.lines().filter((line) => line.startsWith('conntrack'))).toEqual([deletion]);
    expect(proxy.controller.lastSync()?.conntrackDeleted).toBe(1);

    runner.invocations.length = 0;
    expect(await proxy.sync('cluster changed')).toEqual([]);
    expect(runner.lines().filter((line) => line.startsWith('conntrack'))).toEqual([]);
  });

  it('rejects new connections to a port without endpoints and keeps LoadBalancer IPs to their source ranges, whatever --ipvs-permit-all says', async () => {
    const empty = svc('empty', { clusterIP: '10.96.0.7', ports: [{ name: 'http', protocol: 'UDP', port: 80 }] });
    const lb: V1Service = {
      ...svc('lb', { clusterIP: '10.96.0.8', type: 'LoadBalancer', loadBalancerSourceRanges: ['192.0.2.0/24', '203.0.113.9/32'], ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }] }),
      status: { loadBalancer: { ingress: [{ ip: '198.51.100.1' }] } },
    };
    const lbSlice: V1EndpointSlice = { ...webSlice, metadata: { ...webSlice.metadata, name: 'lb-1', labels: { 'kubernetes.io/service-name': 'lb' } } };
    const runner = fakeNode();
    const proxy = controllerHarness(runner, { services: [empty, lb], slices: [lbSlice], node }, { enableIpv6: false, ipvsPermitAll: false });
    expect(await proxy.sync()).toEqual([]);
    const sets = ipsetInput(runner);
    expect(sets).toContain('add kube-router-svip-noep-t 10.96.0.7,udp:80\n');
    expect(sets).not.toMatch(/noep-t 10\.96\.0\.8|noloc-t \d/);
    expect(sets).toContain('add kube-router-lb-fw-t 198.51.100.1,tcp:80\n');
    expect(sets).toContain('add kube-router-lb-src-t 198.51.100.1,tcp:80,192.0.2.0/24\nadd kube-router-lb-src-t 198.51.100.1,tcp:80,203.0.113.9\n');
    const rules = runner.invocations.filter((invocation) => invocation.command === 'iptables-restore').map((invocation) => invocation.input ?? '').join('');
    expect(rules.split('\n').filter((line) => line.startsWith('-A KUBE-ROUTER-SERVICES'))).toEqual([
      '-A KUBE-ROUTER-SERVICES -m comment --comment "drop LoadBalancer traffic from outside loadBalancerSourceRanges" -m set --match-set kube-router-lb-fw dst,dst -m set ! --match-set kube-router-lb-src dst,dst,src -j DROP',
      '-A KUBE-ROUTER-SERVICES -m comment --comment "reject new connections to services without endpoints" -p tcp -m set --match-set kube-router-svip-noep dst,dst -m conntrack --ctstate NEW -j REJECT --reject-with tcp-reset',
      '-A KUBE-ROUTER-SERVICES -m comment --comment "reject new connections to services without endpoints" -m set --match-set kube-router-svip-noep dst,dst -m conntrack --ctstate NEW -j REJECT --reject-with icmp-port-unreachable',
      '-A KUBE-ROUTER-SERVICES -m comment --comment "drop new connections to services without local endpoints" -m set --match-set kube-router-svip-noloc dst,dst -m conntrack --ctstate NEW -j DROP',
    ]);
    expect(rules).toContain('-I INPUT 1 -m comment --comment "handle traffic to IPVS service IPs in custom chain" -m set --match-set kube-router-svip dst -j KUBE-ROUTER-SERVICES');
  });
});

describe('proxy controller with --ipvs-permit-all (the default)', () => {
  it('accepts replies to the node\'s own connections from a service IP before it rejects other traffic to service IPs', async () => {
    const runner = fakeNode();
    const proxy = controllerHarness(runner, { services: [web], slices: [webSlice], node }, { enableIpv6: false });
    expect(await proxy.sync()).toEqual([]);
    const rules = runner.invocations.filter((invocation) => invocation.command === 'iptables-restore').map((invocation) => invocation.input ?? '').join('');
    const chain = rules.split('\n').filter((line) => line.startsWith('-A KUBE-ROUTER-SERVICES'));
    const replies = chain.findIndex((line) => line.includes('-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT'));
    const reject = chain.findIndex((line) => line.includes('reject all unexpected traffic to service IPs'));
    expect(replies, chain.join('\n')).toBeGreaterThanOrEqual(0);
    expect(reject).toBeGreaterThan(replies);
    // New connections to a port no Service has still reach the reject: the accept is for tracked flows only.
    expect(chain[reject]).toContain('-j REJECT');
  });
});

describe('proxy controller: where a sync takes the IPVS state from', () => {
  const ipvsSaves = (runner: RecordingRunner) => runner.invocations.filter((invocation) => invocation.command === 'ipvsadm' && invocation.args.includes('-S')).length;
  /** ipvsadm -Sn answers what the restores so far added (services and real servers), as the kernel would. */
  function ipvsKernel(refuse?: (line: string) => boolean): RecordingRunner {
    const lines: string[] = [];
    return fakeNode()
      .on((spec) => spec.command === 'ipvsadm' && (spec.args ?? []).includes('-S'), () => ({ stdout: lines.join('\n') + (lines.length ? '\n' : '') }))
      .on((spec) => spec.command === 'ipvsadm' && (spec.args ?? []).includes('-R'), (spec) => {
        const input = (spec.input ?? '').split('\n').filter((line) => line !== '');
        const refused = input.filter((line) => refuse?.(line));
        for (const line of input) {
          if (refused.includes(line)) continue;
          // What exists already is refused, as the kernel does (File exists).
          const object = line.split(' -s ')[0]!.split(' -m ')[0]!;
          if ((line.startsWith('-A ') || line.startsWith('-a ')) && lines.some((kept) => kept.startsWith(object))) {
            refused.push(line);
            continue;
          }
          if (line.startsWith('-A ') || line.startsWith('-a ')) lines.push(line);
          if (line.startsWith('-d ')) {
            const [, , service, , destination] = line.split(' ');
            const index = lines.findIndex((kept) => kept.startsWith(`-a -t ${service} -r ${destination} `));
            if (index >= 0) lines.splice(index, 1);
          }
        }
        return refused.length ? { stderr: 'Memory allocation problem' } : {};
      });
  }
  const slice = (addresses: string[]): V1EndpointSlice => ({
    ...webSlice,
    endpoints: addresses.map((address) => ({ addresses: [address], conditions: { ready: true }, nodeName: 'n1' })),
  });

  it('reads IPVS in a full sync, plans an event sync from what the last clean apply left, and reads again after a refusal', async () => {
    let refuseNext = false;
    const runner = ipvsKernel((line) => refuseNext && line.includes('10.244.0.9'));
    const objects = { services: [svc('web', { clusterIP: '10.96.0.2' })], slices: [slice(['10.244.0.2'])], node };
    const proxy = controllerHarness(runner, objects, { enableIpv6: false });

    expect(await proxy.sync('initial')).toEqual([]);
    expect(ipvsSaves(runner)).toBe(1);
    expect(proxy.controller.lastSync()).toMatchObject({ ipvsStateFrom: 'kernel' });

    // An endpoint change: planned from the record, one add and one delete, no listing of IPVS.
    objects.slices = [slice(['10.244.0.3'])];
    expect(await proxy.sync('endpointslice changed')).toEqual([]);
    expect(ipvsSaves(runner)).toBe(1);
    expect(proxy.controller.lastSync()).toMatchObject({ ipvsStateFrom: 'model', ipvsOperations: 2 });
    expect(ipvsInput(runner)).toContain('-a -t 10.96.0.2:80 -r 10.244.0.3:8080 -m -w 1\n-d -t 10.96.0.2:80 -r 10.244.0.2:8080');

    // Refused lines: the sync reads the kernel to learn what applied; the refused Service leaves the record.
    refuseNext = true;
    objects.slices = [slice(['10.244.0.3', '10.244.0.9'])];
    expect(await proxy.sync('endpointslice changed')).toEqual(['service/ns/web']);
    const afterRefusal = ipvsSaves(runner);
    expect(afterRefusal).toBe(2);
    // The next event sync plans it from scratch: the kernel refuses what exists, the retry reads the kernel, and the
    // missing real server is added.
    refuseNext = false;
    expect(await proxy.sync('endpointslice changed')).toEqual([]);
    expect(ipvsSaves(runner)).toBe(afterRefusal + 1);
    expect(ipvsInput(runner).split('\n').filter((line) => line === '-a -t 10.96.0.2:80 -r 10.244.0.9:8080 -m -w 1').length).toBeGreaterThanOrEqual(2);
    // Once applied, it is in the record again: no read.
    objects.slices = [slice(['10.244.0.9'])];
    expect(await proxy.sync('endpointslice changed')).toEqual([]);
    expect(ipvsSaves(runner)).toBe(afterRefusal + 1);
    expect(proxy.controller.lastSync()).toMatchObject({ ipvsStateFrom: 'model', ipvsOperations: 1 });

    // The periodic sync always reads, whatever the record says.
    expect(await proxy.sync('periodic')).toEqual([]);
    expect(ipvsSaves(runner)).toBe(afterRefusal + 2);
    expect(proxy.controller.lastSync()).toMatchObject({ ipvsStateFrom: 'kernel', ipvsOperations: 0 });
  });
  it('trusts no record after an apply that threw halfway (ipvsadm killed after the kernel took some lines): the next event sync reads IPVS', async () => {
    let throwOnce = false;
    const runner = ipvsKernel();
    const base = runner;
    const objects = { services: [svc('web', { clusterIP: '10.96.0.2' })], slices: [slice(['10.244.0.2'])], node };
    const proxy = controllerHarness(
      {
        run: async (spec) => {
          const result = await base.run(spec);
          if (throwOnce && spec.command === 'ipvsadm' && spec.args?.includes('-R')) {
            throwOnce = false;
            throw new Error('ipvsadm -R: timed out after 60000 ms');
          }
          return result;
        },
      },
      objects,
      { enableIpv6: false },
    );
    expect(await proxy.sync('initial')).toEqual([]);
    throwOnce = true;
    objects.slices = [slice(['10.244.0.2', '10.244.0.5'])];
    expect(await proxy.sync('endpointslice changed')).toEqual(['ipvs']);
    // Back to the first state: the kernel took 10.244.0.5 before ipvsadm died, so it must be deleted.
    objects.slices = [slice(['10.244.0.2'])];
    expect(await proxy.sync('endpointslice changed')).toEqual([]);
    expect(proxy.controller.lastSync()).toMatchObject({ ipvsStateFrom: 'kernel', ipvsOperations: 1 });
    expect(ipvsInput(runner)).toContain('-d -t 10.96.0.2:80 -r 10.244.0.5:8080');
  });
  it('writes no ipset on a triggered sync that changes only endpoints, and writes them when a Service comes', async () => {
    const runner = ipvsKernel();
    const objects = { services: [svc('web', { clusterIP: '10.96.0.2' })], slices: [slice(['10.244.0.2'])], node };
    const proxy = controllerHarness(runner, objects, { enableIpv6: false });
    const ipsetRestores = () => runner.invocations.filter((invocation) => invocation.command === 'ipset' && invocation.args[0] === 'restore').length;
    expect(await proxy.sync('initial')).toEqual([]);
    const afterInitial = ipsetRestores();
    objects.slices = [slice(['10.244.0.3'])];
    expect(await proxy.sync('endpointslice changed')).toEqual([]);
    expect(ipsetRestores()).toBe(afterInitial);
    objects.services = [...objects.services, svc('api', { clusterIP: '10.96.0.9' })];
    expect(await proxy.sync('service changed')).toEqual([]);
    expect(ipsetRestores()).toBe(afterInitial + 1);
    expect(ipsetInput(runner)).toContain('add kube-router-svip-prt-t 10.96.0.9,tcp:80');
  });
});
