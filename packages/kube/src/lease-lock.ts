import { CoordinationV1Api, V1MicroTime } from '@kubernetes/client-node';
import type { KubeConfig, V1Lease } from '@kubernetes/client-node';
import { statusCodeOf } from './api-errors.js';
import { callApi } from './request-options.js';

/** What a Lease says about leadership (client-go's LeaderElectionRecord). */
export interface LeaderElectionRecord {
  /** Empty when the lease was released. */
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime: Date;
  renewTime: Date;
  leaseTransitions: number;
}

export interface ObservedLease {
  record: LeaderElectionRecord;
  resourceVersion: string;
  lease: V1Lease;
}

/** Another writer changed or created the Lease first: optimistic concurrency said no. */
export class LeaseConflictError extends Error {
  constructor(namespace: string, name: string) {
    super(`lease ${namespace}/${name} was changed by someone else (409 Conflict)`);
    this.name = 'LeaseConflictError';
  }
}

/**
 * A coordination.k8s.io/v1 Lease used as a lock. Every write carries the resourceVersion that was read (or is a
 * create), so of two candidates writing concurrently exactly one wins and the other gets 409 Conflict.
 */
export class LeaseLock {
  readonly #api: CoordinationV1Api;

  constructor(
    kubeConfig: KubeConfig,
    readonly namespace: string,
    readonly name: string,
    readonly requestTimeoutMs: number,
  ) {
    this.#api = kubeConfig.makeApiClient(CoordinationV1Api);
  }

  get description(): string {
    return `${this.namespace}/${this.name}`;
  }

  /** The current Lease, or undefined if there is none. */
  async get(signal?: AbortSignal): Promise<ObservedLease | undefined> {
    try {
      const lease = await callApi(
        `get lease ${this.description}`,
        this.requestTimeoutMs,
        (options) => this.#api.readNamespacedLease({ namespace: this.namespace, name: this.name }, options),
        signal,
      );
      return observe(lease);
    } catch (error) {
      if (statusCodeOf(error) === 404) return undefined;
      throw error;
    }
  }

  async create(record: LeaderElectionRecord, signal?: AbortSignal): Promise<ObservedLease> {
    const body: V1Lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { namespace: this.namespace, name: this.name },
      spec: toSpec(record),
    };
    try {
      const lease = await callApi(
        `create lease ${this.description}`,
        this.requestTimeoutMs,
        (options) => this.#api.createNamespacedLease({ namespace: this.namespace, body }, options),
        signal,
      );
      return observe(lease);
    } catch (error) {
      if (statusCodeOf(error) === 409) throw new LeaseConflictError(this.namespace, this.name);
      throw error;
    }
  }

  /** Replaces the record of the Lease as it was read; 409 (LeaseConflictError) if it changed since. */
  async update(current: ObservedLease, record: LeaderElectionRecord, signal?: AbortSignal): Promise<ObservedLease> {
    const body: V1Lease = {
      ...current.lease,
      metadata: { ...current.lease.metadata, resourceVersion: current.resourceVersion },
      spec: { ...current.lease.spec, ...toSpec(record) },
    };
    try {
      const lease = await callApi(
        `update lease ${this.description}`,
        this.requestTimeoutMs,
        (options) => this.#api.replaceNamespacedLease({ namespace: this.namespace, name: this.name, body }, options),
        signal,
      );
      return observe(lease);
    } catch (error) {
      if (statusCodeOf(error) === 409) throw new LeaseConflictError(this.namespace, this.name);
      throw error;
    }
  }
}

function toSpec(record: LeaderElectionRecord): NonNullable<V1Lease['spec']> {
  return {
    holderIdentity: record.holderIdentity,
    leaseDurationSeconds: record.leaseDurationSeconds,
    // MicroTime: the API server parses lease times with exactly six fractional digits.
    acquireTime: new V1MicroTime(record.acquireTime.getTime()),
    renewTime: new V1MicroTime(record.renewTime.getTime()),
    leaseTransitions: record.leaseTransitions,
  };
}

function observe(lease: V1Lease): ObservedLease {
  const spec = lease.spec ?? {};
  return {
    lease,
    resourceVersion: lease.metadata?.resourceVersion ?? '',
    record: {
      holderIdentity: typeof spec.holderIdentity === 'string' ? spec.holderIdentity : '',
      leaseDurationSeconds: typeof spec.leaseDurationSeconds === 'number' ? spec.leaseDurationSeconds : 0,
      acquireTime: toDate(spec.acquireTime),
      renewTime: toDate(spec.renewTime),
      leaseTransitions: typeof spec.leaseTransitions === 'number' ? spec.leaseTransitions : 0,
    },
  };
}

/**
 * client-node leaves MicroTime fields as strings when it reads them, whatever their declared type. A time that does
 * not parse counts as the epoch: an Invalid Date would make the next renewal throw when it is serialized.
 */
function toDate(value: unknown): Date {
  const date = value instanceof Date ? value : typeof value === 'string' || typeof value === 'number' ? new Date(value) : undefined;
  return date && !Number.isNaN(date.getTime()) ? date : new Date(0);
}
