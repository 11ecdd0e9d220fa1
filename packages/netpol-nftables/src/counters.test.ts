import { ServiceRegistry, type PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import { RecordingRunner, parseNftJson } from '@kube-router/netfilter';
import { TAIL_CHAIN } from '@kube-router/netpol';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { verdictCountersOf } from './counters.js';
import { createNftablesDataplane } from './dataplane.js';
import { contentOf } from './kernel-state.js';
import { netpolNftablesOptions } from './options.js';

const POLICY = 'KUBE-NWPLCY-0123456789ABCDEF';
const POD = 'KUBE-POD-FW-0123456789ABCDEF';
const counter = (packets: number, bytes: number) => ({ counter: { packets, bytes } });
const saddr = { match: { op: '==', left: { payload: { protocol: 'ip', field: 'saddr' } }, right: { prefix: { addr: '10.1.0.0', len: 24 } } } };
const daddr = { match: { op: '==', left: { payload: { protocol: 'ip', field: 'daddr' } }, right: { prefix: { addr: '10.1.0.0', len: 24 } } } };

function listing(rules: { chain: string; handle: number; expr: unknown[] }[]): string {
  return JSON.stringify({ nftables: rules.map((rule) => ({ rule: { family: 'ip', table: 'kube-router-filter-ipv4', ...rule } })) });
}

describe('verdictCountersOf (nftables)', () => {
  it('reads the counters of policy chains as allows, and the rejects of pod and tail chains', () => {
    const ruleset = parseNftJson(
      listing([
        { chain: POLICY, handle: 7, expr: [saddr, counter(3, 180), { mangle: {} }, { return: null }] },
        { chain: POD, handle: 9, expr: [{ jump: { target: 'KUBE-NWPLCY-COMMON' } }] },
        { chain: POD, handle: 10, expr: [counter(5, 300), { reject: null }] },
        { chain: TAIL_CHAIN, handle: 11, expr: [saddr, counter(2, 120), { reject: null }] },
        { chain: TAIL_CHAIN, handle: 12, expr: [daddr, counter(1, 60), { reject: null }] },
        { chain: 'KUBE-ROUTER-FORWARD', handle: 13, expr: [counter(99, 99), { reject: null }] },
      ]),
    );
    expect(verdictCountersOf(ruleset, 'ipv4')).toEqual([
      { family: 'ipv4', chain: POLICY, verdict: 'allow', generation: 7, packets: 3, bytes: 180 },
      { family: 'ipv4', chain: POD, verdict: 'reject', generation: 10, packets: 5, bytes: 300 },
      { family: 'ipv4', chain: TAIL_CHAIN, verdict: 'reject', direction: 'egress', generation: 11, packets: 2, bytes: 120 },
      { family: 'ipv4', chain: TAIL_CHAIN, verdict: 'reject', direction: 'ingress', generation: 12, packets: 1, bytes: 60 },
    ]);
  });

  it('does not take traffic for a change of the rule: read-backs compare rules without what their counters counted', () => {
    const rules = (packets: number) => parseNftJson(listing([{ chain: POD, handle: 10, expr: [counter(packets, packets * 60), { reject: null }] }])).rules;
    expect(contentOf(rules(0))).toBe(contentOf(rules(1000)));
    expect(contentOf(rules(0))).not.toBe(contentOf(parseNftJson(listing([{ chain: POD, handle: 10, expr: [{ accept: null }] }])).rules));
  });
});

describe('readCounters (nftables)', () => {
  it('lists the table terse: the sets\' elements, which a scrape does not need, are not read', async () => {
    const tables = JSON.stringify({ nftables: [{ table: { family: 'ip', name: 'kube-router-filter-ipv4', handle: 1 } }] });
    const runner = new RecordingRunner()
      .on('nft -j list tables', { stdout: tables })
      .on('nft -j -t list table ip kube-router-filter-ipv4', { stdout: listing([{ chain: POD, handle: 10, expr: [counter(4, 240), { reject: null }] }]) });
    const ctx: PluginContext = {
      nodeName: 'tagd-node',
      logger: pino({ level: 'silent' }),
      metrics: new AgentMetrics({ collectDefaultMetrics: false }),
      health: new HealthRegistry({ defaultGraceMs: 5_000 }),
      services: new ServiceRegistry(),
    };
    const dataplane = createNftablesDataplane(ctx, netpolNftablesOptions.parse({ enableIpv6: false }), runner);
    expect(await dataplane.readCounters!()).toEqual([{ family: 'ipv4', chain: POD, verdict: 'reject', generation: 10, packets: 4, bytes: 240 }]);
    expect(runner.lines()).toEqual(['nft -j list tables', 'nft -j -t list table ip kube-router-filter-ipv4']);
  });
});
