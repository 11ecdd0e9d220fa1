import { defineServiceKey } from './controller.js';

/** A flow to a Service's address, as `kube-router explain` is asked about it. */
export interface ServiceFlow {
  /** The client's address; without it, every client's connections are listed. */
  readonly source?: string;
  /** The address the client connects to: a ClusterIP, a node address (NodePort), an externalIP or a LoadBalancer IP. */
  readonly destination: string;
  readonly port: number;
  readonly protocol: 'TCP' | 'UDP' | 'SCTP';
}

/** One backend of the Service the proxy programmed. */
export interface ServiceEndpointPath {
  readonly address: string;
  readonly port: number;
  /** The proxy's weight for it; 0 while it drains (graceful termination). */
  readonly weight: number;
}

/** A connection the kernel tracks for the flow: the endpoint that client connection was sent to. */
export interface ServiceConnectionPath {
  readonly client: { readonly address: string; readonly port: number };
  readonly endpoint: { readonly address: string; readonly port: number };
  /**
   * The kernel's state of it (`ESTABLISHED`, `TIME_WAIT`, `UDP`, ...). A ClientIP affinity template is an entry whose
   * client port is 0 (its state is `NONE` or, on recent kernels, `ASSURED`).
   */
  readonly state: string;
}

/** How the proxy carries a flow to a Service: which Service and port, how it balances, where connections went. */
export interface ServicePath {
  /** `namespace/name` of the Service. */
  readonly service: string;
  /** The Service port's name (empty when unnamed). */
  readonly portName: string;
  /** What the destination address is to the Service: `cluster-ip`, `node-port`, `external-ip`, `load-balancer`. */
  readonly kind: string;
  /** The proxy's own words for the kernel object that serves it, e.g. `IPVS TCP 10.96.0.10:80 rr`. */
  readonly via: string;
  readonly endpoints: readonly ServiceEndpointPath[];
  /** The kernel's connections of this flow (of `source`, when given): the endpoint each one reached. */
  readonly connections: readonly ServiceConnectionPath[];
}

/**
 * What a service proxy tells about a flow to one of its Services, from what it last programmed and the kernel's
 * connection table; undefined when the destination is none of its Services. The agent's explain endpoint asks it
 * when a flow's destination is a Service address; a proxy plugin provides it under `servicePathExplainerKey`.
 */
export interface ServicePathExplainer {
  explainServiceFlow(flow: ServiceFlow): Promise<ServicePath | undefined>;
}

export const servicePathExplainerKey = defineServiceKey<ServicePathExplainer>('service-path-explainer');
