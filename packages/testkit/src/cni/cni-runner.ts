import { LabCommandError, runCommand } from '../lab/run-command.js';

/** Where Debian's containernetworking-plugins installs the plugins. */
export const DEFAULT_CNI_PATH = '/usr/lib/cni';

export interface CniInvocation {
  /** The configuration list as the runtime reads it from the CNI directory. */
  readonly config: { readonly cniVersion: string; readonly name: string; readonly plugins: readonly Record<string, unknown>[] };
  /** The node's network namespace: the kubelet's, where the plugins run (kube-bridge is made there). */
  readonly nodeNetns: string;
  /** The pod's network namespace, by name under /run/netns. */
  readonly podNetns: string;
  readonly containerId: string;
  /** Default eth0, as the kubelet names a pod's interface. */
  readonly ifName?: string;
  readonly cniPath?: string;
}

/** What ADD returned: the addresses the pod got (`10.244.0.5/24`) and the whole result of the last plugin. */
export interface CniAddResult {
  readonly addresses: string[];
  readonly result: Record<string, unknown>;
}

/**
 * Attaches a pod as a container runtime does (libcni's AddNetworkList): every plugin of the list in order, each given
 * the network's name and version and the previous plugin's result, run in the node's namespace with the CNI_*
 * environment. A plugin's failure is thrown with the error it printed (host-local's "no IP ranges specified").
 */
export async function cniAdd(invocation: CniInvocation): Promise<CniAddResult> {
  let previous: Record<string, unknown> | undefined;
  for (const plugin of invocation.config.plugins) previous = await runPlugin(invocation, 'ADD', plugin, previous);
  const ips = (previous?.ips ?? []) as { address: string }[];
  return { addresses: ips.map((ip) => ip.address), result: previous ?? {} };
}

/** Detaches a pod as a runtime does (DelNetworkList): the plugins in reverse order; host-local frees the address. */
export async function cniDel(invocation: CniInvocation): Promise<void> {
  for (const plugin of [...invocation.config.plugins].reverse()) await runPlugin(invocation, 'DEL', plugin, undefined);
}

async function runPlugin(
  invocation: CniInvocation,
  command: 'ADD' | 'DEL',
  plugin: Record<string, unknown>,
  previous: Record<string, unknown> | undefined,
): Promise<Record<string, unknown>> {
  const cniPath = invocation.cniPath ?? DEFAULT_CNI_PATH;
  const type = String(plugin.type);
  const config = { ...plugin, cniVersion: invocation.config.cniVersion, name: invocation.config.name, ...(previous && { prevResult: previous }) };
  const environment = [
    `CNI_COMMAND=${command}`,
    `CNI_CONTAINERID=${invocation.containerId}`,
    `CNI_NETNS=/run/netns/${invocation.podNetns}`,
    `CNI_IFNAME=${invocation.ifName ?? 'eth0'}`,
    `CNI_PATH=${cniPath}`,
  ];
  let output: string;
  try {
    output = await runCommand('ip', ['netns', 'exec', invocation.nodeNetns, 'env', ...environment, `${cniPath}/${type}`], {
      input: JSON.stringify(config),
      timeoutMs: 20_000,
    });
  } catch (error) {
    // A plugin prints its error as JSON on stdout ({"code": 11, "msg": "no IP ranges specified"}) and exits 1.
    const printed = error instanceof LabCommandError ? pluginError(error.stdout) : undefined;
    throw new Error(`CNI ${command} of ${type} for ${invocation.containerId} failed: ${printed ?? (error as Error).message}`, { cause: error });
  }
  if (command === 'DEL' || output.trim() === '') return {};
  return JSON.parse(output) as Record<string, unknown>;
}

function pluginError(stdout: string): string | undefined {
  try {
    const printed = JSON.parse(stdout) as { msg?: unknown; details?: unknown };
    if (typeof printed.msg !== 'string') return undefined;
    return typeof printed.details === 'string' && printed.details !== '' ? `${printed.msg}: ${printed.details}` : printed.msg;
  } catch {
    return undefined;
  }
}
