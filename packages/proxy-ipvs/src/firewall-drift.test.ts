import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { RecordingRunner } from '@kube-router/netfilter';
import type { CommandSpec, ScriptedResult } from '@kube-router/netfilter';
import { describe, expect, it } from 'vitest';
import { PROXY_SET_BASES } from './dataplane.js';
import { FIREWALL_CHAIN, MASQUERADE_CHAIN, SERVICE_IPS_SET, SERVICE_IP_PORTS_SET } from './names.js';
import { controllerHarness } from './testing/controller-harness.js';
import type { ControllerHarness } from './testing/controller-harness.js';
import { driftLines } from './testing/drift.js';

// The comparison on a fake kernel; proxy.real.test.ts (QEMU guest) and ipsets.real.test.ts (host) show it on real ones.

const node: V1Node = { metadata: { name: 'n1' }, spec: { podCIDRs: ['10.244.0.0/24'] }, status: { addresses: [{ type: 'InternalIP', address: '192.168.1.10' }] } };
const web: V1Service = {
  metadata: { namespace: 'ns', name: 'web' },
  spec: { clusterIP: '10.96.0.2', clusterIPs: ['10.96.0.2'], ports: [{ name: 'http', protocol: 'TCP', port: 80 }] },
};
const webSlice: V1EndpointSlice = {
  addressType: 'IPv4',
  metadata: { namespace: 'ns', name: 'web-1', labels: { 'kubernetes.io/service-name': 'web' } },
  ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
  endpoints: [{ addresses: ['10.244.0.2'], conditions: { ready: true }, nodeName: 'n1' }],
};
// 169.254.1.1 on every pod's veth, as routed pod networks have it: the set holds it once.
const nodeAddresses = JSON.stringify([
  { ifname: 'eth0', addr_info: [{ family: 'inet', local: '192.168.1.10', prefixlen: 24, scope: 'global' }] },
  { ifname: 'veth1', addr_info: [{ family: 'inet', local: '169.254.1.1', prefixlen: 32, scope: 'global' }] },
  { ifname: 'veth2', addr_info: [{ family: 'inet', local: '169.254.1.1', prefixlen: 32, scope: 'global' }] },
]);

/**
 * iptables (filter and nat), ipset and the node's addresses for a RecordingRunner: what the restores write is what the
 * saves print, as the kernel would, so that read-backs see the writes. iptables-save spells a few things its own way
 * (`--icmp-type 8`, comments unquoted when they can be), as the real one does: the proxy must not take that for drift.
 */
class FakeKernel {
  readonly runner = new RecordingRunner();
  readonly tables = new Map<string, Map<string, string[]>>([
    ['filter', new Map([['INPUT', []], ['FORWARD', []], ['OUTPUT', []]])],
    ['nat', new Map([['PREROUTING', []], ['INPUT', []], ['OUTPUT', []], ['POSTROUTING', []]])],
  ]);
  readonly sets = new Map<string, { header: string; members: string[] }>();
  #builtins = new Set(['INPUT', 'FORWARD', 'OUTPUT', 'PREROUTING', 'POSTROUTING']);

  constructor() {
    this.runner
      .on((spec) => spec.command === 'ip' && (spec.args ?? []).includes('-j'), (spec) => ({ stdout: (spec.args ?? []).includes('dev') ? '[]' : nodeAddresses }))
      .on('iptables -V', { stdout: 'iptables v1.8.9 (nf_tables)' })
      .on('iptables-restore', (spec) => this.#restore(spec.input ?? ''))
      .on('iptables-save', (spec) => ({ stdout: this.#save(spec.args?.[1] ?? 'filter') }))
      .on((spec) => spec.command === 'iptables' && (spec.args ?? []).includes('-C'), (spec) => this.#check(spec))
      .on('ipset restore', (spec) => this.#ipsetRestore(spec.input ?? ''))
      .on('ipset save', () => ({ stdout: this.#ipsetSave() }))
      .on('ipset list -n', () => ({ stdout: [...this.sets.keys()].join('\n') }));
  }

  chain(table: string, name: string): string[] | undefined {
    return this.tables.get(table)?.get(name);
  }

  /**
   * Commands a sync ran that read the kernel back: `iptables-save -t filter`, `ipset list -n`, and a restore of nothing
   * but `save <set>` lines shown as `ipset save <set> ...`.
   */
  readBacks(): string[] {
    return this.runner.invocations.flatMap((spec) => {
      const line = [spec.command, ...(spec.args ?? [])].join(' ');
      const saves = (spec.input ?? '').split('\n').filter(Boolean);
      if (line === 'ipset restore' && saves.length > 0 && saves.every((input) => input.startsWith('save '))) return [`ipset save ${saves.map((input) => input.slice(5)).join(' ')}`];
      return line.startsWith('iptables-save') || line.startsWith('ipset save') || line.startsWith('ipset list') ? [line] : [];
    });
  }

  #restore(input: string): ScriptedResult {
    let table: Map<string, string[]> | undefined;
    for (const line of input.split('\n')) {
      if (line.startsWith('*')) table = this.tables.get(line.slice(1));
      if (!table) continue;
      const [op = '', name = '', ...rest] = line.split(' ');
      if (op.startsWith(':')) table.set(op.slice(1), []);
      else if (op === '-A') table.get(name)?.push(rest.join(' '));
      else if (op === '-I') table.get(name)?.splice(Number(rest[0]) - 1, 0, rest.slice(1).join(' '));
      else if (op === '-X') table.delete(name);
    }
    return {};
  }

  #save(table: string): string {
    const chains = this.tables.get(table) ?? new Map<string, string[]>();
    const spelled = (rule: string) => rule.replace('--icmp-type echo-request', '--icmp-type 8').replace(/--comment "([^" ]+)"/, '--comment $1');
    return [
      `*${table}`,
      ...[...chains.keys()].map((name) => `:${name} ${this.#builtins.has(name) ? 'ACCEPT' : '-'} [0:0]`),
      ...[...chains].flatMap(([name, rules]) => rules.map((rule) => `-A ${name} ${spelled(rule)}`)),
      'COMMIT',
      '',
    ].join('\n');
  }

  #check(spec: CommandSpec): ScriptedResult {
    const args = spec.args ?? [];
    const table = args[args.indexOf('-t') + 1] ?? 'filter';
    const chain = args[args.indexOf('-C') + 1] ?? '';
    const target = args[args.indexOf('-j') + 1] ?? '';
    return this.chain(table, chain)?.some((rule) => rule.endsWith(`-j ${target}`)) ? {} : { exitCode: 1 };
  }

  #ipsetRestore(input: string): ScriptedResult {
    const saved: string[] = [];
    for (const line of input.split('\n')) {
      const [verb = '', name = '', ...rest] = line.split(' ');
      if (verb === 'save') saved.push(this.#ipsetSave(name));
      else if (verb === 'create' && !this.sets.has(name)) this.sets.set(name, { header: rest.join(' '), members: [] });
      else if (verb === 'flush') this.sets.get(name)?.members.splice(0);
      else if (verb === 'add') {
        const members = this.sets.get(name)?.members;
        if (members && !members.includes(rest.join(' '))) members.push(rest.join(' '));
      }
      else if (verb === 'destroy') this.sets.delete(name);
      else if (verb === 'swap') {
        const [first, second] = [this.sets.get(name), this.sets.get(rest[0] ?? '')];
        if (!first || !second) return { exitCode: 1, stderr: `ipset v7.17: The set with the given name does not exist` };
        [first.members, second.members] = [second.members, first.members];
      }
    }
    return { stdout: saved.join('\n') };
  }

  #ipsetSave(only?: string): string {
    return [...this.sets]
      .filter(([name]) => only === undefined || name === only)
      .flatMap(([name, set]) => [`create ${name} ${set.header}`, ...set.members.map((member) => `add ${name} ${member}`)])
      .join('\n');
  }
}

/** The fake kernel has no IPVS: its services count as drift at every full sync, and are not the subject here. */
const FIREWALL_OBJECTS = ['chain', 'ipset'];

function proxyOn(kernel: FakeKernel): ControllerHarness {
  return controllerHarness(kernel.runner, { services: [web], slices: [webSlice], node }, { enableIpv6: false });
}

describe('drift of the proxy’s own chains and ipsets', () => {
  it('counts nothing while the kernel is as the proxy left it, iptables-save’s spelling and a set’s single members included, nor after a restart', async () => {
    const kernel = new FakeKernel();
    const proxy = proxyOn(kernel);
    expect(await proxy.sync('initial')).toEqual([]);
    expect(await proxy.sync('periodic')).toEqual([]);
    expect(await proxy.sync('periodic')).toEqual([]);
    expect(await proxy.drift('chain')).toBe(0);
    expect(await proxy.drift('ipset')).toBe(0);

    // Another process finds the objects of the one before it: adopted, not drift.
    const restarted = proxyOn(kernel);
    expect(await restarted.sync('initial')).toEqual([]);
    expect(await restarted.sync('periodic')).toEqual([]);
    expect(await restarted.drift('chain')).toBe(0);
    expect(await restarted.drift('ipset')).toBe(0);
    expect(driftLines(restarted.logs, FIREWALL_OBJECTS)).toEqual([]);
  });

  it('counts a flushed chain, a deleted jump and an emptied ipset once each, names them, and puts them back', async () => {
    const kernel = new FakeKernel();
    const proxy = proxyOn(kernel);
    await proxy.sync('initial');
    const masquerade = [...(kernel.chain('nat', MASQUERADE_CHAIN) ?? [])];
    const members = [...(kernel.sets.get(SERVICE_IP_PORTS_SET)?.members ?? [])];
    expect(masquerade.length).toBeGreaterThan(0);
    expect(members).toEqual(['10.96.0.2,tcp:80']);

    kernel.chain('nat', MASQUERADE_CHAIN)?.splice(0);
    kernel.chain('filter', 'INPUT')?.splice(0);
    kernel.sets.get(SERVICE_IP_PORTS_SET)?.members.splice(0);
    kernel.sets.delete(SERVICE_IPS_SET);
    expect(await proxy.sync('periodic')).toEqual([]);

    expect(kernel.chain('nat', MASQUERADE_CHAIN)).toEqual(masquerade);
    expect(kernel.chain('filter', 'INPUT')?.filter((rule) => rule.endsWith(`-j ${FIREWALL_CHAIN}`))).toHaveLength(1);
    expect(kernel.sets.get(SERVICE_IP_PORTS_SET)?.members).toEqual(members);
    expect(kernel.sets.get(SERVICE_IPS_SET)?.members).toEqual(['10.96.0.2']);
    expect(await proxy.drift('chain')).toBe(2);
    expect(await proxy.drift('ipset')).toBe(2);
    expect(driftLines(proxy.logs, FIREWALL_OBJECTS)).toEqual([
      { object: 'chain', count: 2, names: [`ipv4/${MASQUERADE_CHAIN}`, `ipv4/INPUT -j ${FIREWALL_CHAIN}`] },
      { object: 'ipset', count: 2, names: [SERVICE_IPS_SET, SERVICE_IP_PORTS_SET] },
    ]);

    expect(await proxy.sync('periodic')).toEqual([]);
    expect(await proxy.drift('chain')).toBe(2);
    expect(await proxy.drift('ipset')).toBe(2);
  });

  it('counts a rule replaced in place (same count) each time it is made again, once the spelling of its rules is known', async () => {
    const kernel = new FakeKernel();
    const proxy = proxyOn(kernel);
    await proxy.sync('initial');
    // The first read-back after a write learns how iptables-save spells the rules written.
    await proxy.sync('periodic');
    const replaceFirstRule = () => {
      const rules = kernel.chain('filter', FIREWALL_CHAIN) ?? [];
      rules[0] = '-j ACCEPT';
    };
    replaceFirstRule();
    await proxy.sync('periodic');
    expect(await proxy.drift('chain')).toBe(1);
    expect(kernel.chain('filter', FIREWALL_CHAIN)?.[0]).not.toBe('-j ACCEPT');
    replaceFirstRule();
    await proxy.sync('periodic');
    expect(await proxy.drift('chain')).toBe(2);
    await proxy.sync('periodic');
    expect(await proxy.drift('chain')).toBe(2);
  });

  it('counts an edit made before the spelling was learnt once, when the rules written again no longer match it, and not after', async () => {
    const kernel = new FakeKernel();
    const proxy = proxyOn(kernel);
    await proxy.sync('initial');
    const rules = kernel.chain('filter', FIREWALL_CHAIN) ?? [];
    rules[0] = '-j ACCEPT';
    // This read-back takes the edited rules for the spelling of ours (the count is the one written), then writes ours.
    await proxy.sync('periodic');
    expect(await proxy.drift('chain')).toBe(0);
    await proxy.sync('periodic');
    expect(await proxy.drift('chain')).toBe(1);
    await proxy.sync('periodic');
    await proxy.sync('periodic');
    expect(await proxy.drift('chain')).toBe(1);
  });

  it('reads back on full syncs only: its own sets saved by name and one iptables-save per table, whatever the number of objects', async () => {
    const kernel = new FakeKernel();
    const proxy = proxyOn(kernel);
    await proxy.sync('initial');
    kernel.runner.invocations.length = 0;
    await proxy.sync('periodic');
    // Never a save of every set: it would hold another tool's sets busy while they are dumped (kube-router #1918).
    expect(kernel.readBacks()).toEqual([
      'ipset list -n',
      `ipset save ${PROXY_SET_BASES.join(' ')}`,
      'iptables-save -t filter',
      'iptables-save -t nat',
    ]);
    // The jumps were read with the tables: no `iptables -C` on a full sync.
    expect(kernel.runner.lines().filter((line) => line.includes(' -C '))).toEqual([]);

    // A triggered sync trusts its last write: an emptied set stays unseen until the next full sync, which counts it.
    kernel.sets.get(SERVICE_IP_PORTS_SET)?.members.splice(0);
    kernel.runner.invocations.length = 0;
    await proxy.sync('services changed');
    expect(kernel.readBacks()).toEqual([]);
    expect(await proxy.drift('ipset')).toBe(0);
    await proxy.sync('periodic');
    expect(await proxy.drift('ipset')).toBe(1);
  });

  it('counts nothing for objects whose write failed, then or later', async () => {
    const kernel = new FakeKernel();
    const proxy = proxyOn(kernel);
    await proxy.sync('initial');
    kernel.sets.get(SERVICE_IP_PORTS_SET)?.members.splice(0);
    // The write's restore (`-exist`), not the read-back's.
    kernel.runner.once((spec) => spec.command === 'ipset' && (spec.args ?? []).join(' ') === 'restore -exist', {
      exitCode: 1,
      stderr: 'ipset v7.17: Kernel error received: Resource busy',
    });
    expect(await proxy.sync('periodic')).toEqual(['ipsets/ipv4']);
    expect(await proxy.drift('ipset')).toBe(0);
    expect(await proxy.sync('periodic')).toEqual([]);
    expect(kernel.sets.get(SERVICE_IP_PORTS_SET)?.members).toEqual(['10.96.0.2,tcp:80']);
    expect(await proxy.drift('ipset')).toBe(0);
  });
});
