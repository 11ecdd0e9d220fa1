import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { KUBE_ROUTER_CHANGE_ME_ARGS, KUBE_ROUTER_DAEMONSETS } from '@kube-router/testkit';
import { planAssembly } from './assembly.js';
import { defaultCatalog, FEATURE_FLAGS, pluginsForConfig, type PluginCatalog } from './catalog.js';
import { FEATURES, FLAGS, type FlagDefinition, type FlagName } from './flags.js';
import { parseFlags } from './parse-flags.js';
import { EXIT, runCli } from './run-cli.js';

const repo = fileURLToPath(new URL('../../../', import.meta.url));
const OUR_MANIFESTS = ['deploy/kube-router-all-features.yaml', 'deploy/kube-router-firewall-only.yaml', 'deploy/kube-router-proxy-only.yaml'];

function containerArgs(path: string): string[] {
  const documents = parseAllDocuments(readFileSync(`${repo}${path}`, 'utf8')).map((doc) => doc.toJS() as Record<string, unknown>);
  const daemonSet = documents.find((doc) => doc.kind === 'DaemonSet') as
    | { spec: { template: { spec: { containers: Array<{ name: string; args?: string[] }> } } } }
    | undefined;
  const container = daemonSet?.spec.template.spec.containers.find((c) => c.name === 'kube-router');
  if (!container?.args) throw new Error(`${path}: no kube-router container with args`);
  return container.args;
}

const CASES: Array<[source: string, args: readonly string[]]> = [
  ...Object.entries(KUBE_ROUTER_DAEMONSETS),
  ...OUR_MANIFESTS.map((path): [string, string[]] => [path, containerArgs(path)]),
];

/**
 * What the build lacks for these args, worked out from the args themselves, the flag table's `implemented` markers
 * and the catalog, independently of the CLI's code: each enabled feature with no plugin (named by its --run-* flag),
 * and each flag given a value other than its default that no plugin implements, when its feature runs in this build.
 * As plugins land and flip their flags to implemented, the expectation follows.
 */
function expectedMissing(args: readonly string[], catalog: PluginCatalog = defaultCatalog): string[] {
  const parsed = parseFlags(args, { NODE_NAME: 'node' });
  if (!parsed.ok) throw new Error(parsed.stderr);
  const runs = (feature: (typeof FEATURES)[number]) => parsed.config.features[feature];
  const missing: string[] = FEATURES.filter((f) => runs(f) && !catalog[f]).map((f) => FEATURE_FLAGS[f]);
  for (const arg of args) {
    const name = arg.replace(/^--?/, '').split('=')[0] as FlagName;
    const definition = (FLAGS as Record<string, FlagDefinition>)[name];
    if (!definition || definition.implemented) continue;
    const single = parseFlags([arg], {});
    // The default, or the value that says what this build does (--enable-overlay=false), is accepted.
    const accepted = [definition.default, ...(definition.builtValue === undefined ? [] : [definition.builtValue])];
    if (single.ok && accepted.some((value) => isDeepStrictEqual(single.values[name], value))) continue;
    const relevant =
      definition.features.length === 0 || definition.features.some((f) => runs(f) && catalog[f] !== undefined);
    if (relevant) missing.push(`--${name}`);
  }
  return [...new Set(missing)].sort();
}

class ReachedKubernetes extends Error {}

/** Runs the real CLI with the build's catalog up to the point where it would connect to Kubernetes. */
async function runUntilKubernetes(args: readonly string[], catalog: PluginCatalog = defaultCatalog) {
  let stderr = '';
  let reached = false;
  const code = await runCli(args, {
    catalog,
    env: { NODE_NAME: 'node' },
    guardProcess: false,
    logDestination: { write: () => undefined },
    stdout: () => undefined,
    stderr: (text) => void (stderr += text),
    environment: () => {
      reached = true;
      throw new ReachedKubernetes('stop here: the flags were accepted');
    },
  });
  return { code, stderr, reached };
}

describe.each(CASES)('the container args of %s', (source, args) => {
  it('start with the features this build has, or refuse naming exactly what is missing', async () => {
    const missing = expectedMissing(args);
    const result = await runUntilKubernetes(args);
    if (missing.length === 0) {
      expect(result.stderr).toContain('stop here: the flags were accepted');
      expect(result.reached).toBe(true);
      expect(result.code).toBe(EXIT.failure);
      // The plugins' own schemas accept the options the flags give them.
      const parsed = parseFlags(args, { NODE_NAME: 'node' });
      if (!parsed.ok) throw new Error(parsed.stderr);
      expect(() => planAssembly(pluginsForConfig(parsed.config, defaultCatalog))).not.toThrow();
      return;
    }
    expect(result.reached, source).toBe(false);
    expect(result.code).toBe(EXIT.usage);
    const named = [...result.stderr.matchAll(/^ {2}- (--[a-z0-9-]+)/gm)].map((m) => m[1]).sort();
    expect(named, result.stderr).toEqual(missing);
  });
});

// Every feature present (as plugins that do nothing): what is left to refuse are the flags no plugin implements.
const EVERY_FEATURE: PluginCatalog = { ...Object.fromEntries(FEATURES.map((f) => [f, () => []])), ...defaultCatalog };

describe.each(CASES)('with a plugin for every feature, the args of %s', (source, args) => {
  it('start, or refuse naming exactly the flags that no plugin implements', async () => {
    const missing = expectedMissing(args, EVERY_FEATURE);
    const result = await runUntilKubernetes(args, EVERY_FEATURE);
    expect(result.reached, `${source}: ${result.stderr}`).toBe(missing.length === 0);
    const named = [...result.stderr.matchAll(/^ {2}- (--[a-z0-9-]+)/gm)].map((m) => m[1]).sort();
    expect(named, result.stderr).toEqual(missing);
  });
});

describe('the DaemonSet fixtures', () => {
  it("hold all 12 of kube-router's DaemonSets", () => {
    expect(Object.keys(KUBE_ROUTER_DAEMONSETS)).toHaveLength(12);
  });

  it('generic-kuberouter-only-advertise-routes starts: its --enable-overlay=false is what this build does (it exited 2)', async () => {
    const cases = CASES.filter(([source]) => source.includes('only-advertise-routes'));
    expect(cases.length).toBeGreaterThan(0);
    for (const [source, args] of cases) {
      expect(args, source).toContain('--enable-overlay=false');
      expect(expectedMissing(args), source).toEqual([]);
      expect((await runUntilKubernetes(args)).reached, source).toBe(true);
    }
  });

  it('generic-kuberouter-only-advertise-routes as shipped, with its <CHANGE ME> placeholders, is refused naming the flag to fill in', async () => {
    const source = 'daemonset/generic-kuberouter-only-advertise-routes.yaml';
    const flagOf = (arg: string) => arg.split('=')[0];
    const placeholders = new Set(KUBE_ROUTER_CHANGE_ME_ARGS.map(flagOf));
    const shipped = [...KUBE_ROUTER_DAEMONSETS[source]!.filter((arg) => !placeholders.has(flagOf(arg))), ...KUBE_ROUTER_CHANGE_ME_ARGS];
    const result = await runUntilKubernetes(shipped);
    expect(result.reached).toBe(false);
    expect(result.code).toBe(EXIT.usage);
    expect(result.stderr.split('\n')[0]).toBe('error: invalid argument "<CHANGE ME>" for "--peer-router-ips" flag: "<CHANGE ME>" is not an IP address');
  });

  it('summarise what this build lacks for them (printed for the record)', () => {
    const summary = CASES.map(
      ([source, args]) =>
        `${source}: ${expectedMissing(args).join(' ') || 'starts'}; with every feature: ${expectedMissing(args, EVERY_FEATURE).join(' ') || 'starts'}`,
    );
    console.info(summary.join('\n'));
    expect(summary).toHaveLength(15);
  });
});
