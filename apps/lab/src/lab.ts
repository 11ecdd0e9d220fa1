/**
 * `npm start`: the agent against an embedded cluster. It starts the embedded API server seeded with lab/cluster.yaml,
 * a network-namespace lab node that plays the kubelet for `lab-node` (when run as root with iproute2), writes a
 * kubeconfig, and runs the kube-router CLI against it with the lab's defaults; extra arguments are kube-router flags.
 * It prints one line each: `KUBECONFIG=<path>`, the health URL and the metrics URL, then runs until interrupted.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { createKubeContext, loadKubeConfig } from '@kube-router/kube';
import { loadManifestFiles, startApiServer, startLab, type ApiServer, type Lab } from '@kube-router/testkit';
import { environmentFor, runCli } from '@kube-router/agent';
import { labCatalog } from './lab-catalog.js';

const LAB_NODE = 'lab-node';
// The identity and namespace of leader election, as a DaemonSet's downward API would set them.
process.env.POD_NAME ??= 'kube-router-lab';
process.env.POD_NAMESPACE ??= 'kube-system';
const here = dirname(fileURLToPath(import.meta.url));
const log = pino({ base: { component: 'lab' } });

const workdir = await mkdtemp(join(tmpdir(), 'kube-router-lab-'));
let server: ApiServer | undefined = undefined;
let lab: Lab | undefined;
const cleanup = async () => {
  await lab?.stop();
  await server?.close();
  await rm(workdir, { recursive: true, force: true });
};
// Until the agent's own handlers take over, an interrupt still removes the namespaces and processes made so far.
const interruptSetup = () => void cleanup().finally(() => process.exit(130));
process.once('SIGINT', interruptSetup);
process.once('SIGTERM', interruptSetup);

server = await startApiServer({
  port: Number(process.env.LAB_API_PORT ?? 0),
  seed: await loadManifestFiles([join(here, '../lab/cluster.yaml')]),
});
const kubeconfig = await server.writeKubeconfig(join(workdir, 'kubeconfig'));
if (process.getuid?.() === 0) {
  try {
    lab = await startLab({ apiServer: server, nodeName: LAB_NODE, podCidrs: ['10.244.0.0/24', 'fd00:10:244::/64'] });
    // The seeded pods run before the agent starts, so that its first sync sees them with their addresses.
    const seeded = server.list('v1', 'Pod').filter((pod) => (pod.spec as { nodeName?: string })?.nodeName === LAB_NODE);
    await Promise.all(seeded.map((pod) => lab!.waitForPod({ namespace: pod.metadata.namespace ?? 'default', name: pod.metadata.name ?? '' })));
  } catch (error) {
    log.warn({ err: error }, 'the network-namespace lab did not start: running without a dataplane');
    await lab?.stop();
    lab = undefined;
  }
} else {
  log.warn('not root: running without the network-namespace lab (no pods, no firewall)');
}
process.off('SIGINT', interruptSetup);
process.off('SIGTERM', interruptSetup);

const catalog = labCatalog({ netns: lab?.nodeNetns });
let exitCode: number;
try {
  exitCode = await runCli(
    [
      `--run-firewall=${lab !== undefined && catalog.firewall !== undefined}`,
      '--run-service-proxy=false',
      '--run-router=false',
      '--run-loadbalancer=true',
      '--loadbalancer-ip-range=10.255.0.0/24',
      '--loadbalancer-ip-range=fd00:255::/120',
      '--enable-ipv6=true',
      '--health-port=20244',
      '--metrics-port=20245',
      ...process.argv.slice(2),
    ],
    {
      catalog,
      env: { ...process.env, NODE_NAME: LAB_NODE },
      environment: (config, logger, metrics) =>
        Promise.resolve(
          environmentFor(
            createKubeContext({ kubeConfig: loadKubeConfig({ kubeconfig, env: {} }), nodeName: config.nodeName, logger, metrics }),
            config,
          ),
        ),
      onStarted(agent) {
        process.stdout.write(`KUBECONFIG=${kubeconfig}\n`);
        if (agent.healthUrl) process.stdout.write(`${agent.healthUrl}/healthz\n`);
        if (agent.metricsUrl) process.stdout.write(`${agent.metricsUrl}\n`);
      },
    },
  );
} finally {
  // Ctrl-C reaches every process of the group and wrappers relay it again: a signal arriving now must not kill the
  // process halfway through removing the lab.
  const holdOff = () => log.info('still removing the lab');
  process.on('SIGINT', holdOff);
  process.on('SIGTERM', holdOff);
  await cleanup();
}
process.exit(exitCode);
