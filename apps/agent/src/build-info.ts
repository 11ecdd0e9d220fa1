import { readFileSync } from 'node:fs';
import { Gauge, type Registry } from 'prom-client';

export interface BuildInfo {
  /** The agent package's version. */
  version: string;
  /** The Node.js runtime (kube-router's `goversion` label counterpart). */
  nodeversion: string;
  /** The TypeScript compiler the agent is built with (pinned in its package.json). */
  typescriptversion: string;
}

/** What kube_router_build_info reports, read from the agent's own package.json and the runtime. */
export function buildInfo(): BuildInfo {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
    devDependencies?: Record<string, string>;
  };
  return {
    version: pkg.version,
    nodeversion: process.version,
    typescriptversion: pkg.devDependencies?.typescript ?? 'unknown',
  };
}

/**
 * kube-router's `kube_router_build_info` gauge: always 1, the build in its labels, so that a dashboard can tell which
 * agents run which version (`count by (version) (kube_router_build_info)`).
 */
export function registerBuildInfo(registry: Registry, info: BuildInfo = buildInfo()): void {
  const gauge = new Gauge({
    name: 'kube_router_build_info',
    help: 'Expose version and other build information',
    labelNames: ['version', 'nodeversion', 'typescriptversion'],
    registers: [registry],
  });
  gauge.set({ ...info }, 1);
}
