import { parseNftJson } from '@kube-router/netfilter';
import { TAIL_CHAIN } from '@kube-router/netpol';
import { describe, expect, it } from 'vitest';
import { verdictCountersOf } from './counters.js';
import { contentOf } from './kernel-state.js';

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
