import type { Observation } from './matrix.js';
import type { IpFamily, PodKey } from './model.js';

const ALLOWED = '.';
const BLOCKED = 'X';
const SELF = '-';
const UNPROBED = '?';
const MAX_LISTED_MISMATCHES = 40;

/**
 * A failure message a person can act on: for each family, port and protocol with a mismatch, the expected and the
 * observed truth table side by side (rows are sources, columns targets; `.` allowed, `X` blocked, `-` self) and a
 * third table marking the cells that differ, then the differing probes one by one with what each one saw.
 */
export function renderReachabilityReport(observations: readonly Observation[], heading = 'reachability mismatch'): string {
  const groups = groupObservations(observations);
  const lines = [heading, `legend: ${ALLOWED} allowed, ${BLOCKED} blocked, ${SELF} self (not probed); rows = from, columns = to`];
  for (const group of groups) {
    const mismatches = group.observations.filter((o) => o.expected !== o.observed);
    const title = `IPv${group.family} ${group.port}/${group.protocol}`;
    if (mismatches.length === 0) {
      lines.push('', `${title}: as expected (${group.observations.length} probes)`);
      continue;
    }
    lines.push('', `${title}: ${mismatches.length} of ${group.observations.length} probes differ`);
    const pods = podsOf(group.observations);
    const cells = new Map(group.observations.map((o) => [`${o.from}>${o.to}`, o]));
    const table = (mark: (o: Observation) => string) =>
      renderTable(pods, (from, to) => {
        if (from === to) return SELF;
        const observation = cells.get(`${from}>${to}`);
        return observation ? mark(observation) : UNPROBED;
      });
    const expected = table((o) => (o.expected ? ALLOWED : BLOCKED));
    const observed = table((o) => (o.observed ? ALLOWED : BLOCKED));
    const diff = table((o) => (o.expected === o.observed ? ALLOWED : BLOCKED));
    lines.push(...sideBySide([withTitle('expected', expected), withTitle('observed', observed), withTitle('differs (X)', diff)]));
  }
  const mismatches = observations.filter((o) => o.expected !== o.observed);
  if (mismatches.length > 0) {
    lines.push('', 'differing probes:');
    for (const o of mismatches.slice(0, MAX_LISTED_MISMATCHES)) {
      lines.push(
        `  IPv${o.family} ${o.from} -> ${o.to} ${o.port}/${o.protocol}: expected ${verdict(o.expected)}, observed ${verdict(o.observed)} (${o.detail})`,
      );
    }
    if (mismatches.length > MAX_LISTED_MISMATCHES) lines.push(`  ... and ${mismatches.length - MAX_LISTED_MISMATCHES} more`);
  }
  return lines.join('\n');
}

interface ObservationGroup {
  family: IpFamily;
  port: number;
  protocol: string;
  observations: Observation[];
}

function groupObservations(observations: readonly Observation[]): ObservationGroup[] {
  const groups = new Map<string, ObservationGroup>();
  for (const o of observations) {
    const key = `${o.family}/${o.port}/${o.protocol}`;
    let group = groups.get(key);
    if (!group) {
      group = { family: o.family, port: o.port, protocol: o.protocol, observations: [] };
      groups.set(key, group);
    }
    group.observations.push(o);
  }
  return [...groups.values()];
}

function podsOf(observations: readonly Observation[]): PodKey[] {
  const pods = new Set<PodKey>();
  for (const o of observations) {
    pods.add(o.from);
    pods.add(o.to);
  }
  return [...pods].sort();
}

/** One truth table: a header of targets, then a row per source, each mark under the middle of its column's name. */
export function renderTable(pods: readonly PodKey[], cell: (from: PodKey, to: PodKey) => string): string[] {
  const corner = 'from\\to';
  const columnWidth = Math.max(...pods.map((pod) => pod.length)) + 1;
  const labelWidth = Math.max(corner.length, ...pods.map((pod) => pod.length));
  const centered = (mark: string) => mark.padStart(Math.ceil(columnWidth / 2) + 1).padEnd(columnWidth);
  const header = corner.padEnd(labelWidth) + pods.map((pod) => pod.padStart(columnWidth)).join('');
  const rows = pods.map((from) => from.padEnd(labelWidth) + pods.map((to) => centered(cell(from, to))).join(''));
  return [header, ...rows];
}

function withTitle(title: string, table: string[]): string[] {
  return [title, ...table];
}

function sideBySide(tables: string[][]): string[] {
  const widths = tables.map((table) => Math.max(...table.map((line) => line.length)));
  const height = Math.max(...tables.map((table) => table.length));
  const lines: string[] = [];
  for (let row = 0; row < height; row++) {
    lines.push(
      tables
        .map((table, index) => (table[row] ?? '').padEnd(widths[index] ?? 0))
        .join('   |   ')
        .trimEnd(),
    );
  }
  return lines;
}

function verdict(allowed: boolean): string {
  return allowed ? 'allowed' : 'blocked';
}
