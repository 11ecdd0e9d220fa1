import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';

/** How `npm start` builds its cluster; the command line is the agents', so these come from the environment. */
export interface LabSettings {
  /** LAB_NODES: how many lab nodes, 1-200. Default 2. */
  nodes: number;
  /** LAB_RUN_ID: 1-6 lowercase letters or digits in every name the lab makes (`krt-<runId>-`). Random by default. */
  runId: string;
  /** LAB_UNDERLAY_CIDRS: the nodes' subnets, comma-separated, one per family. Default 10.250.0.0/24, fd00:10:250::/64. */
  underlayCidrs: string[] | undefined;
  /** LAB_API_PORT: the embedded API server's port. Default 0, any free one. */
  apiPort: number;
  /**
   * LAB_AGENT_CLI: the agent entry point each node runs, a TypeScript or JavaScript file. Default the reference
   * `kube-router` CLI (apps/agent/src/cli.ts); a custom assembly's own CLI runs in the lab the same way.
   */
  agentCli: string | undefined;
  /** LAB_EXTERNAL_ROUTER: "false" leaves out the external BIRD router. Default true (when the build has a router). */
  externalRouter: boolean;
  /**
   * LAB_LOG_FORMAT: `text` (default) gives people readable log lines on stderr, each agent's led by its node's name,
   * and keeps stdout for the lines a person needs (the kubeconfig, the URLs, readiness); `json` writes the agents'
   * JSON lines on stdout, for tools.
   */
  logFormat: 'text' | 'json';
  /**
   * LAB_AGENT_DEFAULTS: "false" gives the agents only the flags on the command line, as a DaemonSet's args are all its
   * container gets: none of the lab's defaults (firewall on, LoadBalancer ranges, IPv6, ports, the kubeconfig flag, the
   * external router's peering). Default true.
   */
  agentDefaults: boolean;
}

export function labSettings(env: NodeJS.ProcessEnv): LabSettings {
  const nodes = Number(env.LAB_NODES ?? 2);
  if (!Number.isInteger(nodes) || nodes < 1 || nodes > 200) throw new Error(`LAB_NODES must be 1-200, not ${env.LAB_NODES}`);
  const apiPort = Number(env.LAB_API_PORT ?? 0);
  if (!Number.isInteger(apiPort) || apiPort < 0 || apiPort > 65535) throw new Error(`LAB_API_PORT must be a port, not ${env.LAB_API_PORT}`);
  const externalRouter = env.LAB_EXTERNAL_ROUTER ?? 'true';
  if (externalRouter !== 'true' && externalRouter !== 'false') {
    throw new Error(`LAB_EXTERNAL_ROUTER must be true or false, not ${env.LAB_EXTERNAL_ROUTER}`);
  }
  const agentDefaults = env.LAB_AGENT_DEFAULTS ?? 'true';
  if (agentDefaults !== 'true' && agentDefaults !== 'false') {
    throw new Error(`LAB_AGENT_DEFAULTS must be true or false, not ${env.LAB_AGENT_DEFAULTS}`);
  }
  const logFormat = env.LAB_LOG_FORMAT ?? 'text';
  if (logFormat !== 'text' && logFormat !== 'json') throw new Error(`LAB_LOG_FORMAT must be text or json, not ${env.LAB_LOG_FORMAT}`);
  const underlay = env.LAB_UNDERLAY_CIDRS?.split(',').map((cidr) => cidr.trim()).filter(Boolean);
  return {
    nodes,
    runId: env.LAB_RUN_ID ?? randomBytes(3).toString('hex').slice(0, 6),
    underlayCidrs: underlay && underlay.length > 0 ? underlay : undefined,
    apiPort,
    agentCli: env.LAB_AGENT_CLI === undefined || env.LAB_AGENT_CLI === '' ? undefined : resolve(env.LAB_AGENT_CLI),
    externalRouter: externalRouter === 'true',
    logFormat,
    agentDefaults: agentDefaults === 'true',
  };
}
