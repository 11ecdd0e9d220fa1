import { spawn, type ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { describe } from 'vitest';
import { routeSyncServiceKey, ServiceRegistry, type Controller, type InjectedRoute } from '@kube-router/controller';
import { runControllerContractSuite } from '@kube-router/controller/contract';
import { HealthRegistry } from '@kube-router/healthcheck';
import { createKubeContext, KubeServices, loadKubeConfig } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import { freePort, labSkipReason, startApiServer, waitFor } from '@kube-router/testkit';
import pino from 'pino';
import { routingBgpPlugin } from './plugin.js';
import { createMesh, nodeObject } from './testing/mesh.js';
import { GobgpClient } from './gobgp-api.js';

const skipReason = labSkipReason('gobgpd');

// The faults are real: gobgpd (run by the test, the plugin drives it as an external speaker) is killed, so every API
// call is refused, or stopped with SIGSTOP, so every call hangs until the sync's timeout.
describe.skipIf(skipReason)(`routing-bgp contract${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  runControllerContractSuite({
    name: 'routing-bgp',
    hangBoundMs: 4_000,
    plugin: { plugin: routingBgpPlugin, validOptions: { clusterAsn: 65000, bgpPort: 1790, netns: 'tbgp-x', gobgpApiSocket: '/run/x.sock' } },
    async setup({ defer }) {
      const mesh = await createMesh(1);
      // Released after the test, last first, and also if the rest of the setup fails (a gobgpd that never answered).
      defer(() => mesh.teardown());
      const node = mesh.nodes[0]!;
      const server = await startApiServer({ port: 0 });
      defer(() => server.close());
      server.create(nodeObject(node));
      const socket = `${mesh.dir}/gobgpd.sock`;
      let gobgpd: ChildProcess | undefined;
      const startGobgpd = async () => {
        // A killed gobgpd leaves its socket file; the next one could not bind it.
        await rm(socket, { force: true });
        gobgpd = spawn('ip', ['netns', 'exec', node.netns, 'gobgpd', `--api-hosts=unix://${socket}`, '--pprof-disable'], { stdio: 'ignore' });
        const api = new GobgpClient({ target: `unix://${socket}` });
        try {
          await waitFor('gobgpd answers', () => api.waitReady(500).then(() => true), 10_000);
        } finally {
          api.close();
        }
      };
      const stopGobgpd = async () => {
        const child = gobgpd;
        gobgpd = undefined;
        if (!child || child.exitCode !== null) return;
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        await exited;
      };
      defer(stopGobgpd);
      await startGobgpd();

      const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
      const metrics = new AgentMetrics({ collectDefaultMetrics: false });
      const health = new HealthRegistry({ defaultGraceMs: 5_000 });
      const kube = createKubeContext({
        kubeConfig: loadKubeConfig({ kubeconfig: await server.writeKubeconfig(), env: {} }),
        nodeName: node.name,
        logger,
        metrics,
      });
      const services = new ServiceRegistry();
      services.provide(KubeServices, kube);
      const handed: InjectedRoute[][] = [];
      services.provide(routeSyncServiceKey, { setRoutes: (_owner, routes) => void handed.push([...routes]), wantedRoutes: () => handed.at(-1) ?? [] });
      const controller = routingBgpPlugin.create(
        { nodeName: node.name, logger, metrics, health, services },
        routingBgpPlugin.options.parse({
          manageGobgpd: false,
          gobgpApiSocket: socket,
          netns: node.netns,
          cniConfFile: node.cniConfFile,
          bgpPort: await freePort(),
          enablePodEgress: false,
          syncTimeoutMs: 1_500,
          apiTimeoutMs: 5_000,
        }),
      ) as Controller;
      await kube.informers.start({ cacheSyncTimeoutMs: 10_000 });
      let stopped = false;
      return {
        controller,
        health,
        metrics,
        faults: {
          fail: stopGobgpd,
          async hang() {
            stopped = true;
            gobgpd?.kill('SIGSTOP');
          },
          async heal() {
            if (stopped) {
              gobgpd?.kill('SIGCONT');
              stopped = false;
            }
            if (!gobgpd) await startGobgpd();
          },
        },
        async teardown() {
          await kube.informers.stop();
        },
      };
    },
  });
});
