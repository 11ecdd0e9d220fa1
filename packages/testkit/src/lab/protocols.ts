import type { LabProtocol } from './probe-types.js';

/**
 * Why the lab cannot serve or probe a protocol here, or undefined when it can. Node.js has no SCTP sockets, and the
 * kernels the lab runs on so far have no SCTP either, so SCTP ports are never served and SCTP probes are skipped.
 */
export function unsupportedProtocolReason(protocol: LabProtocol): string | undefined {
  if (protocol === 'SCTP') {
    return 'SCTP is not supported by the lab: Node.js has no SCTP sockets (and this kernel may lack SCTP too)';
  }
  return undefined;
}
