import type { IpFamily } from './ip-allocator.js';

export type LabProtocol = 'TCP' | 'UDP' | 'SCTP';

/** A probe as the agent script receives it. */
export interface WireProbe {
  host: string;
  port: number;
  protocol: 'TCP' | 'UDP';
  timeoutMs: number;
}

export interface ProbeOutcome {
  ok: boolean;
  /** The first line the listener answered with: `<namespace>/<name>` of the pod that served it. */
  reply?: string;
  /** Why the probe failed: `timeout`, `ECONNREFUSED`, ... */
  error?: string;
  ms: number;
}

/** A pod: `"namespace/name"`, `"name"` (in `default`) or an object. */
export type PodRef = string | { namespace?: string; name: string };

/** Where a probe starts: a lab pod, or any network namespace (the node's, say). */
export type ProbeSource = PodRef | { netns: string };

export interface ProbeOptions {
  /** How long a probe may wait for its answer before it counts as blocked. */
  timeoutMs?: number;
  /** Which of a target pod's addresses to probe; the pod's first address when not given. */
  family?: IpFamily;
}

export interface ProbeRequest extends ProbeOptions {
  from: ProbeSource;
  /** An IP address or a lab pod. */
  to: string | PodRef;
  port: number;
  protocol?: LabProtocol;
}

export interface ProbeResult extends ProbeOutcome {
  request: ProbeRequest;
  /** The address that was probed. */
  target: string;
  /** Set when the probe could not be run here at all (SCTP); `ok` is then false. */
  skipped?: string;
}
