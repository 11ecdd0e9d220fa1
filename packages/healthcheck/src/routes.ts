import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import type { CheckResult, HealthRegistry } from './registry.js';

export interface HealthRoutesOptions {
  registry: HealthRegistry;
}

type Probe = 'healthz' | 'livez' | 'readyz';

/**
 * Serves the Kubernetes-style health endpoints. /healthz and /livez are liveness only: a controller whose syncs
 * fail but whose loop turns is healthy. /readyz adds the agent's readiness conditions and each controller's first
 * sync. `?verbose` lists every check; `/livez/<name>` and `/readyz/<name>` answer for one check.
 */
const healthRoutesPlugin: FastifyPluginAsync<HealthRoutesOptions> = async (app, { registry }) => {
  const checksFor = (probe: Probe): CheckResult[] =>
    probe === 'readyz' ? registry.readinessChecks() : registry.livenessChecks();

  for (const probe of ['healthz', 'livez', 'readyz'] as const) {
    app.get<{ Querystring: { verbose?: string } }>(`/${probe}`, async (request, reply) => {
      const verbose = request.query.verbose !== undefined;
      return answer(reply, probe, checksFor(probe), verbose);
    });
    app.get<{ Params: { name: string } }>(`/${probe}/:name`, async (request, reply) => {
      const check = checksFor(probe).find((c) => c.name === request.params.name);
      if (!check) return reply.code(404).type('text/plain').send(`no check named ${request.params.name}\n`);
      return reply
        .code(check.ok ? 200 : 500)
        .type('text/plain; charset=utf-8')
        .send(check.ok ? 'OK\n' : `${line(check)}\n`);
    });
  }
};

function line(check: CheckResult): string {
  return check.ok ? `[+]${check.name} ok` : `[-]${check.name} failed: ${check.reason ?? 'reason withheld'}`;
}

function answer(reply: FastifyReply, probe: Probe, checks: CheckResult[], verbose: boolean) {
  const failed = checks.filter((c) => !c.ok);
  reply.type('text/plain; charset=utf-8').header('cache-control', 'no-store');
  if (failed.length === 0 && !verbose) return reply.code(200).send('OK\n');
  // A failure always names the failed checks, so that the kubelet's event says which controller is stale.
  const shown = verbose ? checks : failed;
  const verdict = failed.length === 0 ? `${probe} check passed` : `${probe} check failed`;
  return reply
    .code(failed.length === 0 ? 200 : 500)
    .send(`${shown.map(line).join('\n')}\n${verdict}\n`);
}

export const healthRoutes = fp(healthRoutesPlugin, { name: '@kube-router/healthcheck', fastify: '5.x' });
