import { counterOn } from '@kube-router/metrics';
import type { Counter, Registry } from 'prom-client';
import type { Direction, IpFamily, PolicyModel } from '../model.js';
import { TAIL_CHAIN, podChainName, policyChainName } from './names.js';
import { podChainPlan } from './pod-chain.js';

export type Verdict = 'allow' | 'reject';

/**
 * The counters of one of our rules (or of several of one chain, summed), as a backend reads them from the kernel: the
 * accepting rules of a policy chain (`allow`), the rejecting rule of a pod chain (`reject`), or a reject of the tail
 * chain (--netpol-default-deny), which belongs to no pod and says its direction instead.
 */
export interface ChainVerdictCounter {
  readonly family: IpFamily;
  readonly chain: string;
  readonly verdict: Verdict;
  /** The tail chain's rejects only: from the pod CIDR (egress) or to it (ingress). */
  readonly direction?: Direction;
  readonly packets: number;
  readonly bytes: number;
  /**
   * What changes when the rule is written again, which starts its kernel counters at zero (nft: the rule's handle;
   * iptables: when the agent last wrote the chain). Without it, a lower count than before is taken as a new rule.
   */
  readonly generation?: string | number;
}

/** Why a pod chain or the tail chain rejected: the `reason` label of kube_router_netpol_rejected_*_total. */
export type RejectReason = 'no_policy_allows' | 'no_policy_selects' | 'fail_closed' | 'default_deny';

type Attribution =
  | { readonly kind: 'policy'; readonly namespace: string; readonly policy: string; readonly direction: Direction }
  | {
      readonly kind: 'pod';
      readonly namespace: string;
      readonly direction: Direction;
      readonly reason: RejectReason;
      /** The policies isolating the pod in `direction`, as [namespace, name]. */
      readonly policies: readonly (readonly [string, string])[];
    };

export interface VerdictCountersOptions {
  /** How long one read of the kernel answers every scrape: two scrapes at once run one read. Default 2 s. */
  readonly cacheMs?: number;
  readonly logger: { warn(object: object, message: string): void };
}

/**
 * Per-policy verdict counters, read from the rules' own kernel counters when Prometheus scrapes (never during a
 * sync): kube_router_netpol_policy_{packets,bytes}_total{namespace,policy,direction,verdict} and
 * kube_router_netpol_rejected_{packets,bytes}_total{namespace,direction,reason}. The kernel's counters start again at
 * zero when a rule is rewritten (its chain changed) or removed; these stay monotonic: each read adds the increase
 * since the last one, or the whole new value when the kernel's went down. A read that fails is logged and leaves the
 * counters as they were: a scrape never fails because of it.
 */
export class VerdictCounters {
  readonly #read: () => Promise<readonly ChainVerdictCounter[]>;
  readonly #cacheMs: number;
  readonly #logger: VerdictCountersOptions['logger'];
  readonly #policyPackets: Counter<'namespace' | 'policy' | 'direction' | 'verdict'>;
  readonly #policyBytes: Counter<'namespace' | 'policy' | 'direction' | 'verdict'>;
  readonly #rejectedPackets: Counter<'namespace' | 'direction' | 'reason'>;
  readonly #rejectedBytes: Counter<'namespace' | 'direction' | 'reason'>;
  /** The kernel's values at the last read, by family, chain, verdict and direction. */
  #last = new Map<string, Counted>();
  #model: { model: PolicyModel; failedPolicies: ReadonlySet<string> } | undefined;
  /** Built from #model when a read first needs it: a sync must not pay for a map no scrape may read. */
  #attributions: Map<string, Attribution> | undefined;
  #reading: Promise<void> | undefined;
  #readAt = Number.NEGATIVE_INFINITY;
  /** The label sets counted so far, by their JSON: the series to remove when their policy or namespace goes. */
  readonly #policySeries = new Map<string, PolicyLabels>();
  readonly #rejectedSeries = new Map<string, RejectedLabels>();

  constructor(registry: Registry, read: () => Promise<readonly ChainVerdictCounter[]>, options: VerdictCountersOptions) {
    this.#read = read;
    this.#cacheMs = options.cacheMs ?? 2_000;
    this.#logger = options.logger;
    const collect = () => this.refresh();
    this.#policyPackets = counterOn(registry, {
      name: 'kube_router_netpol_policy_packets_total',
      help:
        'Packets a network policy allowed (the first packet of each connection its rules accepted) or rejected (dropped ' +
        'for a pod it isolates because no policy allowed them: such a packet counts once for each policy isolating the pod)',
      labelNames: ['namespace', 'policy', 'direction', 'verdict'],
      collect,
    });
    this.#policyBytes = counterOn(registry, {
      name: 'kube_router_netpol_policy_bytes_total',
      help: 'Bytes of the packets counted by kube_router_netpol_policy_packets_total, counted the same way',
      labelNames: ['namespace', 'policy', 'direction', 'verdict'],
      collect,
    });
    this.#rejectedPackets = counterOn(registry, {
      name: 'kube_router_netpol_rejected_packets_total',
      help:
        'Packets the network policy firewall rejected, each once, by namespace of the pod and why: no_policy_allows, ' +
        'no_policy_selects (isolateUnselectedPods), fail_closed (a policy could not be programmed), default_deny ' +
        '(--netpol-default-deny, no namespace)',
      labelNames: ['namespace', 'direction', 'reason'],
      collect,
    });
    this.#rejectedBytes = counterOn(registry, {
      name: 'kube_router_netpol_rejected_bytes_total',
      help: 'Bytes of the packets counted by kube_router_netpol_rejected_packets_total',
      labelNames: ['namespace', 'direction', 'reason'],
      collect,
    });
  }

  /** What the last sync applied: whose chains the kernel's counters belong to. Cheap; called after every sync. */
  update(model: PolicyModel, failedPolicies: ReadonlySet<string>): void {
    if (this.#model?.model === model && sameSet(this.#model.failedPolicies, failedPolicies)) return;
    const modelChanged = this.#model?.model !== model;
    this.#model = { model, failedPolicies };
    this.#attributions = undefined;
    if (modelChanged) this.#forgetGone(model);
  }

  /**
   * Removes the series of policies and namespaces the model no longer holds: /metrics must not grow with every policy
   * and namespace ever seen. A policy or namespace that comes back starts again at zero (a counter reset to Prometheus).
   */
  #forgetGone(model: PolicyModel): void {
    const policies = new Set<string>();
    const namespaces = new Set<string>(['']);
    for (const policy of model.policies) {
      policies.add(`${policy.namespace}/${policy.name}`);
      namespaces.add(policy.namespace);
    }
    for (const pod of model.pods) {
      namespaces.add(pod.namespace);
      for (const id of [...pod.ingress.policies, ...pod.egress.policies]) policies.add(id);
    }
    for (const [key, labels] of this.#policySeries) {
      if (policies.has(`${labels.namespace}/${labels.policy}`)) continue;
      this.#policyPackets.remove(labels);
      this.#policyBytes.remove(labels);
      this.#policySeries.delete(key);
    }
    for (const [key, labels] of this.#rejectedSeries) {
      if (namespaces.has(labels.namespace)) continue;
      this.#rejectedPackets.remove(labels);
      this.#rejectedBytes.remove(labels);
      this.#rejectedSeries.delete(key);
    }
  }

  /** Reads the kernel unless a read finished less than the cache time ago; one read at a time. Never rejects. */
  refresh(): Promise<void> {
    if (this.#reading) return this.#reading;
    if (performance.now() - this.#readAt < this.#cacheMs) return Promise.resolve();
    this.#reading = this.#readOnce().finally(() => {
      this.#readAt = performance.now();
      this.#reading = undefined;
    });
    return this.#reading;
  }

  async #readOnce(): Promise<void> {
    let samples: readonly ChainVerdictCounter[];
    try {
      samples = await this.#read();
    } catch (error) {
      this.#logger.warn({ err: error }, 'reading the netpol rules counters failed: the verdict counters keep their last values');
      return;
    }
    const attributions = (this.#attributions ??= this.#attribute());
    const last = new Map<string, Counted>();
    for (const sample of samples) {
      const key = `${sample.family}\0${sample.chain}\0${sample.verdict}\0${sample.direction ?? ''}`;
      const generation = String(sample.generation ?? '');
      const summed = last.get(key);
      last.set(
        key,
        summed
          ? { packets: summed.packets + sample.packets, bytes: summed.bytes + sample.bytes, generation: `${summed.generation},${generation}` }
          : { packets: sample.packets, bytes: sample.bytes, generation },
      );
    }
    for (const [key, now] of last) {
      const before = this.#last.get(key);
      const reset = before === undefined || before.generation !== now.generation || now.packets < before.packets || now.bytes < before.bytes;
      const packets = reset ? now.packets : now.packets - before.packets;
      const bytes = reset ? now.bytes : now.bytes - before.bytes;
      if (packets === 0 && bytes === 0) continue;
      const [, chain = '', verdict = 'reject', direction = ''] = key.split('\0');
      this.#add(chain, verdict as Verdict, direction as Direction | '', packets, bytes, attributions);
    }
    this.#last = last;
  }

  #add(chain: string, verdict: Verdict, direction: Direction | '', packets: number, bytes: number, attributions: Map<string, Attribution>): void {
    if (chain === TAIL_CHAIN) {
      this.#incRejected({ namespace: '', direction: direction || 'ingress', reason: 'default_deny' }, packets, bytes);
      return;
    }
    // A chain of a pod or policy the last sync no longer knows (removed since): nobody to count it for.
    const owner = attributions.get(chain);
    if (!owner) return;
    if (owner.kind === 'policy') {
      if (verdict !== 'allow') return;
      this.#incPolicy({ namespace: owner.namespace, policy: owner.policy, direction: owner.direction, verdict }, packets, bytes);
      return;
    }
    if (verdict !== 'reject') return;
    this.#incRejected({ namespace: owner.namespace, direction: owner.direction, reason: owner.reason }, packets, bytes);
    for (const [namespace, policy] of owner.policies) this.#incPolicy({ namespace, policy, direction: owner.direction, verdict }, packets, bytes);
  }

  #incPolicy(labels: PolicyLabels, packets: number, bytes: number): void {
    this.#policyPackets.inc(labels, packets);
    this.#policyBytes.inc(labels, bytes);
    this.#policySeries.set(JSON.stringify([labels.namespace, labels.policy, labels.direction, labels.verdict]), labels);
  }

  #incRejected(labels: RejectedLabels, packets: number, bytes: number): void {
    this.#rejectedPackets.inc(labels, packets);
    this.#rejectedBytes.inc(labels, bytes);
    this.#rejectedSeries.set(JSON.stringify([labels.namespace, labels.direction, labels.reason]), labels);
  }

  /** Chain name to whose verdicts it counts, for both families: pod chains as podChainPlan plans them. */
  #attribute(): Map<string, Attribution> {
    const attributions = new Map<string, Attribution>();
    if (!this.#model) return attributions;
    const { model, failedPolicies } = this.#model;
    const families: readonly IpFamily[] = ['ipv4', 'ipv6'];
    for (const policy of model.policies) {
      for (const direction of ['ingress', 'egress'] as const) {
        if (!policy[direction].isolates) continue;
        for (const family of families) {
          attributions.set(policyChainName(policy.id, direction, family), { kind: 'policy', namespace: policy.namespace, policy: policy.name, direction });
        }
      }
    }
    for (const pod of model.pods) {
      for (const direction of ['ingress', 'egress'] as const) {
        // As if isolateUnselectedPods were on: a pod chain exists only where the backend planned one, and then it is this.
        const plan = podChainPlan(pod, direction, true, failedPolicies);
        if (!plan) continue;
        const owner: Attribution = plan.failClosed
          ? { kind: 'pod', namespace: pod.namespace, direction, reason: 'fail_closed', policies: pod[direction].policies.map(namespaceAndName) }
          : {
              kind: 'pod',
              namespace: pod.namespace,
              direction,
              reason: pod[direction].isolated ? 'no_policy_allows' : 'no_policy_selects',
              policies: plan.policies.map(namespaceAndName),
            };
        for (const family of families) attributions.set(podChainName(pod.id, direction, family), owner);
      }
    }
    return attributions;
  }
}

interface PolicyLabels {
  readonly namespace: string;
  readonly policy: string;
  readonly direction: Direction;
  readonly verdict: Verdict;
}

interface RejectedLabels {
  readonly namespace: string;
  readonly direction: Direction;
  readonly reason: RejectReason;
}

interface Counted {
  readonly packets: number;
  readonly bytes: number;
  readonly generation: string;
}

function namespaceAndName(id: string): readonly [string, string] {
  const slash = id.indexOf('/');
  return [id.slice(0, slash), id.slice(slash + 1)];
}

function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  return a.size === b.size && [...a].every((item) => b.has(item));
}
