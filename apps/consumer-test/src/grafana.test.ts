/**
 * deploy/grafana/kube-router.json: every query names metrics the agent exports, the sync contract's three series are
 * on it, every plugin that has figures of its own has a panel, and every query is valid PromQL (promtool).
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { AgentMetrics } from '@kube-router/metrics';
import { publicPackages, WORKSPACE_ROOT } from './packing.js';

const run = promisify(execFile);
const DASHBOARD = join(WORKSPACE_ROOT, 'deploy/grafana/kube-router.json');

interface Panel {
  id?: number;
  type: string;
  title: string;
  targets?: { expr?: string }[];
  panels?: Panel[];
}

interface Dashboard {
  uid: string;
  panels: Panel[];
  templating: { list: { name: string; query?: string | { query: string } }[] };
}

const dashboard = async () => JSON.parse(await readFile(DASHBOARD, 'utf8')) as Dashboard;

function allPanels(panels: readonly Panel[]): Panel[] {
  return panels.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);
}

/** The metric names in a PromQL expression: this agent's (kube_router_) and the process metrics (process_, nodejs_). */
export function metricNames(expr: string): string[] {
  return [...new Set([...expr.matchAll(/\b(?:kube_router|process|nodejs)_[a-zA-Z0-9_]*/g)].map((m) => m[0]))];
}

/** Grafana's variables replaced by values Prometheus accepts, for promtool. */
function concrete(expr: string): string {
  return expr.replaceAll('$__rate_interval', '5m').replaceAll('$instance', '.*').replaceAll('$controller', '.*');
}

async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.test.ts'))
    .map((e) => join(e.parentPath, e.name))
    .filter((file) => !file.includes('/testing/'));
}

/**
 * What the agent can export: the registry of a running AgentMetrics (the sync contract and the process metrics),
 * and the metric names that the public packages' sources define (each plugin registers its own when it is created),
 * by the package that defines them. A histogram's series carry _bucket, _sum and _count.
 */
async function exportedMetrics(): Promise<{ names: Set<string>; byPackage: Map<string, Set<string>> }> {
  const names = new Set<string>();
  const registry = new AgentMetrics({ collectDefaultMetrics: true }).registry;
  for (const metric of await registry.getMetricsAsJSON()) names.add(metric.name);
  const byPackage = new Map<string, Set<string>>();
  for (const pkg of await publicPackages()) {
    for (const file of await sourceFiles(join(pkg.dir, 'src'))) {
      for (const match of (await readFile(file, 'utf8')).matchAll(/['"](kube_router_[a-z0-9_]+)['"]/g)) {
        const name = match[1] as string;
        names.add(name);
        if (!byPackage.has(pkg.manifest.name)) byPackage.set(pkg.manifest.name, new Set());
        byPackage.get(pkg.manifest.name)?.add(name);
      }
    }
  }
  return { names, byPackage };
}

const isExported = (name: string, names: ReadonlySet<string>) =>
  names.has(name) || names.has(name.replace(/_(bucket|sum|count)$/, ''));

describe('deploy/grafana/kube-router.json', () => {
  it('parses the metric names of a query', () => {
    expect(metricNames('time() - max by (controller) (kube_router_controller_sync_last_success{instance=~"$instance"} > 0)')).toEqual([
      'kube_router_controller_sync_last_success',
    ]);
    expect(metricNames('rate(process_cpu_seconds_total[5m]) + nodejs_heap_size_used_bytes')).toEqual([
      'process_cpu_seconds_total',
      'nodejs_heap_size_used_bytes',
    ]);
  });

  it('names in every panel query and variable only metrics the agent exports', async () => {
    const { names } = await exportedMetrics();
    expect(names.has('kube_router_controller_sync_last_success')).toBe(true);
    const board = await dashboard();
    const panels = allPanels(board.panels).filter((p) => p.type !== 'row');
    expect(panels.length).toBeGreaterThan(10);
    const problems: string[] = [];
    for (const panel of panels) {
      const exprs = (panel.targets ?? []).map((t) => t.expr ?? '');
      if (exprs.length === 0) problems.push(`${panel.title}: no query`);
      for (const expr of exprs) {
        const used = metricNames(expr);
        if (used.length === 0) problems.push(`${panel.title}: ${expr} names no metric of the agent`);
        for (const name of used) if (!isExported(name, names)) problems.push(`${panel.title}: ${name} is not exported`);
      }
    }
    for (const variable of board.templating.list) {
      const query = typeof variable.query === 'string' ? variable.query : variable.query?.query;
      for (const name of metricNames(query ?? '')) {
        if (!isExported(name, names)) problems.push(`variable ${variable.name}: ${name} is not exported`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('shows the sync contract per controller and a panel for every plugin with figures of its own', async () => {
    const { byPackage } = await exportedMetrics();
    const used = new Set(
      allPanels((await dashboard()).panels).flatMap((p) => (p.targets ?? []).flatMap((t) => metricNames(t.expr ?? ''))),
    );
    const base = (name: string) => name.replace(/_(bucket|sum|count)$/, '');
    const usedBase = new Set([...used].map(base));
    for (const series of [
      'kube_router_controller_sync_last_success',
      'kube_router_controller_sync_failures_total',
      'kube_router_controller_sync_duration_seconds',
    ]) {
      expect(usedBase, series).toContain(series);
    }
    const missing = [...byPackage]
      .filter(([, metrics]) => ![...metrics].some((m) => usedBase.has(m)))
      .map(([pkg, metrics]) => `${pkg} (${[...metrics].join(', ')})`);
    expect(missing, 'packages whose metrics have no panel').toEqual([]);
  });

  it('has unique panel ids', async () => {
    const ids = allPanels((await dashboard()).panels).map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  const promtool = (() => {
    try {
      execFileSync('promtool', ['--version'], { stdio: 'ignore', timeout: 10_000 });
      return true;
    } catch {
      return false;
    }
  })();

  it.skipIf(!promtool)('has queries that are valid PromQL (promtool check rules; skipped: promtool is not installed)', async () => {
    const exprs = allPanels((await dashboard()).panels).flatMap((p) => (p.targets ?? []).map((t) => concrete(t.expr ?? '')));
    const rules = {
      groups: [{ name: 'dashboard', rules: exprs.map((expr, i) => ({ record: `dashboard:query_${i}`, expr })) }],
    };
    const dir = await mkdtemp(join(tmpdir(), 'kube-router-grafana-'));
    try {
      const file = join(dir, 'rules.json');
      await writeFile(file, JSON.stringify(rules));
      const result = await run('promtool', ['check', 'rules', file], { timeout: 30_000 }).catch(
        (error: { stdout?: string; stderr?: string }) => ({ stdout: error.stdout ?? '', stderr: error.stderr ?? 'failed' }),
      );
      expect(result.stderr, relative(WORKSPACE_ROOT, DASHBOARD)).toBe('');
      expect(result.stdout).toContain(`SUCCESS: ${exprs.length} rules found`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
