import type { Lab, ProbeRequest } from '../lab/index.js';
import type { IpFamily, ProbeProtocol } from './model.js';
import type { Connection, Reachability } from './reachability.js';

/** What one probe saw, next to what the case expected. */
export interface Observation extends Connection {
  family: IpFamily;
  expected: boolean;
  observed: boolean;
  /** The address probed, the pod that answered or why it failed, and how long it took: for the report. */
  detail: string;
}

export interface MatrixScope {
  /** Default [4]. */
  families?: readonly IpFamily[];
  /** Default every port of the world. */
  ports?: readonly number[];
  /** Default every protocol of the world. */
  protocols?: readonly ProbeProtocol[];
}

export type Prober = Pick<Lab, 'probeMany'>;

/** A cell of the truth table on one address family. */
export interface FamilyConnection extends Connection {
  family: IpFamily;
}

/** The cells of `expected` in `scope`, for each family. */
export function cellsOf(expected: Reachability, scope: MatrixScope = {}): FamilyConnection[] {
  const families = scope.families ?? [4];
  return families.flatMap((family) =>
    expected.connections({ ports: scope.ports, protocols: scope.protocols }).map((connection) => ({ ...connection, family })),
  );
}

/** Probes every cell of the table in `scope`, for each family, all at once (about one probe timeout in all). */
export function observeReachability(lab: Prober, expected: Reachability, scope: MatrixScope = {}, timeoutMs?: number): Promise<Observation[]> {
  return observeCells(lab, expected, cellsOf(expected, scope), timeoutMs);
}

/** Probes the given cells all at once. */
export async function observeCells(
  lab: Prober,
  expected: Reachability,
  cells: readonly FamilyConnection[],
  timeoutMs?: number,
): Promise<Observation[]> {
  const requests: ProbeRequest[] = cells.map(({ from, to, port, protocol, family }) => ({
    from,
    to,
    port,
    protocol,
    family,
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
  }));
  const results = await lab.probeMany(requests);
  return cells.map((cell, index) => {
    const { from, to, port, protocol, family } = cell;
    const result = results[index];
    const observed = result !== undefined && result.ok && result.skipped === undefined;
    const why = result?.skipped ?? (result?.ok ? `answered by ${result.reply ?? '?'}` : (result?.error ?? 'no result'));
    const detail = `${result?.target ?? '?'}: ${why} in ${Math.round(result?.ms ?? 0)} ms`;
    return { from, to, port, protocol, family, expected: expected.isAllowed(cell), observed, detail };
  });
}

export function mismatchesOf(observations: readonly Observation[]): Observation[] {
  return observations.filter((observation) => observation.expected !== observation.observed);
}
