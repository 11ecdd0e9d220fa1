import { POD_KEYS, PORTS, PROTOCOLS } from './model.js';
import type { PodKey, ProbeProtocol } from './model.js';

/**
 * A set of pods of the world: `"x/a"` one pod, `"x/*"` a namespace, `"*\/a"` pod a of every namespace, `"*"` every
 * pod, or a list of those.
 */
export type PodSet = string | readonly string[];

/** Narrows an expectation to one port, one protocol or both; every port and protocol when not given. */
export interface PortFilter {
  port?: number;
  protocol?: ProbeProtocol;
}

/** One cell of the truth table. */
export interface Connection {
  from: PodKey;
  to: PodKey;
  port: number;
  protocol: ProbeProtocol;
}

/**
 * The expected truth table of a case: for every ordered pair of distinct pods and every port and protocol, whether
 * a new connection is allowed. Built like the e2e tests' `Reachability`: start from all allowed, then state what a
 * policy changes, later statements overriding earlier ones.
 *
 * A pod's connections to itself are not part of the table: they never leave the pod's network namespace, so no
 * node-level dataplane can see them (the e2e tests ignore loopback for the same reason).
 */
export class Reachability {
  private readonly allowed = new Map<string, boolean>();

  constructor(
    readonly pods: readonly PodKey[] = POD_KEYS,
    readonly ports: readonly number[] = PORTS,
    readonly protocols: readonly ProbeProtocol[] = PROTOCOLS,
  ) {
    this.expectAll(true);
  }

  /** Every connection allowed (the state without policies). */
  expectAllAllowed(): this {
    return this.expectAll(true);
  }

  expectAll(allowed: boolean, on: PortFilter = {}): this {
    return this.expectPeer('*', '*', allowed, on);
  }

  /** Every connection from a pod of `from` to a pod of `to` (other than itself). */
  expectPeer(from: PodSet, to: PodSet, allowed: boolean, on: PortFilter = {}): this {
    const sources = this.resolve(from);
    const targets = this.resolve(to);
    for (const source of sources) {
      for (const target of targets) {
        if (source === target) continue;
        for (const port of this.portsOf(on)) {
          for (const protocol of this.protocolsOf(on)) this.allowed.set(cellKey(source, target, port, protocol), allowed);
        }
      }
    }
    return this;
  }

  /** Every connection into the pods of `to`, from any pod. */
  expectAllIngress(to: PodSet, allowed: boolean, on: PortFilter = {}): this {
    return this.expectPeer('*', to, allowed, on);
  }

  /** Every connection out of the pods of `from`, to any pod. */
  expectAllEgress(from: PodSet, allowed: boolean, on: PortFilter = {}): this {
    return this.expectPeer(from, '*', allowed, on);
  }

  isAllowed(connection: Connection): boolean {
    const { from, to, port, protocol } = connection;
    const value = this.allowed.get(cellKey(from, to, port, protocol));
    if (value === undefined) throw new Error(`no expectation for ${describeConnection(connection)}`);
    return value;
  }

  /** Every cell of the table, optionally only some ports and protocols; self-connections excluded. */
  connections(on: { ports?: readonly number[]; protocols?: readonly ProbeProtocol[] } = {}): Connection[] {
    const ports = on.ports ?? this.ports;
    const protocols = on.protocols ?? this.protocols;
    const cells: Connection[] = [];
    for (const port of ports) {
      for (const protocol of protocols) {
        for (const from of this.pods) {
          for (const to of this.pods) if (from !== to) cells.push({ from, to, port, protocol });
        }
      }
    }
    return cells;
  }

  /** The pods a set names; an unknown pod or namespace is a mistake in the case, not an empty set. */
  resolve(set: PodSet): PodKey[] {
    const patterns = typeof set === 'string' ? [set] : set;
    const matched = new Set<PodKey>();
    for (const pattern of patterns) {
      const [namespace = '*', name = '*'] = pattern === '*' ? [] : pattern.split('/');
      const pods = this.pods.filter((pod) => {
        const [podNamespace, podName] = pod.split('/');
        return (namespace === '*' || namespace === podNamespace) && (name === '*' || name === podName);
      });
      if (pods.length === 0) throw new Error(`"${pattern}" names no pod of ${this.pods.join(', ')}`);
      for (const pod of pods) matched.add(pod);
    }
    return [...matched];
  }

  private portsOf(on: PortFilter): readonly number[] {
    if (on.port === undefined) return this.ports;
    if (!this.ports.includes(on.port)) throw new Error(`port ${on.port} is not served in this world`);
    return [on.port];
  }

  private protocolsOf(on: PortFilter): readonly ProbeProtocol[] {
    return on.protocol === undefined ? this.protocols : [on.protocol];
  }
}

export function describeConnection({ from, to, port, protocol }: Connection): string {
  return `${from} -> ${to} ${port}/${protocol}`;
}

function cellKey(from: string, to: string, port: number, protocol: string): string {
  return `${from}>${to}>${port}/${protocol}`;
}
