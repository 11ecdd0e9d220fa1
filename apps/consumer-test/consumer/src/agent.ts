// The custom assembly: lballoc plus the team's own plugin, wired to the cluster in KUBECONFIG. It prints its URLs as
// one JSON line once it runs, and stops cleanly on SIGTERM.
import { connectToCluster, createAgent } from '@kube-router/agent';
import { lballocPlugin } from '@kube-router/lballoc';
import { namespaceCountPlugin } from './namespace-count.js';

const nodeName = process.env.NODE_NAME ?? 'consumer-node';
const cluster = connectToCluster({ nodeName, cacheSyncTimeoutMs: 20_000 });
const agent = await createAgent({
  ...cluster,
  plugins: [
    { plugin: lballocPlugin, options: { ranges: ['10.96.0.0/28'] } },
    { plugin: namespaceCountPlugin, options: { syncPeriodMs: 1_000 } },
  ],
  options: { nodeName, health: { addr: '127.0.0.1', port: 0 }, metrics: { addr: '127.0.0.1', port: 0 } },
});
await agent.start();
console.log(JSON.stringify({ healthUrl: agent.healthUrl, metricsUrl: agent.metricsUrl }));
process.once('SIGTERM', () => {
  void agent
    .stop()
    .then(() => cluster.close())
    .then(() => process.exit(0));
});
