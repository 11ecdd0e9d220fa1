// A one-shot probe client for namespaces without a pod agent (the node netns, say):
// `ip netns exec <netns> node probe-client.mjs <label> '<probes as JSON>'` prints the outcomes as JSON.
/* global process */
import { runProbes } from './probe-core.mjs';

const probes = JSON.parse(process.argv[3] ?? '[]');
process.stdout.write(`${JSON.stringify(await runProbes(probes))}\n`);
