/*
 * Compile time of the policy model on a large cluster: 5,000 pods (200 on this node), 1,000 policies, dual-stack.
 * Prints times and ratios measured in this run; there is no pass/fail. Times are CPU time of this process (user +
 * system, medians), which other load on the machine disturbs less than wall time.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { PolicyCompiler } from '../src/index.js';
import type { NamespaceLike, NetworkPolicyLike, PodLike } from '../src/index.js';

const NODE = 'node-00';
const NODES = 25;
const NAMESPACES = 50;
const PODS = 5_000;
const APPS = 20;

function namespaces(): NamespaceLike[] {
  return Array.from({ length: NAMESPACES }, (_, i) => ({
    metadata: {
      name: `ns-${i}`,
      labels: {
        'kubernetes.io/metadata.name': `ns-${i}`,
        team: `team-${i % 10}`,
        env: ['prod', 'dev', 'staging'][i % 3] as string,
      },
    },
  }));
}

function makePod(index: number, labels?: Record<string, string>): PodLike {
  const namespace = `ns-${index % NAMESPACES}`;
  const ipv4 = `10.${Math.floor(index / 65536) + 1}.${Math.floor(index / 256) % 256}.${index % 256}`;
  const ips = index % 2 === 0 ? [ipv4, `fd00::${index.toString(16)}`] : [ipv4];
  return {
    metadata: {
      namespace,
      name: `pod-${index}`,
      labels: labels ?? {
        app: `app-${index % APPS}`,
        tier: ['frontend', 'backend', 'db'][index % 3] as string,
        release: `r${index % 7}`,
      },
    },
    spec: {
      nodeName: `node-${String(index % NODES).padStart(2, '0')}`,
      containers: [
        {
          ports: [
            { name: 'http', containerPort: 8000 + (index % 5) },
            { name: 'metrics', containerPort: 9090 },
          ],
        },
      ],
    },
    status: { phase: 'Running', podIP: ips[0], podIPs: ips.map((ip) => ({ ip })) },
  };
}

function makePolicy(index: number): NetworkPolicyLike {
  const namespace = `ns-${index % NAMESPACES}`;
  const app = `app-${index % APPS}`;
  const peerApp = `app-${(index * 7) % APPS}`;
  return {
    metadata: { namespace, name: `policy-${index}` },
    spec: {
      podSelector: { matchLabels: { app } },
      policyTypes: index % 3 === 0 ? ['Ingress', 'Egress'] : ['Ingress'],
      ingress: [
        { from: [{ podSelector: { matchLabels: { app: peerApp } } }], ports: [{ port: 'http' }, { port: 8443 }] },
        {
          from: [
            {
              namespaceSelector: { matchLabels: { team: `team-${index % 10}` } },
              podSelector: { matchExpressions: [{ key: 'tier', operator: 'In', values: ['frontend', 'backend'] }] },
            },
            { ipBlock: { cidr: '192.168.0.0/16', except: [`192.168.${index % 256}.0/24`] } },
          ],
          ports: [
            { protocol: 'TCP', port: 30000, endPort: 32767 },
            { protocol: 'UDP', port: 53 },
          ],
        },
      ],
      egress:
        index % 3 === 0
          ? [
              {
                to: [
                  { namespaceSelector: { matchLabels: { env: 'prod' } }, podSelector: { matchLabels: { tier: 'db' } } },
                ],
                ports: [{ port: 'http' }],
              },
              { ports: [{ protocol: 'UDP', port: 53 }] },
            ]
          : [],
    },
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

function time(run: () => void): number {
  const started = process.cpuUsage();
  run();
  const used = process.cpuUsage(started);
  return (used.user + used.system) / 1000;
}

interface Scenario {
  readonly full: number;
  readonly unchanged: number;
  readonly remotePeerLabel: number;
  readonly remotePeerRecompiled: number;
  readonly localPodLabel: number;
  readonly localPodRecompiled: number;
  readonly unrelatedPodLabel: number;
  readonly policies: number;
  readonly localPods: number;
}

function scenario(policyCount: number, rounds = 5): Scenario {
  const pods = Array.from({ length: PODS }, (_, i) => makePod(i));
  const nsList = namespaces();
  const policies = Array.from({ length: policyCount }, (_, i) => makePolicy(i));
  const full: number[] = [];
  const unchanged: number[] = [];
  const remote: number[] = [];
  const local: number[] = [];
  const unrelated: number[] = [];
  let remoteRecompiled = 0;
  let localRecompiled = 0;
  let localPods = 0;
  for (let round = 0; round < rounds; round++) {
    const compiler = new PolicyCompiler({ nodeName: NODE });
    full.push(time(() => (localPods = compiler.compile({ pods, namespaces: nsList, policies }).pods.length)));
    unchanged.push(time(() => compiler.compile({ pods, namespaces: nsList, policies })));

    // pod-1 runs on node-01 and is a peer (app-1) of some policies.
    const remotePeer = [...pods];
    remotePeer[1] = makePod(1, { app: 'app-3', tier: 'backend', release: 'r1' });
    remote.push(time(() => compiler.compile({ pods: remotePeer, namespaces: nsList, policies })));
    remoteRecompiled = compiler.lastStats.policiesRecompiled;

    // pod-25 runs on this node.
    const localPod = [...remotePeer];
    localPod[25] = makePod(25, { app: 'app-7', tier: 'frontend', release: 'r4' });
    local.push(time(() => compiler.compile({ pods: localPod, namespaces: nsList, policies })));
    localRecompiled = compiler.lastStats.policiesRecompiled;

    // A remote pod whose new labels no selector reads.
    const unrelatedPod = [...localPod];
    unrelatedPod[2] = makePod(2, { app: 'app-2', tier: 'db', release: 'r2', build: `${round}` });
    unrelated.push(time(() => compiler.compile({ pods: unrelatedPod, namespaces: nsList, policies })));
  }
  return {
    full: median(full),
    unchanged: median(unchanged),
    remotePeerLabel: median(remote),
    remotePeerRecompiled: remoteRecompiled,
    localPodLabel: median(local),
    localPodRecompiled: localRecompiled,
    unrelatedPodLabel: median(unrelated),
    policies: policyCount,
    localPods,
  };
}

/**
 * The cases where one valid policy used to cost (peers x pods) on every pod change anywhere: an egress rule with many
 * ipBlock peers and a named port, and many policies allowing egress to any peer on a named port. Each measures the
 * recompile after one pod change: a remote pod outside every block relabelled, and a pod inside the blocks moved to a
 * new address (the change that has to re-resolve the named port).
 */
interface PodChangeScenario {
  readonly label: string;
  readonly full: number;
  readonly remoteRelabel: number;
  readonly peerMoved: number;
  readonly recompiled: number;
}

/** `count` /32 blocks; every fourth one covers a pod's IPv4 address, the others lie outside the pod network. */
function ipBlocks(count: number): { ipBlock: { cidr: string } }[] {
  return Array.from({ length: count }, (_, i) => {
    const podIndex = i / 4;
    const cidr =
      i % 4 === 0
        ? `10.1.${Math.floor(podIndex / 256) % 20}.${podIndex % 256}/32`
        : `100.${64 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}/32`;
    return { ipBlock: { cidr } };
  });
}

function blocksPolicy(blocks: number): NetworkPolicyLike[] {
  return [
    {
      metadata: { namespace: 'ns-0', name: `egress-${blocks}-blocks` },
      spec: {
        podSelector: {},
        policyTypes: ['Egress'],
        egress: [{ to: ipBlocks(blocks), ports: [{ port: 'http' }] }],
      },
    },
  ];
}

function anyPeerPolicies(count: number): NetworkPolicyLike[] {
  return Array.from({ length: count }, (_, i) => ({
    metadata: { namespace: `ns-${i % NAMESPACES}`, name: `egress-any-${i}` },
    spec: {
      podSelector: { matchLabels: { app: `app-${i % APPS}` } },
      policyTypes: ['Egress'],
      egress: [{ ports: [{ port: 'http' }] }],
    },
  }));
}

const CHANGES_PER_ROUND = 5;

function podChangeScenario(label: string, policies: NetworkPolicyLike[], rounds: number): PodChangeScenario {
  const pods = Array.from({ length: PODS }, (_, i) => makePod(i));
  const nsList = namespaces();
  const full: number[] = [];
  const remote: number[] = [];
  const moved: number[] = [];
  let recompiled = 0;
  for (let round = 0; round < rounds; round++) {
    const compiler = new PolicyCompiler({ nodeName: NODE });
    full.push(time(() => compiler.compile({ pods, namespaces: nsList, policies })));
    // Several changes per compiler, so that the medians show the steady state rather than the first, cold run.
    let current = pods;
    for (let change = 0; change < CHANGES_PER_ROUND; change++) {
      // pod-4001 runs on node-01, is covered by no block (its address is beyond the first 250 pods') and gets a label.
      const relabelled = [...current];
      relabelled[4001] = makePod(4001, { app: 'app-1', tier: 'backend', release: `x${round}-${change}` });
      remote.push(time(() => compiler.compile({ pods: relabelled, namespaces: nsList, policies })));
      // pod-4 (inside a block, with the named port) moves to a new address inside another block.
      const movedPods = [...relabelled];
      const address = `10.1.0.${200 + change}`;
      movedPods[4] = { ...makePod(4), status: { phase: 'Running', podIP: address, podIPs: [{ ip: address }] } };
      moved.push(time(() => compiler.compile({ pods: movedPods, namespaces: nsList, policies })));
      current = movedPods;
    }
    recompiled = compiler.lastStats.policiesRecompiled;
  }
  return { label, full: median(full), remoteRelabel: median(remote), peerMoved: median(moved), recompiled };
}

const LABEL_WIDTH = 40;
const ms = (value: number) => `${value.toFixed(1)} ms`.padStart(9);
// Warm the JIT first so that the first measured compile is not mostly compilation of the compiler.
scenario(200, 1);
const base = scenario(1_000);
const doubled = scenario(2_000, 3);

console.log(
  `netpol compile: ${PODS} pods (${base.localPods} local), ${NAMESPACES} namespaces, dual-stack; CPU time, medians`,
);
for (const result of [base, doubled]) {
  console.log(`\n${result.policies} policies`);
  console.log(`  ${'full compile'.padEnd(LABEL_WIDTH)}${ms(result.full)}`);
  console.log(
    `  ${'recompile, nothing changed'.padEnd(LABEL_WIDTH)}${ms(result.unchanged)}  (${(
      result.unchanged / result.full
    ).toFixed(3)} of full)`,
  );
  console.log(
    `  ${'recompile, one remote peer relabelled'.padEnd(LABEL_WIDTH)}${ms(result.remotePeerLabel)}  (${(
      result.remotePeerLabel / result.full
    ).toFixed(3)} of full; ${result.remotePeerRecompiled}/${result.policies} policies resolved again)`,
  );
  console.log(
    `  ${'recompile, one local pod relabelled'.padEnd(LABEL_WIDTH)}${ms(result.localPodLabel)}  (${(
      result.localPodLabel / result.full
    ).toFixed(3)} of full; ${result.localPodRecompiled}/${result.policies} policies resolved again)`,
  );
  console.log(
    `  ${'recompile, one unrelated pod changed'.padEnd(LABEL_WIDTH)}${ms(result.unrelatedPodLabel)}  (${(
      result.unrelatedPodLabel / result.full
    ).toFixed(3)} of full)`,
  );
}
console.log(
  `\nscaling 1,000 -> 2,000 policies: full compile x${(doubled.full / base.full).toFixed(2)}, ` +
    `one-pod recompile x${(doubled.remotePeerLabel / base.remotePeerLabel).toFixed(2)} ` +
    `(the change touches ${base.remotePeerRecompiled} vs ${doubled.remotePeerRecompiled} policies; the others are only checked against the changed pod)`,
);

const BLOCK_ROUNDS = Number(process.env.BLOCK_ROUNDS ?? 3);
const podChangeScenarios = [
  podChangeScenario('1 policy, egress to 1,000 ipBlocks on a named port', blocksPolicy(1_000), BLOCK_ROUNDS),
  podChangeScenario('1 policy, egress to 20,000 ipBlocks on a named port', blocksPolicy(20_000), BLOCK_ROUNDS),
  podChangeScenario('500 policies, egress to any peer on a named port', anyPeerPolicies(500), BLOCK_ROUNDS),
];
console.log(`\nnamed ports beyond selectors (${PODS} pods): one pod change must not cost peers x pods`);
for (const result of podChangeScenarios) {
  console.log(`  ${result.label}`);
  console.log(`    ${'full compile'.padEnd(LABEL_WIDTH + 4)}${ms(result.full)}`);
  console.log(
    `    ${'remote pod outside the blocks relabelled'.padEnd(LABEL_WIDTH + 4)}${ms(result.remoteRelabel)}  (${(
      result.remoteRelabel / result.full
    ).toFixed(3)} of full)`,
  );
  console.log(
    `    ${'peer pod moved to a new address'.padEnd(LABEL_WIDTH + 4)}${ms(result.peerMoved)}  (${(
      result.peerMoved / result.full
    ).toFixed(3)} of full; ${result.recompiled} policies resolved again)`,
  );
}

/** The longest the event loop went without a turn while `run` compiled. */
async function longestBlock(run: () => unknown): Promise<number> {
  let last = performance.now();
  let longest = 0;
  let ticking = true;
  const tick = () => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
    if (ticking) setImmediate(tick);
  };
  setImmediate(tick);
  await run();
  ticking = false;
  longest = Math.max(longest, performance.now() - last);
  return longest;
}

{
  const pods = Array.from({ length: PODS }, (_, i) => makePod(i));
  const nsList = namespaces();
  const policies = Array.from({ length: 1_000 }, (_, i) => makePolicy(i));
  const input = { pods, namespaces: nsList, policies };
  const syncBlocks: number[] = [];
  const asyncBlocks: number[] = [];
  for (let round = 0; round < 3; round++) {
    syncBlocks.push(await longestBlock(() => new PolicyCompiler({ nodeName: NODE }).compile(input)));
    asyncBlocks.push(await longestBlock(() => new PolicyCompiler({ nodeName: NODE }).compileAsync(input)));
  }
  console.log(
    `\nfull compile of ${PODS} pods and 1,000 policies: longest the event loop waits for a turn (wall time, medians)`,
  );
  console.log(`  ${'compile()'.padEnd(LABEL_WIDTH + 4)}${ms(median(syncBlocks))}`);
  console.log(`  ${'compileAsync(), 10 ms slices'.padEnd(LABEL_WIDTH + 4)}${ms(median(asyncBlocks))}`);
}

/**
 * What the compiler keeps of each pod (its view and index entries) for as long as the pod exists, beside the pod
 * object the informer holds: heap in use after full collections, with and without a compile of the pods.
 */
{
  setFlagsFromString('--expose-gc');
  const collect = runInNewContext('gc') as () => void;
  const heapAfterCollection = () => {
    collect();
    collect();
    return process.memoryUsage().heapUsed;
  };
  const empty = heapAfterCollection();
  const pods = Array.from({ length: PODS }, (_, i) => makePod(i));
  const withPods = heapAfterCollection();
  const compiler = new PolicyCompiler({ nodeName: NODE });
  compiler.compile({ pods, namespaces: namespaces(), policies: [] });
  const withIndex = heapAfterCollection();
  const perPod = (withIndex - withPods) / PODS;
  console.log(`\nheap the compiler keeps per pod (${PODS} pods, no policies), after full collections`);
  console.log(`  ${'per pod'.padEnd(LABEL_WIDTH + 4)}${`${perPod.toFixed(0)} B`.padStart(9)}  (${(perPod / ((withPods - empty) / PODS)).toFixed(2)}x the pod object's own)`);
}
