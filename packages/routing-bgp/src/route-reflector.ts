import type { V1Node } from '@kubernetes/client-node';
import { messageOf } from '@kube-router/controller';
import ipaddr from 'ipaddr.js';
import { parseGoUint } from './parse.js';
import type { RoutingCluster } from './settings.js';

/** A Node that reflects routes to its clients, with the cluster id as value. */
export const RR_SERVER_ANNOTATION = 'kube-router.io/rr.server';
/** A Node that peers only with route reflectors (Nodes with kube-router.io/rr.server), with the cluster id as value. */
export const RR_CLIENT_ANNOTATION = 'kube-router.io/rr.client';

/** This node's part in route reflection, from its own annotations; rr.server wins over rr.client, as in kube-router. */
export type ReflectorRole = { kind: 'none' } | { kind: 'server'; clusterId: string } | { kind: 'client'; clusterId: string };

/**
 * The role this Node's annotations give it. A cluster id is a 32-bit number (as Go's ParseUint with base 0 reads it:
 * decimal, 0x hex, octal) or an IPv4 address, the form BGP's CLUSTER_ID takes; anything else throws.
 */
export function reflectorRole(node: V1Node): ReflectorRole {
  const annotations = node.metadata?.annotations ?? {};
  for (const [annotation, kind] of [
    [RR_SERVER_ANNOTATION, 'server'],
    [RR_CLIENT_ANNOTATION, 'client'],
  ] as const) {
    const value = annotations[annotation];
    if (value === undefined) continue;
    return { kind, clusterId: clusterIdOf(value, annotation) };
  }
  return { kind: 'none' };
}

/** gobgp wants an IPv4 address or a decimal number: hex and octal numbers are given to it as their IPv4 form. */
function clusterIdOf(value: string, annotation: string): string {
  const text = value.trim();
  if (ipaddr.IPv4.isValidFourPartDecimal(text)) return text;
  const number = parseGoUint(text, 32);
  if (number === undefined) {
    throw new Error(`${annotation} ${JSON.stringify(value)} is not a cluster id (a 32-bit number or an IPv4 address)`);
  }
  return ipaddr.fromByteArray([24, 16, 8, 0].map((shift) => (number >>> shift) & 0xff)).toString();
}

/** Whether a Node's annotations make it a route reflector; an unreadable value counts (its own agent warns about it). */
export function isReflector(node: V1Node): boolean {
  return node.metadata?.annotations?.[RR_SERVER_ANNOTATION] !== undefined;
}

/** Whether a Node's annotations make it a route reflector client. */
export function isReflectorClient(node: V1Node): boolean {
  const annotations = node.metadata?.annotations ?? {};
  return annotations[RR_CLIENT_ANNOTATION] !== undefined && annotations[RR_SERVER_ANNOTATION] === undefined;
}

/**
 * This node's route reflection role, refreshed every sync before the stages that depend on it (the mesh and the
 * policies). A value that stops parsing keeps the previous role, so that the topology does not flip on a typo.
 */
export class ReflectorRoleState {
  #role: ReflectorRole = { kind: 'none' };

  get current(): ReflectorRole {
    return this.#role;
  }

  /** Reads the role from the Node; a bad annotation gets a Warning event and throws (a failure of the stage). */
  refresh(node: V1Node, warn: RoutingCluster['warn']): void {
    try {
      this.#role = reflectorRole(node);
    } catch (error) {
      warn(node, 'InvalidRouteReflectorAnnotation', `keeping route reflector role ${this.#role.kind}: ${messageOf(error)}`);
      throw error;
    }
  }
}
