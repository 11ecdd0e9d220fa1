/**
 * A cluster of a chosen size for the scale bench and the leak test: pods spread over namespaces of 100, 200 of them
 * on the node under test, one policy per five pods (20 per namespace), and churn at a constant size (pods replaced,
 * labels flipped, policies updated) that leaves the cluster as large as it found it. ServiceWorld and NodeWorld do
 * the same for the other plugins' churn (plugin-churn.ts): Services with their EndpointSlices, and other Nodes.
 */
import { peerPodSetName, ruleSetKey } from '@kube-router/netpol-iptables';
import type { ApiServer, KubeObjectInput } from '@kube-router/testkit';
import type { LabelProbe } from './measured-agent.js';

export const SCALE_NODE = 'sc-node';
const PODS_PER_NAMESPACE = 100;
const APPS = 20;
const TIERS = 4;
const REMOTE_NODES = 250;

export interface ScaleShape {
  pods: number;
  policies: number;
  /** Pods on SCALE_NODE; the rest are on other nodes and only ever appear in peer sets. */
  localPods: number;
}

/** The sizes: 1k / 10k / 50k pods with one policy per five pods, 200 pods on the node under test. */
export function scaleShape(pods: number): ScaleShape {
  return { pods, policies: Math.floor(pods / 5), localPods: Math.min(200, pods) };
}

interface PodSlot {
  index: number;
  namespace: string;
  /** Bumped when churn replaces the pod: a new name and a new address, as a Deployment's rollout gives. */
  generation: number;
  app: number;
  /** Label flips toggle between the pod's own app and the next one. */
  flipped: boolean;
  local: boolean;
  tier: number;
}

/** The generated cluster and the state its churn has reached, so that every object can be rebuilt on demand. */
export class ScaleWorld {
  readonly shape: ScaleShape;
  readonly namespaces: number;
  readonly #api: ApiServer;
  readonly #slots: PodSlot[] = [];
  readonly #policyRevision: number[] = [];
  #replaceCursor = 0;
  #flipCursor = 0;
  #policyCursor = 0;

  constructor(api: ApiServer, shape: ScaleShape) {
    this.#api = api;
    this.shape = shape;
    this.namespaces = Math.max(1, Math.ceil(shape.pods / PODS_PER_NAMESPACE));
    const localEvery = shape.localPods > 0 ? Math.max(1, Math.floor(shape.pods / shape.localPods)) : Infinity;
    let localCount = 0;
    for (let index = 0; index < shape.pods; index++) {
      const local = index % localEvery === 0 && localCount < shape.localPods;
      // Local pods cycle through the tiers, so that the policies of every size select a like share of them.
      const tier = local ? localCount++ % TIERS : index % TIERS;
      this.#slots.push({ index, namespace: `ns-${Math.floor(index / PODS_PER_NAMESPACE)}`, generation: 0, app: index % APPS, flipped: false, local, tier });
    }
    for (let k = 0; k < shape.policies; k++) this.#policyRevision.push(0);
  }

  /** Creates the namespaces, the nodes, every pod and every policy. */
  seed(): void {
    for (let n = 0; n < this.namespaces; n++) {
      this.#api.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: `ns-${n}`, labels: { team: `t-${n % 5}` } } });
    }
    for (const name of [SCALE_NODE, ...Array.from({ length: REMOTE_NODES }, (_, i) => `sc-remote-${i}`)]) {
      this.#api.create({ apiVersion: 'v1', kind: 'Node', metadata: { name }, spec: {}, status: {} });
    }
    for (const slot of this.#slots) this.#api.create(this.#podObject(slot));
    for (let k = 0; k < this.shape.policies; k++) this.#api.create(this.#policyObject(k));
  }

  /** Policies whose pod selector takes at least one local pod: the ones the node renders rules for. */
  policiesSelectingLocalPods(): number[] {
    const selected = new Set(this.#slots.filter((slot) => slot.local).map((slot) => `${slot.namespace}/${slot.tier}`));
    return this.#policyRevision.map((_, k) => k).filter((k) => selected.has(`${this.#policyNamespace(k)}/${this.#policyTier(k)}`));
  }

  /**
   * One round of churn at a constant size: `replace` pods deleted and created again under a new name and address,
   * `flip` pods relabelled (a flipped pod flips back the next time round), `update` policies given other ports.
   * Local pods are left in place (the label-change probe and the rules per local pod depend on them).
   */
  churn(counts: { replace: number; flip: number; update: number }): void {
    const remote = this.#slots.filter((slot) => !slot.local);
    if (remote.length === 0) return;
    for (let i = 0; i < counts.replace; i++) {
      const slot = remote[this.#replaceCursor++ % remote.length]!;
      this.#api.delete('v1', 'Pod', slot.namespace, podName(slot));
      slot.generation++;
      this.#api.create(this.#podObject(slot));
    }
    for (let i = 0; i < counts.flip; i++) {
      const slot = remote[(this.#flipCursor++ * 7) % remote.length]!;
      slot.flipped = !slot.flipped;
      this.#api.patch('v1', 'Pod', slot.namespace, podName(slot), { metadata: { labels: { app: this.#appLabel(slot) } } }, 'merge');
    }
    for (let i = 0; i < counts.update && this.shape.policies > 0; i++) {
      const k = this.#policyCursor++ % this.shape.policies;
      this.#policyRevision[k]!++;
      const current = this.#api.get('networking.k8s.io/v1', 'NetworkPolicy', this.#policyNamespace(k), `policy-${k}`)!;
      this.#api.update({ ...this.#policyObject(k), metadata: { ...current.metadata } });
    }
  }

  /**
   * A probe of event-to-enforced: a remote pod that policy `k`'s first ingress peer does not select yet, the label
   * that makes it selected, and the IPv4 set it then joins. `apply()` relabels it, `undo()` puts the label back.
   */
  labelProbe(k: number, round: number): LabelProbe {
    const namespace = this.#policyNamespace(k);
    const wanted = k % APPS;
    // Not already a peer: neither the app the first peer selects nor the one the cross-namespace peer selects.
    const peers = new Set([wanted, (k + 1) % APPS]);
    const candidates = this.#slots.filter((slot) => slot.namespace === namespace && !slot.local && !peers.has(this.#appOf(slot)));
    const slot = candidates[round % candidates.length];
    if (!slot) throw new Error(`no remote pod in ${namespace} to relabel`);
    const set = peerPodSetName(`${namespace}/policy-${k}`, 'ingress', this.#firstRuleKey(k), 'ipv4');
    const patch = (app: number) =>
      this.#api.patch('v1', 'Pod', slot.namespace, podName(slot), { metadata: { labels: { app: `app-${app}` } } }, 'merge');
    return { ip: podIps(slot).v4, set, apply: () => patch(wanted), undo: () => patch(this.#appOf(slot)) };
  }

  #appOf(slot: PodSlot): number {
    return slot.flipped ? (slot.app + 1) % APPS : slot.app;
  }

  #appLabel(slot: PodSlot): string {
    return `app-${this.#appOf(slot)}`;
  }

  #podObject(slot: PodSlot): KubeObjectInput {
    const ips = podIps(slot);
    return {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        namespace: slot.namespace,
        name: podName(slot),
        labels: { app: this.#appLabel(slot), tier: `tier-${slot.tier}`, 'pod-template-hash': `h${slot.generation}` },
      },
      spec: {
        nodeName: slot.local ? SCALE_NODE : `sc-remote-${slot.index % REMOTE_NODES}`,
        containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10', ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }] }],
      },
      status: { phase: 'Running', podIP: ips.v4, podIPs: [{ ip: ips.v4 }, { ip: ips.v6 }] },
    };
  }

  #policyNamespace(k: number): string {
    return `ns-${k % this.namespaces}`;
  }

  #policyTier(k: number): number {
    return Math.floor(k / this.namespaces) % TIERS;
  }

  #policyPort(k: number): number {
    return 80 + ((k + this.#policyRevision[k]!) % 7);
  }

  #firstRuleKey(k: number): string {
    return ruleSetKey({ index: 0, allPorts: false, ports: [{ protocol: 'TCP', port: this.#policyPort(k) }], namedPorts: [{ name: 'http', protocol: 'TCP' }] });
  }

  /** Policy k: one tier of its namespace, ingress from an app there (and, for some, from other namespaces or a CIDR). */
  #policyObject(k: number): KubeObjectInput {
    const from: unknown[] = [{ podSelector: { matchLabels: { app: `app-${k % APPS}` } } }];
    if (k % 5 === 0) from.push({ namespaceSelector: { matchLabels: { team: `t-${k % 5}` } }, podSelector: { matchLabels: { app: `app-${(k + 1) % APPS}` } } });
    if (k % 10 === 0) from.push({ ipBlock: { cidr: '192.168.0.0/16', except: ['192.168.1.0/24'] } });
    const spec: Record<string, unknown> = {
      podSelector: { matchLabels: { tier: `tier-${this.#policyTier(k)}` } },
      ingress: [{ from, ports: [{ port: this.#policyPort(k) }, { port: 'http' }] }],
    };
    if (k % 4 === 0) {
      spec.policyTypes = ['Ingress', 'Egress'];
      spec.egress = [{ to: [{ podSelector: { matchLabels: { app: `app-${(k + 2) % APPS}` } } }], ports: [{ port: 53, protocol: 'UDP' }] }];
    }
    return { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace: this.#policyNamespace(k), name: `policy-${k}` }, spec };
  }
}

function podName(slot: PodSlot): string {
  return `pod-${slot.index % PODS_PER_NAMESPACE}-g${slot.generation}`;
}

/** Unique per pod and generation: the index in the low 16 bits, the generation in the second octet. */
function podIps(slot: PodSlot): { v4: string; v6: string } {
  const high = 128 + (slot.generation % 64);
  return { v4: `10.${high}.${(slot.index >> 8) & 255}.${slot.index & 255}`, v6: `fd00:${high.toString(16)}::${slot.index.toString(16)}` };
}

/** Where ServiceWorld's objects live. */
export const CHURN_NAMESPACE = 'churn';
const SERVICE_PORT = 80;
const TARGET_PORT = 8080;

export interface ServiceShape {
  services: number;
  /** Endpoints per Service, in one EndpointSlice each; 0: no slices (what lballoc reads is the Services alone). */
  endpoints: number;
  type: 'ClusterIP' | 'LoadBalancer';
}

interface ServiceSlot {
  index: number;
  /** Bumped when churn replaces the Service: a new name, cluster IP and endpoints, as a redeployment gives. */
  generation: number;
  /** Bumped when churn moves the Service's endpoints (a rollout of its pods). */
  endpointsVersion: number;
}

/** The last Service a churn round made: its slice (if any) was the round's last write. */
export interface ServiceProbe {
  name: string;
  clusterIp: string;
  port: number;
  /** Its first endpoint, or undefined without slices. */
  endpointIp: string | undefined;
  targetPort: number;
}

/**
 * Services (and their EndpointSlices, written as kube-controller-manager would) for the proxies' and lballoc's churn:
 * a constant number of them, churn replacing some under new names, cluster IPs and endpoints, and moving the
 * endpoints of others. Up to 1,000 Services, IPv4.
 */
export class ServiceWorld {
  readonly shape: ServiceShape;
  readonly #api: ApiServer;
  readonly #slots: ServiceSlot[] = [];
  #replaceCursor = 0;
  #updateCursor = 0;

  constructor(api: ApiServer, shape: ServiceShape) {
    if (shape.services > 1_000 || shape.endpoints > 8) throw new Error('ServiceWorld holds up to 1,000 Services of up to 8 endpoints');
    this.#api = api;
    this.shape = shape;
    for (let index = 0; index < shape.services; index++) this.#slots.push({ index, generation: 0, endpointsVersion: 0 });
  }

  /** The namespace, this node (its address: the proxies read it) and every Service with its slice. */
  seed(nodeAddress: string): void {
    this.#api.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: CHURN_NAMESPACE } });
    this.#api.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: SCALE_NODE }, spec: {}, status: { addresses: [{ type: 'InternalIP', address: nodeAddress }] } });
    for (const slot of this.#slots) this.#createService(slot);
  }

  /**
   * One round at a constant size: `update` Services get other endpoints, then `replace` Services are deleted (with
   * their slices) and made again under new names. Returns the last one made, whose slice is the round's last write.
   */
  churn(counts: { replace: number; update: number }): ServiceProbe {
    for (let i = 0; i < counts.update && this.shape.endpoints > 0; i++) {
      const slot = this.#slots[(this.#updateCursor++ * 7) % this.#slots.length]!;
      slot.endpointsVersion++;
      this.#api.upsert(this.#sliceObject(slot));
    }
    let last: ServiceSlot | undefined;
    for (let i = 0; i < counts.replace; i++) {
      last = this.#slots[this.#replaceCursor++ % this.#slots.length]!;
      if (this.shape.endpoints > 0) this.#api.delete('discovery.k8s.io/v1', 'EndpointSlice', CHURN_NAMESPACE, `${serviceName(last)}-a`);
      this.#api.delete('v1', 'Service', CHURN_NAMESPACE, serviceName(last));
      last.generation++;
      last.endpointsVersion = 0;
      this.#createService(last);
    }
    if (!last) throw new Error('a churn round replaces at least one Service');
    return this.#probe(last);
  }

  #createService(slot: ServiceSlot): void {
    this.#api.create({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { namespace: CHURN_NAMESPACE, name: serviceName(slot) },
      spec: {
        type: this.shape.type,
        clusterIP: clusterIp(slot),
        clusterIPs: [clusterIp(slot)],
        ports: [{ name: 'http', protocol: 'TCP', port: SERVICE_PORT, targetPort: TARGET_PORT }],
      },
    });
    if (this.shape.endpoints > 0) this.#api.create(this.#sliceObject(slot));
  }

  #sliceObject(slot: ServiceSlot): KubeObjectInput {
    return {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { namespace: CHURN_NAMESPACE, name: `${serviceName(slot)}-a`, labels: { 'kubernetes.io/service-name': serviceName(slot) } },
      addressType: 'IPv4',
      ports: [{ name: 'http', protocol: 'TCP', port: TARGET_PORT }],
      endpoints: endpointIps(slot, this.shape.endpoints).map((ip) => ({ addresses: [ip], conditions: { ready: true }, nodeName: `sc-remote-${slot.index % REMOTE_NODES}` })),
    };
  }

  #probe(slot: ServiceSlot): ServiceProbe {
    return { name: serviceName(slot), clusterIp: clusterIp(slot), port: SERVICE_PORT, endpointIp: endpointIps(slot, this.shape.endpoints)[0], targetPort: TARGET_PORT };
  }
}

function serviceName(slot: ServiceSlot): string {
  return `svc-${slot.index}-g${slot.generation}`;
}

/** The slot's place in the last two octets of its addresses: up to 250 per third octet, never .0 nor .255. */
function slotOctets(index: number): { third: number; fourth: number } {
  return { third: Math.floor(index / 250), fourth: (index % 250) + 1 };
}

/** In 10.96.0.0/12, unique per slot, and per generation for the next eight. */
function clusterIp(slot: ServiceSlot): string {
  const { third, fourth } = slotOctets(slot.index);
  return `10.${97 + (slot.generation % 8)}.${third}.${fourth}`;
}

/** In 10.128.0.0/11: the slot in the last two octets (the endpoint too in the third), generation and version in the second. */
function endpointIps(slot: ServiceSlot, count: number): string[] {
  const { third, fourth } = slotOctets(slot.index);
  return Array.from({ length: count }, (_, j) => `10.${128 + ((slot.generation * 4 + slot.endpointsVersion) % 32)}.${j * 4 + third}.${fourth}`);
}

interface NodeSlot {
  index: number;
  generation: number;
}

/** The pod CIDR a churn round gave a new Node, and the one it took away with the Node it deleted last. */
export interface NodeRouteProbe {
  added: string;
  removed: string;
}

/**
 * Other Nodes of the cluster, each with an IPv4 pod CIDR, for route-sync's churn: a constant number of them, churn
 * deleting some and adding Nodes with other names and pod CIDRs in their place (nodes replaced by an autoscaler).
 */
export class NodeWorld {
  readonly #api: ApiServer;
  readonly #slots: NodeSlot[] = [];
  readonly #address: string;
  #cursor = 0;

  /** `address`: every Node's InternalIP. Up to 1,024 Nodes. */
  constructor(api: ApiServer, nodes: number, address: string) {
    if (nodes > 1_024) throw new Error('NodeWorld holds up to 1,024 Nodes');
    this.#api = api;
    this.#address = address;
    for (let index = 0; index < nodes; index++) this.#slots.push({ index, generation: 0 });
  }

  /** This node (without a pod CIDR of its own here) and the others. */
  seed(): void {
    this.#api.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: SCALE_NODE }, spec: {}, status: { addresses: [{ type: 'InternalIP', address: this.#address }] } });
    for (const slot of this.#slots) this.#api.create(this.#nodeObject(slot));
  }

  churn(replace: number): NodeRouteProbe {
    let probe: NodeRouteProbe | undefined;
    for (let i = 0; i < replace; i++) {
      const slot = this.#slots[this.#cursor++ % this.#slots.length]!;
      const removed = podCidr(slot);
      this.#api.delete('v1', 'Node', undefined, nodeName(slot));
      slot.generation++;
      this.#api.create(this.#nodeObject(slot));
      probe = { added: podCidr(slot), removed };
    }
    if (!probe) throw new Error('a churn round replaces at least one Node');
    return probe;
  }

  #nodeObject(slot: NodeSlot): KubeObjectInput {
    return {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: nodeName(slot) },
      spec: { podCIDR: podCidr(slot), podCIDRs: [podCidr(slot)] },
      status: { addresses: [{ type: 'InternalIP', address: this.#address }] },
    };
  }
}

function nodeName(slot: NodeSlot): string {
  return `rn-${slot.index}-g${slot.generation}`;
}

/** A /26 in 10.160.0.0/11: the slot in the last two octets, the generation in the second. */
function podCidr(slot: NodeSlot): string {
  return `10.${160 + (slot.generation % 32)}.${slot.index >> 2}.${(slot.index & 3) * 64}/26`;
}
