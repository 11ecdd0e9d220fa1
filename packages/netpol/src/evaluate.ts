import { explainFlow } from './explain.js';
import type { DirectionVerdict, Flow } from './explain.js';
import type { PolicyModel } from './model.js';

export type { DirectionVerdict, Flow } from './explain.js';

export interface FlowVerdict {
  /** Both sides let the flow through. */
  readonly allowed: boolean;
  /** The verdict of the source pod's egress policies. */
  readonly egress: DirectionVerdict;
  /** The verdict of the destination pod's ingress policies. */
  readonly ingress: DirectionVerdict;
}

/**
 * What the model says about one flow, evaluated straight from the model as a reference for renderers: their tests
 * can send real traffic and compare the kernel's verdict with this one. The verdicts of explainFlow, without the why.
 */
export function evaluateFlow(model: PolicyModel, flow: Flow): FlowVerdict {
  const { allowed, egress, ingress } = explainFlow(model, flow);
  return { allowed, egress: egress.verdict, ingress: ingress.verdict };
}
