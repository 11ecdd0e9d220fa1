import { randomBytes } from 'node:crypto';

/** Every namespace, interface and helper process of the lab starts with this. */
export const LAB_PREFIX = 'krt-';

const runIdPattern = /^[a-z0-9]{1,6}$/;
const maxInterfaceNameLength = 15;
// Network namespace names are file names under /run/netns; keep them readable in `ip netns list`.
const maxNetnsNameLength = 64;

export function newRunId(): string {
  return randomBytes(4).readUInt32BE(0).toString(36).padStart(6, '0').slice(-6);
}

export function assertRunId(runId: string): void {
  if (!runIdPattern.test(runId)) {
    throw new Error(`lab runId must be 1-6 lowercase letters or digits (interface names are limited to 15 characters), got "${runId}"`);
  }
}

/** The prefix of everything one run creates: `krt-<runid>-`. */
export function runPrefix(runId: string): string {
  return `${LAB_PREFIX}${runId}-`;
}

export function nodeNetnsName(runId: string, nodeName: string): string {
  return truncate(`${runPrefix(runId)}${nodeName}`, maxNetnsNameLength);
}

// One counter for the whole process, so that two labs sharing a runId still never share a name.
let sandboxSequence = 0;

export interface SandboxNames {
  netns: string;
  /** The node side of the pod's veth, in the node netns. */
  hostInterface: string;
}

export function nextSandboxNames(runId: string, namespace: string, name: string): SandboxNames {
  sandboxSequence += 1;
  const suffix = `p${sandboxSequence.toString(36)}`;
  const hostInterface = `${runPrefix(runId)}${suffix}`;
  if (hostInterface.length > maxInterfaceNameLength) {
    throw new Error(`interface name ${hostInterface} is longer than ${maxInterfaceNameLength} characters`);
  }
  return { netns: truncate(`${hostInterface}-${namespace}-${name}`, maxNetnsNameLength), hostInterface };
}

function truncate(name: string, length: number): string {
  return name.length <= length ? name : name.slice(0, length).replace(/[-.]+$/, '');
}
