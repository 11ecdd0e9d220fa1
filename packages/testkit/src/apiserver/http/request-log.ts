import type { KubeVerb } from '../resources.js';

/** One API request as the server understood it. */
export interface RequestRecord {
  method: string;
  path: string;
  verb: KubeVerb | 'discovery';
  group?: string;
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
  /** Who sent it, when the server authenticates (tokens) or authorizes (rbac). */
  user?: string;
  /** Refused 403 by RBAC: the record of a request that no handler served. */
  forbidden?: boolean;
}

export type RequestFilter = Partial<Omit<RequestRecord, 'path' | 'method'>>;

/** Counts requests by verb and resource, so tests can assert things like "one list and one watch per resource". */
export class RequestLog {
  private readonly recorded: RequestRecord[] = [];

  get records(): readonly RequestRecord[] {
    return this.recorded;
  }

  record(entry: RequestRecord): void {
    this.recorded.push(entry);
  }

  /** Records matching every given field of the filter. */
  filter(filter: RequestFilter = {}): RequestRecord[] {
    return this.recorded.filter((entry) =>
      Object.entries(filter).every(([key, value]) => value === undefined || entry[key as keyof RequestRecord] === value),
    );
  }

  count(filter: RequestFilter = {}): number {
    return this.filter(filter).length;
  }

  clear(): void {
    this.recorded.length = 0;
  }
}
