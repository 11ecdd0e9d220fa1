import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { helpText } from '@kube-router/agent';
import { codeLines, extractCustomAgentExample } from './docs-example.js';
import { publicPackages, WORKSPACE_ROOT } from './packing.js';

const docsDir = join(WORKSPACE_ROOT, 'docs');

let previousProgram: ts.Program | undefined;

/** Type-checks `source` as if it were a file of this workspace package: workspace packages resolve to their source. */
function typeErrors(source: string): string[] {
  const parsed = ts.getParsedCommandLineOfConfigFile(join(WORKSPACE_ROOT, 'apps/consumer-test/tsconfig.json'), {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    },
  });
  if (!parsed) throw new Error('cannot read apps/consumer-test/tsconfig.json');
  const file = join(WORKSPACE_ROOT, 'apps/consumer-test/src/docs-custom-agent.example.ts');
  const host = ts.createCompilerHost(parsed.options);
  const { getSourceFile, fileExists, readFile: read } = host;
  host.getSourceFile = (name, language, ...rest) =>
    name === file ? ts.createSourceFile(name, source, language) : getSourceFile.call(host, name, language, ...rest);
  host.fileExists = (name) => name === file || fileExists.call(host, name);
  host.readFile = (name) => (name === file ? source : read.call(host, name));
  // Reusing the previous program keeps every unchanged file parsed: the second check costs a fraction of the first.
  const program = ts.createProgram({ rootNames: [file], options: { ...parsed.options, noEmit: true }, host, oldProgram: previousProgram });
  previousProgram = program;
  // Only the example's own diagnostics: other packages' sources are checked by their own typecheck.
  return ts
    .getPreEmitDiagnostics(program, program.getSourceFile(file))
    .map((d) => {
      const where = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
      return `${where ? `line ${where.line + 1}: ` : ''}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    });
}

describe('docs/plugins.md: the custom agent', () => {
  it('is an agent in about 15 lines that type-checks against the packages', async () => {
    const example = extractCustomAgentExample(await readFile(join(docsDir, 'plugins.md'), 'utf8'));
    expect(example).toContain('connectToCluster(');
    expect(codeLines(example)).toBeLessThanOrEqual(16);
    expect(typeErrors(example)).toEqual([]);
  }, 120_000);

  it('would catch an example that no longer compiles', () => {
    const broken = "import { connectToCluster } from '@kube-router/agent';\nconnectToCluster({ nodeNam: 'n' });\n";
    expect(typeErrors(broken).join('\n')).toMatch(/nodeNam/);
  }, 120_000);
});

/** Every exported `*_CONTROLLER` constant of every public package: the names the controllers really have. */
async function exportedControllerNames(): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  for (const pkg of await publicPackages()) {
    const exports = (await import(pkg.manifest.name)) as Record<string, unknown>;
    for (const [key, value] of Object.entries(exports)) {
      if (key.endsWith('_CONTROLLER') && typeof value === 'string') names.set(value, `${pkg.manifest.name} ${key}`);
    }
  }
  return names;
}

/**
 * Places where a text names a controller: a `controller` label, a verbose health line, a `--health-window` override,
 * a `"controller"` log field. The name a doc uses there must be the name the controller has.
 */
export function controllerMentions(text: string): string[] {
  const patterns = [
    /controller="([^"]+)"/g,
    /\[[+-]\]([a-z0-9._-]+) (?:ok|failed)/g,
    /--health-window[= ](?!controller=duration)([a-z0-9._-]+)=/g, // not the syntax placeholder
    /"controller":\s*"([^"]+)"/g,
    /Health window of one controller \(([^)]*)\)/g,
  ];
  return patterns.flatMap((pattern) =>
    [...text.matchAll(pattern)].flatMap((m) => (m[1] ?? '').split(/,\s*/).filter((name) => name && name !== '...')),
  );
}

describe('controller names in the docs', () => {
  it('finds the mentions it checks', () => {
    expect(
      controllerMentions('a{controller="netpol"} [-]lballoc failed --health-window=route-sync=5m {"controller":"x"} Health window of one controller (netpol, lballoc, ...)'),
    ).toEqual(['netpol', 'lballoc', 'route-sync', 'x', 'netpol', 'lballoc']);
  });

  it('are the exported controller names, in docs/*.md, the README and the --help text', async () => {
    const known = await exportedControllerNames();
    expect(known.size, 'exported *_CONTROLLER constants').toBeGreaterThanOrEqual(2);
    // Health checks that are not controllers, and the plugins the docs build as examples.
    const allowed = new Set(['informers', 'example-firewall']);
    const sources: [string, string][] = [
      ['README.md', await readFile(join(WORKSPACE_ROOT, 'README.md'), 'utf8')],
      ['kube-router --help', helpText()],
    ];
    for (const name of (await readdir(docsDir)).filter((n) => n.endsWith('.md')).sort()) {
      sources.push([`docs/${name}`, await readFile(join(docsDir, name), 'utf8')]);
    }
    const wrong = sources.flatMap(([where, text]) =>
      controllerMentions(text)
        .filter((name) => !known.has(name) && !allowed.has(name))
        .map((name) => `${where}: ${name}`),
    );
    expect(wrong, `controller names: ${[...known.keys()].join(', ')}`).toEqual([]);
  }, 120_000);
});
