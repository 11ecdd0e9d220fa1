import type { PolicyModel, PolicyProblem } from './model.js';

/** What a backend tells about one policy that selects local pods: a joined sync failure and/or an event. */
export interface PolicyProblemReport {
  /** The policy's id, `namespace/name`. */
  readonly policy: string;
  /** Errors fail the policy's pods closed in the directions named; the backend joins `message` into the sync error. */
  readonly failsClosed: boolean;
  /** The Kubernetes event reason: `InvalidNetworkPolicy` (Warning, fails closed) or `NetworkPolicyWarning`. */
  readonly reason: 'InvalidNetworkPolicy' | 'NetworkPolicyWarning';
  readonly message: string;
}

/**
 * The problems of the policies that select local pods, as every backend reports them: one report of a policy's
 * errors (its pods fail closed, so it is a failed sync) and one of its warnings. Problems of policies that select no
 * local pod are left to the nodes they matter on, so one bad policy is not reported by every node of the cluster.
 */
export function policyProblemReports(model: PolicyModel): PolicyProblemReport[] {
  const local = new Set(model.policies.map((policy) => policy.id));
  const byPolicy = new Map<string, PolicyProblem[]>();
  for (const problem of model.problems) {
    if (!local.has(problem.policy)) continue;
    let list = byPolicy.get(problem.policy);
    if (!list) byPolicy.set(problem.policy, (list = []));
    list.push(problem);
  }
  const reports: PolicyProblemReport[] = [];
  const describe = (p: PolicyProblem) => `${p.path}: ${p.message}`;
  for (const [policy, problems] of byPolicy) {
    const errors = problems.filter((p) => p.severity === 'error');
    const warnings = problems.filter((p) => p.severity === 'warning');
    if (errors.length > 0) {
      const directions = [...new Set(errors.map((p) => p.direction ?? 'ingress and egress'))].join(', ');
      reports.push({
        policy,
        failsClosed: true,
        reason: 'InvalidNetworkPolicy',
        message: `invalid network policy, its pods fail closed (${directions}): ${errors.map(describe).join('; ')}`,
      });
    }
    if (warnings.length > 0) {
      reports.push({ policy, failsClosed: false, reason: 'NetworkPolicyWarning', message: warnings.map(describe).join('; ') });
    }
  }
  return reports;
}
