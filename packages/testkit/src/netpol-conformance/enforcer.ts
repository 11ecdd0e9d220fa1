/** Where the enforcer under test runs: the lab node it plays, and the API server it watches. */
export interface EnforcerEnv {
  /** Path of a kubeconfig for the suite's API server. */
  kubeconfig: string;
  /** The Node the enforcer runs for; the world's pods are bound to it. */
  nodeName: string;
  /** The node's network namespace: the enforcer programs its rules there (`ip netns exec <netns> ...`). */
  netns: string;
}

/** A new connection between two addresses of one family, as the enforcer's explain takes it. */
export interface EnforcerFlow {
  source: string;
  destination: string;
  port: number;
  protocol: 'TCP' | 'UDP' | 'SCTP';
}

/** What the enforcer says it does with a flow, from the rules it last applied. */
export interface EnforcerVerdict {
  allowed: boolean;
  /** Why, in a few words: for the report of a verdict that differs from the probe. */
  detail: string;
}

export interface SyncOutcome {
  ok: boolean;
  error?: unknown;
}

/** A running network policy dataplane, as a backend hands it to the suite. */
export interface NetpolEnforcer {
  /**
   * Runs one full sync now and resolves when its rules are in the kernel. The sync must see every API write made
   * before the call (the backend waits for its informers to catch up); the suite still re-syncs and re-probes a
   * mismatching matrix a few times before it fails, so a late informer shows up as a warning, not a failure.
   */
  syncNow(): Promise<SyncOutcome>;
  /**
   * The enforcer's own verdict on a flow, from what it last applied (kube-router explain). When present, every
   * check compares it with the probe of each pair and fails the case on any difference; undefined: not explained.
   */
  explain?(flow: EnforcerFlow): Promise<EnforcerVerdict | undefined>;
  /** Stops the enforcer; what it leaves in the node netns goes with the lab. */
  stop(): Promise<void>;
}

export type StartEnforcer = (env: EnforcerEnv) => Promise<NetpolEnforcer>;
