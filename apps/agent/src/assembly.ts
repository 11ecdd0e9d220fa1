import type { ControllerPlugin } from '@kube-router/controller';

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

/**
 * Checks names and requirements and returns the entries in creation order: every plugin after the plugins it requires,
 * otherwise in the order given. Throws an AssemblyError listing every problem.
 */
export function orderAssembly(entries: readonly PluginEntry[]): PluginEntry[] {
  const problems: string[] = [];
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
    if (typeof plugin.create !== 'function') problems.push(`${label} has no create function`);
    if (typeof plugin.options?.parse !== 'function') problems.push(`${label} has no options schema with a parse method`);
    if (byName.has(plugin.name)) problems.push(`plugin ${plugin.name} is in the assembly twice`);
    else byName.set(plugin.name, entry);
  });

  for (const [name, entry] of byName) {
    for (const required of entry.plugin.requires ?? []) {
      if (required === name) problems.push(`plugin ${name} requires itself`);
      else if (!byName.has(required)) {
        problems.push(`plugin ${name} requires ${required}, which is not in the assembly (have: ${[...byName.keys()].join(', ')})`);
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

  if (problems.length > 0) throw new AssemblyError(problems);
  return ordered;
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
