import { DEFAULT_CHAIN, POD_CHAIN_PREFIX, POLICY_CHAIN_PREFIX, TAIL_CHAIN, runInSlices } from '@kube-router/netpol';
import type { ChainVerdictCounter, IpFamily, Steps } from '@kube-router/netpol';

const POLICY_CHAIN = new RegExp(`^${POLICY_CHAIN_PREFIX}[0-9A-F]{16}$`);
const POD_CHAIN = new RegExp(`^${POD_CHAIN_PREFIX}[0-9A-F]{16}$`);
/**
 * A rule of a chain named like ours (the tail chain has the policy chains' prefix) as `iptables-save -c` prints it,
 * that has counted something: a rule still at `[0:0]` adds nothing to any counter, and on a quiet node that is most.
 */
const OWN_COUNTED_RULE = new RegExp(`^\\[(?!0:0\\])(\\d+):(\\d+)\\] -A ((?:${POLICY_CHAIN_PREFIX}|${POD_CHAIN_PREFIX})\\S+) (.*)$`, 'gm');
/** How much of the saved text one step scans (about a millisecond): the text of 10,000 pods' chains is tens of MB. */
const STEP_CHARS = 256 * 1024;
/** CPU between two turns of the event loop: a scrape must not hold up /healthz. */
const SLICE_MS = 5;

/**
 * The verdict counters in the text of `iptables-save -c -t filter`, read in slices that yield to the event loop.
 * Only our chains' rules that counted something are looked at: the table also holds every other tool's rules
 * (kube-proxy's can be tens of thousands). One counter per chain, verdict and direction, its rules summed, so that
 * how many of a chain's rules have counted yet never changes what the counter is.
 */
export function verdictCountersOfSave(text: string, family: IpFamily): Promise<ChainVerdictCounter[]> {
  return runInSlices(countersOfSave(text, family), SLICE_MS);
}

function* countersOfSave(text: string, family: IpFamily): Steps<ChainVerdictCounter[]> {
  const counters = new Map<string, ChainVerdictCounter>();
  for (let start = 0; start < text.length; ) {
    const newline = text.indexOf('\n', Math.min(start + STEP_CHARS, text.length));
    const end = newline < 0 ? text.length : newline;
    for (const [, packets, bytes, chain, spec] of text.slice(start, end).matchAll(OWN_COUNTED_RULE)) {
      const counted = verdictOf(chain!, spec!);
      if (!counted) continue;
      const key = `${chain}\0${counted.verdict}\0${counted.direction ?? ''}`;
      const before = counters.get(key);
      counters.set(key, {
        family,
        chain: chain!,
        ...counted,
        packets: (before?.packets ?? 0) + Number(packets),
        bytes: (before?.bytes ?? 0) + Number(bytes),
      });
    }
    start = end + 1;
    yield;
  }
  return [...counters.values()];
}

/**
 * Whose verdict a rule of ours counts: in a policy chain the rules that mark what the policy allows (`-j MARK`, or the
 * jump to the default chain; the `RETURN` after each only sees what the mark rule counted already), in a pod chain
 * its `REJECT`, in the tail chain (--netpol-default-deny) its `REJECT`s by direction (`-s <pod CIDR>`, which
 * iptables-save prints first, is from the pods: egress). Every other chain and rule counts nothing.
 */
function verdictOf(chain: string, spec: string): Pick<ChainVerdictCounter, 'verdict' | 'direction'> | undefined {
  const kind = POLICY_CHAIN.test(chain) ? 'policy' : POD_CHAIN.test(chain) ? 'pod' : chain === TAIL_CHAIN ? 'tail' : undefined;
  if (kind === undefined) return undefined;
  // The target comes after every match (a comment included), so the last `-j` is the rule's.
  const jump = ` ${spec}`.lastIndexOf(' -j ');
  const target = jump < 0 ? undefined : spec.slice(jump + 3).split(' ', 1)[0];
  if (kind === 'policy') return target === 'MARK' || target === DEFAULT_CHAIN ? { verdict: 'allow' } : undefined;
  if (target !== 'REJECT') return undefined;
  return kind === 'tail' ? { verdict: 'reject', direction: spec.startsWith('-s ') ? 'egress' : 'ingress' } : { verdict: 'reject' };
}
