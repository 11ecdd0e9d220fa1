import { parseIptablesSave } from '@kube-router/netfilter';
import { describe, expect, it } from 'vitest';
import { verdictCountersOf } from './counters.js';

describe('verdictCountersOf (iptables)', () => {
  it('reads the marking rules of policy chains as allows, and the REJECTs of pod and tail chains', () => {
    const [filter] = parseIptablesSave(
      [
        '*filter',
        ':KUBE-NWPLCY-0123456789ABCDEF - [0:0]',
        ':KUBE-POD-FW-0123456789ABCDEF - [0:0]',
        ':KUBE-NWPLCY-TAIL - [0:0]',
        ':KUBE-NWPLCY-COMMON - [0:0]',
        '[3:180] -A KUBE-NWPLCY-0123456789ABCDEF -m set --match-set KUBE-SRC-X src -j MARK --set-xmark 0x10000/0x10000',
        '[3:180] -A KUBE-NWPLCY-0123456789ABCDEF -m set --match-set KUBE-SRC-X src -m mark --mark 0x10000/0x10000 -j RETURN',
        '[1:60] -A KUBE-NWPLCY-0123456789ABCDEF -j KUBE-NWPLCY-DEFAULT',
        '[9:540] -A KUBE-POD-FW-0123456789ABCDEF -j MARK --set-xmark 0x0/0x10000',
        '[5:300] -A KUBE-POD-FW-0123456789ABCDEF -m mark ! --mark 0x10000/0x10000 -j REJECT --reject-with icmp-port-unreachable',
        '[2:120] -A KUBE-NWPLCY-TAIL -s 10.1.0.0/24 -m set ! --match-set kube-router-local-pods src -j REJECT',
        '[1:60] -A KUBE-NWPLCY-TAIL -d 10.1.0.0/24 -m set ! --match-set kube-router-local-pods dst -j REJECT',
        '[7:420] -A KUBE-NWPLCY-COMMON -m conntrack --ctstate INVALID -j DROP',
        'COMMIT',
      ].join('\n'),
    );
    expect(verdictCountersOf(filter!, 'ipv4')).toEqual([
      { family: 'ipv4', chain: 'KUBE-NWPLCY-0123456789ABCDEF', verdict: 'allow', packets: 3, bytes: 180 },
      { family: 'ipv4', chain: 'KUBE-NWPLCY-0123456789ABCDEF', verdict: 'allow', packets: 1, bytes: 60 },
      { family: 'ipv4', chain: 'KUBE-POD-FW-0123456789ABCDEF', verdict: 'reject', packets: 5, bytes: 300 },
      { family: 'ipv4', chain: 'KUBE-NWPLCY-TAIL', verdict: 'reject', direction: 'egress', packets: 2, bytes: 120 },
      { family: 'ipv4', chain: 'KUBE-NWPLCY-TAIL', verdict: 'reject', direction: 'ingress', packets: 1, bytes: 60 },
    ]);
  });
});
