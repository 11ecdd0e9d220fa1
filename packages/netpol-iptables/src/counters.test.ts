import { ServiceRegistry, type PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import { RecordingRunner, parseIptablesSave } from '@kube-router/netfilter';
import type { CommandSpec } from '@kube-router/netfilter';
import { createNetpolController } from '@kube-router/netpol';
import type { ChainVerdictCounter, NetpolSources } from '@kube-router/netpol';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { verdictCountersOfSave } from './counters.js';
import { createIptablesDataplane } from './dataplane.js';
import { netpolIptablesOptions } from './options.js';

describe('verdictCountersOfSave', () => {
  it('reads the marking rules of policy chains as allows, and the REJECTs of pod and tail chains, summed per chain', async () => {
    const text = [
      '*filter',
      ':KUBE-NWPLCY-0123456789ABCDEF - [0:0]',
      ':KUBE-POD-FW-0123456789ABCDEF - [0:0]',
      ':KUBE-NWPLCY-TAIL - [0:0]',
      ':KUBE-NWPLCY-COMMON - [0:0]',
      '[3:180] -A KUBE-NWPLCY-0123456789ABCDEF -m comment --comment "rule to -j ACCEPT" -m set --match-set KUBE-SRC-X src -j MARK --set-xmark 0x10000/0x10000',
      '[3:180] -A KUBE-NWPLCY-0123456789ABCDEF -m set --match-set KUBE-SRC-X src -m mark --mark 0x10000/0x10000 -j RETURN',
      '[1:60] -A KUBE-NWPLCY-0123456789ABCDEF -j KUBE-NWPLCY-DEFAULT',
      '[9:540] -A KUBE-POD-FW-0123456789ABCDEF -j MARK --set-xmark 0x0/0x10000',
      '[5:300] -A KUBE-POD-FW-0123456789ABCDEF -m mark ! --mark 0x10000/0x10000 -j REJECT --reject-with icmp-port-unreachable',
      '[2:120] -A KUBE-NWPLCY-TAIL -s 10.1.0.0/24 -m set ! --match-set kube-router-local-pods src -j REJECT',
      '[1:60] -A KUBE-NWPLCY-TAIL -d 10.1.0.0/24 -m set ! --match-set kube-router-local-pods dst -j REJECT',
      '[7:420] -A KUBE-NWPLCY-COMMON -m conntrack --ctstate INVALID -j DROP',
      'COMMIT',
    ].join('\n');
    expect(await verdictCountersOfSave(text, 'ipv4')).toEqual([
      { family: 'ipv4', chain: 'KUBE-NWPLCY-0123456789ABCDEF', verdict: 'allow', packets: 4, bytes: 240 },
      { family: 'ipv4', chain: 'KUBE-POD-FW-0123456789ABCDEF', verdict: 'reject', packets: 5, bytes: 300 },
      { family: 'ipv4', chain: 'KUBE-NWPLCY-TAIL', verdict: 'reject', direction: 'egress', packets: 2, bytes: 120 },
      { family: 'ipv4', chain: 'KUBE-NWPLCY-TAIL', verdict: 'reject', direction: 'ingress', packets: 1, bytes: 60 },
    ]);
  });

  it('passes over rules that counted nothing: a chain whose rules are all at [0:0] has no counter', async () => {
    const text = [
      '*filter',
      '[0:0] -A KUBE-POD-FW-0123456789ABCDEF -m mark ! --mark 0x10000/0x10000 -j REJECT',
      '[0:0] -A KUBE-NWPLCY-0123456789ABCDEF -j MARK --set-xmark 0x10000/0x10000',
      '[2:120] -A KUBE-NWPLCY-0123456789ABCDEF -j KUBE-NWPLCY-DEFAULT',
      'COMMIT',
    ].join('\n');
    expect(await verdictCountersOfSave(text, 'ipv6')).toEqual([
      { family: 'ipv6', chain: 'KUBE-NWPLCY-0123456789ABCDEF', verdict: 'allow', packets: 2, bytes: 120 },
    ]);
  });

  it('reads 120,000 rules of 20,000 chains (36 MB) without holding the event loop more than a slice', async () => {
    const lines = ['*filter'];
    for (let i = 0; i < 20_000; i++) {
      const chain = `KUBE-NWPLCY-${i.toString(16).toUpperCase().padStart(16, '0')}`;
      for (let rule = 0; rule < 6; rule++) {
        const counted = rule === 0 && i % 10 === 0 ? '[5:300]' : '[0:0]';
        lines.push(`${counted} -A ${chain} -m comment --comment "rule for ACCEPT traffic from source pods to dest pods selected by policy name: p${i} namespace ns" -m set --match-set KUBE-SRC-${i} src -m set --match-set KUBE-DST-${i} dst -j MARK --set-xmark 0x10000/0x10000`);
      }
    }
    lines.push('COMMIT');
    const text = lines.join('\n');
    let longestTurnMs = 0;
    let turns = 0;
    let last = performance.now();
    const ticker = setInterval(() => {
      const now = performance.now();
      longestTurnMs = Math.max(longestTurnMs, now - last);
      last = now;
      turns++;
    }, 1);
    const started = performance.now();
    const counters = await verdictCountersOfSave(text, 'ipv4');
    const tookMs = performance.now() - started;
    clearInterval(ticker);
    expect(counters).toHaveLength(2_000);
    expect(counters.every((counter) => counter.packets === 5 && counter.verdict === 'allow')).toBe(true);
    // Timers ran while it read: it gave the event loop turns (a read in one go gives none, however fast).
    expect(turns, `the whole read took ${tookMs.toFixed(0)} ms`).toBeGreaterThanOrEqual(2);
    console.log(`verdictCountersOfSave: 36 MB in ${tookMs.toFixed(0)} ms, ${turns} turns of the event loop, the longest ${longestTurnMs.toFixed(0)} ms`);
  });
});

describe('verdictCountersOfSave beside other tools\' rules', () => {
  it('parses only the rules of our chains: other tools\' lines are never parsed', async () => {
    const text = [
      '# Generated by iptables-save',
      '*filter',
      ':INPUT ACCEPT [0:0]',
      ':KUBE-POD-FW-0123456789ABCDEF - [0:0]',
      // Not a line the parser accepts: parsing the whole table would throw.
      '[1:60] a line of some other tool the parser does not know',
      '[8:480] -A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -j REJECT',
      '[5:300] -A KUBE-POD-FW-0123456789ABCDEF -m mark ! --mark 0x10000/0x10000 -j REJECT',
      '[2:120] -A KUBE-NWPLCY-TAIL -s 10.1.0.0/24 -j REJECT',
      'COMMIT',
    ].join('\n');
    expect(() => parseIptablesSave(text)).toThrow(SyntaxError);
    expect(await verdictCountersOfSave(text, 'ipv4')).toEqual([
      { family: 'ipv4', chain: 'KUBE-POD-FW-0123456789ABCDEF', verdict: 'reject', packets: 5, bytes: 300 },
      { family: 'ipv4', chain: 'KUBE-NWPLCY-TAIL', verdict: 'reject', direction: 'egress', packets: 2, bytes: 120 },
    ]);
    expect(await verdictCountersOfSave('', 'ipv4')).toEqual([]);
  });
});

/**
 * The dataplane on a fake kernel: iptables-restore inputs are applied to a map of chains, whose rules start at zero
 * and count 1 packet (60 bytes) per save that lists them. A restore can be held open (after it committed).
 */
function fakeKernel() {
  const chains = new Map<string, { rule: string; packets: number }[]>();
  let port = 80;
  let holdRestore: Promise<void> | undefined;
  const restore = (spec: CommandSpec) => {
    for (const line of (spec.input ?? '').split('\n')) {
      if (line.startsWith(':')) chains.set(line.slice(1).split(' ')[0] as string, []);
      else if (line.startsWith('-A ')) chains.get(line.split(' ')[1] as string)?.push({ rule: line, packets: 0 });
      else if (line.startsWith('-X ')) chains.delete(line.split(' ')[1] as string);
    }
  };
  const save = () => {
    const lines = ['*filter'];
    for (const rules of chains.values()) for (const rule of rules) lines.push(`[${++rule.packets}:${rule.packets * 60}] ${rule.rule}`);
    return [...lines, 'COMMIT'].join('\n');
  };
  const runner = new RecordingRunner()
    .on(
      (spec) => spec.command.endsWith('-save') && (spec.args ?? []).includes('-c'),
      () => ({ stdout: save() }),
    )
    .on('iptables-restore', async (spec) => {
      // Committed at once, as the kernel does; the command returns when the test lets it.
      restore(spec);
      await holdRestore;
      return {};
    });
  const sources: NetpolSources = {
    pods: () => [
      {
        metadata: { namespace: 'tagd', name: 'web', labels: { app: 'web' } },
        spec: { nodeName: 'tagd-node', containers: [{ ports: [] }] },
        status: { phase: 'Running', podIP: '10.244.0.5', podIPs: [{ ip: '10.244.0.5' }] },
      },
    ],
    namespaces: () => [{ metadata: { name: 'tagd', labels: {} } }],
    policies: () => [{ metadata: { namespace: 'tagd', name: 'web' }, spec: { podSelector: { matchLabels: { app: 'web' } }, ingress: [{ ports: [{ port }] }] } }],
    hasSynced: () => true,
    onChange: () => () => undefined,
    warnPolicy: () => undefined,
  };
  const ctx: PluginContext = {
    nodeName: 'tagd-node',
    logger: pino({ level: 'silent' }),
    metrics: new AgentMetrics({ collectDefaultMetrics: false }),
    health: new HealthRegistry({ defaultGraceMs: 5_000 }),
    services: new ServiceRegistry(),
  };
  const options = netpolIptablesOptions.parse({ enableIpv6: false });
  const dataplane = createIptablesDataplane(ctx, options, runner);
  const controller = createNetpolController(ctx, { sources }, options, dataplane);
  const gate = () => {
    let open = () => undefined as void;
    const held = new Promise<void>((resolve) => (open = resolve));
    return { held, open };
  };
  return {
    dataplane,
    policyChain: () => [...chains.keys()].find((name) => /^KUBE-NWPLCY-[0-9A-F]{16}$/.test(name)) as string,
    /** Changes the policy's port: the next sync writes its chain again. */
    changePolicy: () => port++,
    sync: async () => expect(await controller.runObservedSync('test')).toMatchObject({ ok: true }),
    holdRestores: () => {
      const { held, open } = gate();
      holdRestore = held;
      return () => {
        holdRestore = undefined;
        open();
      };
    },
    restores: () => runner.invocations.filter((i) => i.command === 'iptables-restore').length,
  };
}

const of = (counters: readonly ChainVerdictCounter[], chain: string) => counters.filter((counter) => counter.chain === chain);

describe('readCounters (iptables) beside a sync', () => {
  it('leaves out a chain a restore wrote while the save waited for the lock, then counts it from zero once', async () => {
    const kernel = fakeKernel();
    await kernel.sync();
    const chain = kernel.policyChain();
    const [first] = of(await kernel.dataplane.readCounters!(), chain);
    expect(first).toMatchObject({ verdict: 'allow', packets: 1 });

    // A sync's restore has committed the chain anew and holds the xtables lock; a scrape's save waits behind it.
    const release = kernel.holdRestores();
    const restores = kernel.restores();
    kernel.changePolicy();
    const syncing = kernel.sync();
    await expect.poll(() => kernel.restores()).toBe(restores + 1);
    const reading = kernel.dataplane.readCounters!();
    release();
    await syncing;
    const read = await reading;
    // Before: the fresh counters under the old generation, and again under the new one next time: counted twice.
    expect(of(read, chain)).toEqual([]);
    expect(read.length).toBeGreaterThan(0);

    const [next] = of(await kernel.dataplane.readCounters!(), chain);
    expect(next).toMatchObject({ verdict: 'allow', packets: 2 });
    expect(next?.generation).not.toBe(first?.generation);
  });
});
