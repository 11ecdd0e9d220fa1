import { PLUGIN_CONTRACT_VERSION } from '@kube-router/controller';
import type { ControllerPlugin } from '@kube-router/controller';
import semver from 'semver';

/** One plugin of an assembly and its raw options, parsed later by the plugin's own schema. */
export interface PluginEntry {
  plugin: ControllerPlugin;
  options?: unknown;
}

/**
 * A refused assembly: every problem found, not only the first, so that an operator fixes a manifest in one go.
 * The CLI exits 2 on it.
 */
export class AssemblyError extends Error {
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    super(
      problems.length === 1
        ? `invalid plugin assembly: ${problems[0]}`
        : `invalid plugin assembly:\n${problems.map((p) => `  - ${p}`).join('\n')}`,
    );
    this.name = 'AssemblyError';
    this.problems = problems;
  }
}

// Plugin names become the `controller` label and the health check name, so they follow the health registry's rule.
const NAME_PATTERN = /^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/;

/** One plugin of a checked assembly with its options as its schema parsed them. */
export interface PlannedPlugin {
  entry: PluginEntry;
  options: unknown;
}

/**
 * Checks a whole assembly and returns its plugins in creation order with their parsed options: every plugin after
 * the plugins it requires, otherwise in the order given. Throws one AssemblyError with every problem found: the
 * plugins' names and requirements, `agentProblems` (the agent's own options, checked by the caller) and every
 * plugin's options. A missing requirement never hides bad options, so an operator fixes a manifest in one go.
 */
export function planAssembly(entries: readonly PluginEntry[], agentProblems: readonly string[] = []): PlannedPlugin[] {
  const { ordered, problems } = orderEntries(entries);
  problems.push(...agentProblems);
  const planned: PlannedPlugin[] = [];
  for (const entry of ordered) {
    const parsed = parsePluginOptions(entry);
    if (parsed.ok) planned.push({ entry, options: parsed.options });
    else problems.push(...parsed.problems);
  }
  if (problems.length > 0) throw new AssemblyError(problems);
  return planned;
}

/**
 * Checks names and requirements and returns the entries in creation order. Throws an AssemblyError listing every
 * problem of names and requirements (planAssembly also checks options).
 */
export function orderAssembly(entries: readonly PluginEntry[]): PluginEntry[] {
  const { ordered, problems } = orderEntries(entries);
  if (problems.length > 0) throw new AssemblyError(problems);
  return ordered;
}

/**
 * Orders what can be ordered and collects every problem instead of throwing. `ordered` holds each well-formed plugin
 * once (the first of duplicates), also when requirements are missing or cyclic, so that its options can still be
 * checked.
 */
function orderEntries(entries: readonly PluginEntry[]): { ordered: PluginEntry[]; problems: string[] } {
  const problems: string[] = [];
  const named = new Set<string>();
  // Only well-formed plugins are ordered and have their options parsed; a malformed one is already a problem.
  const byName = new Map<string, PluginEntry>();
  entries.forEach((entry, index) => {
    const plugin = entry?.plugin as Partial<ControllerPlugin> | undefined;
    const label = typeof plugin?.name === 'string' ? `plugin ${plugin.name}` : `plugin #${index + 1}`;
    if (!plugin || typeof plugin !== 'object') {
      problems.push(`${label} is not a plugin object`);
      return;
    }
    if (typeof plugin.name !== 'string' || !NAME_PATTERN.test(plugin.name)) {
      problems.push(`${label} has an invalid name ${JSON.stringify(plugin.name)} (lowercase letters, digits, '.', '_', '-')`);
      return;
    }
    const hasCreate = typeof plugin.create === 'function';
    const hasSchema = typeof plugin.options?.parse === 'function';
    if (!hasCreate) problems.push(`${label} has no create function`);
    const hostProblem = checkHost(plugin.host);
    if (hostProblem) problems.push(`${label} ${hostProblem}`);
    if (!hasSchema) problems.push(`${label} has no options schema with a parse method`);
    if (named.has(plugin.name)) problems.push(`plugin ${plugin.name} is in the assembly twice`);
    else if (hasCreate && hasSchema) byName.set(plugin.name, entry);
    named.add(plugin.name);
  });

  for (const [name, entry] of byName) {
    for (const required of entry.plugin.requires ?? []) {
      if (required === name) problems.push(`plugin ${name} requires itself`);
      else if (!named.has(required)) {
        problems.push(`plugin ${name} requires ${required}, which is not in the assembly (have: ${[...named].join(', ')})`);
      }
    }
  }

  const ordered: PluginEntry[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const reportedCycles = new Set<string>();
  const visit = (name: string, path: string[]): void => {
    const seen = state.get(name);
    if (seen === 'done') return;
    if (seen === 'visiting') {
      const cycle = [...path.slice(path.indexOf(name)), name];
      const key = [...cycle.slice(0, -1)].sort().join(',');
      if (!reportedCycles.has(key)) {
        reportedCycles.add(key);
        problems.push(`requirement cycle: ${cycle.join(' -> ')}`);
      }
      return;
    }
    state.set(name, 'visiting');
    const entry = byName.get(name) as PluginEntry;
    for (const required of entry.plugin.requires ?? []) {
      if (byName.has(required) && required !== name) visit(required, [...path, name]);
    }
    state.set(name, 'done');
    ordered.push(entry);
  };
  for (const name of byName.keys()) visit(name, []);
  return { ordered, problems };
}

/** Why a plugin's `host` range refuses this agent's plugin contract, or undefined when it accepts it. */
function checkHost(host: unknown): string | undefined {
  if (typeof host !== 'string' || semver.validRange(host) === null) {
    return `has no valid host range ${JSON.stringify(host)} (the plugin contract versions it works with, such as ^${PLUGIN_CONTRACT_VERSION})`;
  }
  if (!semver.satisfies(PLUGIN_CONTRACT_VERSION, host, { includePrerelease: true })) {
    return `needs the plugin contract ${host}, and this agent offers ${PLUGIN_CONTRACT_VERSION}`;
  }
  return undefined;
}

export type ParsedOptions = { ok: true; options: unknown } | { ok: false; problems: string[] };

/** Parses a plugin's options with its schema; a rejection names the plugin and every offending field. */
export function parsePluginOptions(entry: PluginEntry): ParsedOptions {
  try {
    return { ok: true, options: entry.plugin.options.parse(entry.options ?? {}) };
  } catch (error) {
    return { ok: false, problems: describeOptionsError(entry.plugin.name, error) };
  }
}

function describeOptionsError(plugin: string, error: unknown): string[] {
  // zod (and zod-like) errors carry issues with paths; anything else gives its message.
  const issues = (error as { issues?: unknown })?.issues;
  if (Array.isArray(issues) && issues.length > 0) {
    return issues.map((issue: { path?: PropertyKey[]; message?: string }) => {
      const path = issue.path?.length ? issue.path.map(String).join('.') : '(options)';
      return `plugin ${plugin}: bad option ${path}: ${issue.message ?? 'invalid'}`;
    });
  }
  return [`plugin ${plugin}: bad options: ${error instanceof Error ? error.message : String(error)}`];
}
