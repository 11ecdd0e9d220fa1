/**
 * A NetworkPolicy spec as it goes over the wire (client-node's classes name `from` `_from`, so they cannot type the
 * JSON the suite writes).
 */
export interface LabelSelectorSpec {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'; values?: string[] }[];
}

export interface PolicyPeerSpec {
  podSelector?: LabelSelectorSpec;
  namespaceSelector?: LabelSelectorSpec;
  ipBlock?: { cidr: string; except?: string[] };
}

export interface PolicyPortSpec {
  protocol?: 'TCP' | 'UDP' | 'SCTP';
  port?: number | string;
  endPort?: number;
}

export interface NetworkPolicySpec {
  podSelector: LabelSelectorSpec;
  policyTypes?: ('Ingress' | 'Egress')[];
  ingress?: { from?: PolicyPeerSpec[]; ports?: PolicyPortSpec[] }[];
  egress?: { to?: PolicyPeerSpec[]; ports?: PolicyPortSpec[] }[];
}
