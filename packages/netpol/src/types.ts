/*
 * The parts of Kubernetes objects the compiler reads, as structural types. The classes of @kubernetes/client-node
 * (V1Pod, V1Namespace, V1NetworkPolicy) satisfy them, and so do plain JSON objects from a watch or a YAML file.
 * Everything is read defensively at run time too: input that does not match these types is reported, not trusted.
 */

export type Labels = Readonly<Record<string, string>>;

export interface LabelSelectorRequirementLike {
  readonly key: string;
  readonly operator: string;
  readonly values?: readonly string[];
}

export interface LabelSelectorLike {
  readonly matchLabels?: Labels;
  readonly matchExpressions?: readonly LabelSelectorRequirementLike[];
}

export interface ObjectMetaLike {
  readonly name?: string;
  readonly namespace?: string;
  readonly labels?: Labels;
  readonly resourceVersion?: string;
}

export interface ContainerPortLike {
  readonly name?: string;
  readonly containerPort: number;
  readonly protocol?: string;
}

export interface ContainerLike {
  readonly ports?: readonly ContainerPortLike[];
  /** `Always` on an init container makes it a sidecar, whose ports count like a container's. */
  readonly restartPolicy?: string;
}

export interface PodLike {
  readonly metadata?: ObjectMetaLike;
  readonly spec?: {
    readonly nodeName?: string;
    readonly hostNetwork?: boolean;
    readonly containers?: readonly ContainerLike[];
    readonly initContainers?: readonly ContainerLike[];
  };
  readonly status?: {
    readonly phase?: string;
    readonly podIP?: string;
    readonly podIPs?: readonly { readonly ip: string }[];
  };
}

export interface NamespaceLike {
  readonly metadata?: ObjectMetaLike;
}

export interface IPBlockLike {
  readonly cidr: string;
  readonly except?: readonly string[];
}

export interface NetworkPolicyPeerLike {
  readonly podSelector?: LabelSelectorLike;
  readonly namespaceSelector?: LabelSelectorLike;
  readonly ipBlock?: IPBlockLike;
}

export interface NetworkPolicyPortLike {
  readonly protocol?: string;
  readonly port?: number | string;
  readonly endPort?: number;
}

export interface NetworkPolicyIngressRuleLike {
  /** The wire name. */
  readonly from?: readonly NetworkPolicyPeerLike[];
  /** What @kubernetes/client-node's deserialiser calls `from` (a reserved word in its generator). */
  readonly _from?: readonly NetworkPolicyPeerLike[];
  readonly ports?: readonly NetworkPolicyPortLike[];
}

export interface NetworkPolicyEgressRuleLike {
  readonly to?: readonly NetworkPolicyPeerLike[];
  readonly ports?: readonly NetworkPolicyPortLike[];
}

export interface NetworkPolicySpecLike {
  readonly podSelector?: LabelSelectorLike;
  readonly policyTypes?: readonly string[];
  readonly ingress?: readonly NetworkPolicyIngressRuleLike[];
  readonly egress?: readonly NetworkPolicyEgressRuleLike[];
}

export interface NetworkPolicyLike {
  readonly metadata?: ObjectMetaLike;
  readonly spec?: NetworkPolicySpecLike;
}
