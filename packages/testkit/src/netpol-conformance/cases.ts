import type { CaseContext } from './case-context.js';
import { expect } from 'vitest';
import type { NetworkPolicySpec } from './policy-spec.js';
import type { CaseMode } from './case-mode.js';

export interface ConformanceCase {
  name: string;
  /** The modes the case holds in. Default `default-allow` and `default-deny`. */
  modes?: readonly CaseMode[];
  run(t: CaseContext): Promise<void>;
}

const TCP = 'TCP' as const;
const UDP = 'UDP' as const;
const bothFamilies = { families: [4, 6] as const };

/**
 * The cases, in the spirit of test/e2e/network/netpol/network_policy.go: each one applies policies to the world
 * (namespaces x, y, z; pods a, b, c; ports 80 and 81 on TCP and UDP), syncs the enforcer and checks the whole
 * matrix. Expectations are written against the pods' starting labels; the suite resets labels and deletes every
 * policy after each case.
 */
export const CONFORMANCE_CASES: readonly ConformanceCase[] = [
  {
    name: 'allows every connection when there is no policy (IPv4 and IPv6)',
    async run(t) {
      await t.check(t.reachability().expectAllAllowed(), bothFamilies);
    },
  },
  {
    name: 'isolateUnselectedPods: isolates every pod when there is no policy',
    modes: ['isolate-unselected'],
    async run(t) {
      await t.check(t.reachability().expectAll(false), bothFamilies);
    },
  },
  {
    name: 'a pod whose rules arrive late (it starts while the enforcer is down) is open, or rejected with --netpol-default-deny, until programmed',
    modes: ['default-allow', 'default-deny'],
    async run(t) {
      const rejectedUntilProgrammed = t.mode === 'default-deny';
      await t.sync();
      await t.withLatePod('x', 'late', async (probe) => {
        // Before: the enforcer is down, the pod has an address in the node's pod CIDRs and no rules.
        const before = await probe();
        expect(before.late, `traffic to and from the unprogrammed pod: ${before.detail}`).toEqual(
          before.late.map(() => !rejectedUntilProgrammed),
        );
        expect(before.programmed, `programmed pods no policy selects stay open: ${before.detail}`).toEqual(
          before.programmed.map(() => true),
        );
        return async () => {
          // After: the enforcer is back and synced; no policy selects the pod, so it is open.
          const after = await probe();
          expect(after.late, `the pod once programmed: ${after.detail}`).toEqual(after.late.map(() => true));
          expect(after.programmed, after.detail).toEqual(after.programmed.map(() => true));
        };
      });
    },
  },
  {
    name: 'deny-all ingress isolates every pod of its namespace (IPv4 and IPv6)',
    async run(t) {
      t.policy('x', 'deny-ingress', { podSelector: {}, policyTypes: ['Ingress'] });
      await t.check(t.reachability().expectAllIngress('x/*', false), bothFamilies);
    },
  },
  {
    name: 'deny-all egress isolates every pod of its namespace (IPv4 and IPv6)',
    async run(t) {
      t.policy('x', 'deny-egress', { podSelector: {}, policyTypes: ['Egress'] });
      await t.check(t.reachability().expectAllEgress('x/*', false), bothFamilies);
    },
  },
  {
    name: 'a policy without rules for both directions isolates its pod both ways',
    async run(t) {
      t.policy('x', 'isolate-a', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Ingress', 'Egress'] });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectAllEgress('x/a', false));
    },
  },
  {
    name: 'allows ingress from the same namespace only (IPv4 and IPv6)',
    async run(t) {
      t.policy('x', 'allow-same-namespace', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ podSelector: {} }] }],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectPeer('x/*', 'x/a', true), bothFamilies);
    },
  },
  {
    name: 'allows ingress from the namespaces a namespaceSelector matches',
    async run(t) {
      t.policy('x', 'allow-from-y', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }] }],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectPeer('y/*', 'x/a', true));
    },
  },
  {
    name: 'namespaceSelector and podSelector in one peer must both match (AND)',
    async run(t) {
      t.policy('x', 'allow-from-y-b', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } }, podSelector: { matchLabels: { pod: 'b' } } }] }],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectPeer('y/b', 'x/a', true));
    },
  },
  {
    name: 'namespaceSelector and podSelector as two peers each allow (OR); a lone podSelector means the policy namespace',
    async run(t) {
      t.policy('x', 'allow-from-y-or-b', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }, { podSelector: { matchLabels: { pod: 'b' } } }] }],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectPeer('y/*', 'x/a', true).expectPeer('x/b', 'x/a', true));
    },
  },
  {
    name: 'matchExpressions: In',
    async run(t) {
      t.policy('x', 'allow-in', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [
          {
            from: [
              {
                namespaceSelector: { matchExpressions: [{ key: 'ns', operator: 'In', values: ['y', 'z'] }] },
                podSelector: { matchExpressions: [{ key: 'pod', operator: 'In', values: ['b'] }] },
              },
            ],
          },
        ],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectPeer(['y/b', 'z/b'], 'x/a', true));
    },
  },
  {
    name: 'matchExpressions: NotIn',
    async run(t) {
      t.policy('x', 'allow-not-in', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [
          {
            from: [
              {
                namespaceSelector: { matchExpressions: [{ key: 'ns', operator: 'NotIn', values: ['x'] }] },
                podSelector: { matchExpressions: [{ key: 'pod', operator: 'NotIn', values: ['a', 'b'] }] },
              },
            ],
          },
        ],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectPeer(['y/c', 'z/c'], 'x/a', true));
    },
  },
  {
    name: 'matchExpressions: Exists',
    async run(t) {
      t.setNamespaceLabels('y', { ns: 'y', team: 'blue' });
      t.setPodLabels('z/c', { pod: 'c', role: 'client' });
      t.policy('x', 'allow-exists', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [
          {
            from: [
              { namespaceSelector: { matchExpressions: [{ key: 'team', operator: 'Exists' }] } },
              { namespaceSelector: {}, podSelector: { matchExpressions: [{ key: 'role', operator: 'Exists' }] } },
            ],
          },
        ],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectPeer(['y/*', 'z/c'], 'x/a', true));
    },
  },
  {
    name: 'matchExpressions: DoesNotExist',
    async run(t) {
      t.setNamespaceLabels('y', { ns: 'y', team: 'blue' });
      t.policy('x', 'allow-does-not-exist', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ namespaceSelector: { matchExpressions: [{ key: 'team', operator: 'DoesNotExist' }] } }] }],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectPeer(['x/*', 'z/*'], 'x/a', true));
    },
  },
  {
    name: 'allows ingress on one port only (protocol defaults to TCP)',
    async run(t) {
      t.policy('x', 'allow-80', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ namespaceSelector: {} }], ports: [{ port: 80 }] }],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectAllIngress('x/a', true, { port: 80, protocol: TCP }));
    },
  },
  {
    name: 'allows ingress on named ports, each with its protocol',
    async run(t) {
      t.policy('x', 'allow-named', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [{ ports: [{ port: 'serve-81-tcp' }, { port: 'serve-80-udp', protocol: UDP }] }],
      });
      await t.check(
        t
          .reachability()
          .expectAllIngress('x/a', false)
          .expectAllIngress('x/a', true, { port: 81, protocol: TCP })
          .expectAllIngress('x/a', true, { port: 80, protocol: UDP }),
      );
    },
  },
  {
    name: 'allows egress on a named port of the destination pods',
    async run(t) {
      t.policy('x', 'allow-egress-named', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Egress'],
        egress: [{ ports: [{ port: 'serve-81-udp', protocol: UDP }] }],
      });
      await t.check(t.reachability().expectAllEgress('x/a', false).expectAllEgress('x/a', true, { port: 81, protocol: UDP }));
    },
  },
  {
    name: 'endPort allows a range of ports, then a narrower one after an update',
    async run(t) {
      const spec = (port: number, endPort: number): NetworkPolicySpec => ({
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [{ ports: [{ port, endPort, protocol: TCP }] }],
      });
      t.policy('x', 'allow-range', spec(80, 81));
      await t.check(t.reachability().expectAllIngress('x/a', false).expectAllIngress('x/a', true, { protocol: TCP }));
      t.policy('x', 'allow-range', spec(81, 90));
      await t.check(t.reachability().expectAllIngress('x/a', false).expectAllIngress('x/a', true, { port: 81, protocol: TCP }));
    },
  },
  {
    name: 'a port rule with a protocol and no port allows every port of that protocol (UDP only)',
    async run(t) {
      t.policy('x', 'allow-udp', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [{ ports: [{ protocol: UDP }] }],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectAllIngress('x/a', true, { protocol: UDP }));
    },
  },
  {
    name: 'ipBlock with except allows ingress from a CIDR but the excepted pod; it does not match the other family',
    async run(t) {
      t.policy('x', 'allow-cidr', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ ipBlock: { cidr: t.podCidr(4), except: [t.podHostCidr('y/b', 4)] } }] }],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectAllIngress('x/a', true).expectPeer('y/b', 'x/a', false), {
        families: [4],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false), { families: [6] });
    },
  },
  {
    name: 'ipBlock with except on IPv6',
    async run(t) {
      t.policy('x', 'allow-cidr-v6', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ ipBlock: { cidr: t.podCidr(6), except: [t.podHostCidr('z/c', 6)] } }] }],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectAllIngress('x/a', true).expectPeer('z/c', 'x/a', false), {
        families: [6],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false), { families: [4] });
    },
  },
  {
    name: 'egress ipBlock with except allows egress to a CIDR but the excepted pod',
    async run(t) {
      t.policy('x', 'allow-egress-cidr', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Egress'],
        egress: [{ to: [{ ipBlock: { cidr: t.podCidr(4), except: [t.podHostCidr('z/c', 4)] } }] }],
      });
      await t.check(t.reachability().expectPeer('x/a', 'z/c', false));
    },
  },
  {
    name: 'allows egress to one pod on one port',
    async run(t) {
      t.policy('x', 'allow-egress-y-b-80', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Egress'],
        egress: [
          {
            to: [{ namespaceSelector: { matchLabels: { ns: 'y' } }, podSelector: { matchLabels: { pod: 'b' } } }],
            ports: [{ port: 80, protocol: TCP }],
          },
        ],
      });
      await t.check(t.reachability().expectAllEgress('x/a', false).expectPeer('x/a', 'y/b', true, { port: 80, protocol: TCP }));
    },
  },
  {
    name: 'several policies on one pod add up (union), each with its own ports',
    async run(t) {
      t.policy('x', 'allow-from-y', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }] }],
      });
      t.policy('x', 'allow-from-z-b-81', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [
          {
            from: [{ namespaceSelector: { matchLabels: { ns: 'z' } }, podSelector: { matchLabels: { pod: 'b' } } }],
            ports: [{ port: 81, protocol: TCP }],
          },
        ],
      });
      await t.check(
        t
          .reachability()
          .expectAllIngress('x/a', false)
          .expectPeer('y/*', 'x/a', true)
          .expectPeer('z/b', 'x/a', true, { port: 81, protocol: TCP }),
      );
    },
  },
  {
    name: "a connection needs both its source's egress and its target's ingress to allow it",
    async run(t) {
      t.policy('x', 'allow-from-y', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }] }],
      });
      t.policy('y', 'deny-egress', { podSelector: {}, policyTypes: ['Egress'] });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectAllEgress('y/*', false));
      t.policy('y', 'allow-egress-to-x-a', {
        podSelector: { matchLabels: { pod: 'b' } },
        policyTypes: ['Egress'],
        egress: [{ to: [{ namespaceSelector: { matchLabels: { ns: 'x' } }, podSelector: { matchLabels: { pod: 'a' } } }] }],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectAllEgress('y/*', false).expectPeer('y/b', 'x/a', true));
    },
  },
  {
    name: 'without policyTypes, a policy with only ingress rules isolates ingress only',
    async run(t) {
      t.policy('x', 'ingress-rules-only', {
        podSelector: { matchLabels: { pod: 'a' } },
        ingress: [{ from: [{ podSelector: { matchLabels: { pod: 'b' } } }] }],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectPeer('x/b', 'x/a', true));
    },
  },
  {
    name: 'without policyTypes, a policy with egress rules isolates egress and, always, ingress',
    async run(t) {
      t.policy('x', 'egress-rules-only', {
        podSelector: { matchLabels: { pod: 'a' } },
        egress: [{ to: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }] }],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectAllEgress('x/a', false).expectPeer('x/a', 'y/*', true));
    },
  },
  {
    name: 'an empty rule ([{}]) allows everything in its direction, even next to a deny-all; deleting it closes again',
    async run(t) {
      t.policy('x', 'deny-all', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] });
      t.policy('x', 'allow-all', { podSelector: {}, policyTypes: ['Ingress', 'Egress'], ingress: [{}], egress: [{}] });
      await t.check(t.reachability().expectAllAllowed());
      t.deletePolicy('x', 'allow-all');
      await t.check(t.reachability().expectAllIngress('x/*', false).expectAllEgress('x/*', false));
    },
  },
  {
    name: "updating a policy's rules changes what it allows",
    async run(t) {
      const fromNamespace = (ns: string): NetworkPolicySpec => ({
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns } } }] }],
      });
      t.policy('x', 'allow-from', fromNamespace('y'));
      await t.check(t.reachability().expectAllIngress('x/a', false).expectPeer('y/*', 'x/a', true));
      t.policy('x', 'allow-from', fromNamespace('z'));
      await t.check(t.reachability().expectAllIngress('x/a', false).expectPeer('z/*', 'x/a', true));
    },
  },
  {
    name: 'deleting a policy opens traffic again',
    async run(t) {
      t.policy('x', 'deny-ingress', { podSelector: {}, policyTypes: ['Ingress'] });
      await t.check(t.reachability().expectAllIngress('x/*', false), { protocols: [TCP] });
      t.deletePolicy('x', 'deny-ingress');
      await t.check(t.reachability().expectAllAllowed());
    },
  },
  {
    name: 'relabelling a pod moves it into and out of a peer selector',
    async run(t) {
      t.policy('x', 'allow-from-b', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchLabels: { pod: 'b' } } }] }],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectPeer('*/b', 'x/a', true));
      t.setPodLabels('y/c', { pod: 'b' });
      t.setPodLabels('x/b', { pod: 'not-b' });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectPeer(['y/b', 'z/b', 'y/c'], 'x/a', true));
    },
  },
  {
    name: "relabelling a pod moves it into and out of a policy's podSelector",
    async run(t) {
      t.policy('x', 'isolate-a', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Ingress'] });
      await t.check(t.reachability().expectAllIngress('x/a', false));
      t.setPodLabels('x/b', { pod: 'a' });
      t.setPodLabels('x/a', { pod: 'not-a' });
      await t.check(t.reachability().expectAllIngress('x/b', false));
    },
  },
  {
    name: 'relabelling a namespace moves its pods into and out of a namespaceSelector',
    async run(t) {
      t.policy('x', 'allow-from-ns-y', {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }] }],
      });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectPeer('y/*', 'x/a', true));
      t.setNamespaceLabels('z', { ns: 'y' });
      t.setNamespaceLabels('y', { ns: 'not-y' });
      await t.check(t.reachability().expectAllIngress('x/a', false).expectPeer('z/*', 'x/a', true));
    },
  },
];
