import { hostname } from 'node:os';
import type { Level } from 'pino';
import { FLAGS, type FlagDefinition, type FlagName, type FlagValues } from './flags.js';

/** What the configuration has beyond the flags' own fields: worked out from them and the environment. */
interface DerivedConfig {
  /** This node's name: --hostname-override, else $NODE_NAME, else the host name (kube-router's precedence). */
  nodeName: string;
  /** Where nodeName came from, for the start-up log line. */
  nodeNameSource: '--hostname-override' | 'NODE_NAME' | 'hostname';
  /** The pino level of -v. */
  logging: { level: Level };
  /** $KUBE_ROUTER_CNI_CONF_FILE (kube-router's default /etc/cni/net.d/10-kuberouter.conf when unset or empty). */
  routing: { cniConfFile: string | undefined };
}

type Nest<Path extends string, V> = Path extends `${infer Head}.${infer Rest}`
  ? { [K in Head]: Nest<Rest, V> }
  : { [K in Path]: V };
type ConfigField<D> =
  D extends FlagDefinition<infer T, infer Target>
    ? Target extends readonly [infer Path extends string, (value: never) => infer V]
      ? Nest<Path, V>
      : Target extends string
        ? Nest<Target, T>
        : never
    : never;
type Intersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never;
/** One object type of nested intersections, as an editor should show it. */
type Merged<T> = T extends readonly unknown[] ? T : T extends object ? { [K in keyof T]: Merged<T[K]> } : T;

/**
 * The agent's configuration as the flags give it, typed and validated, grouped by feature; durations in ms. Each
 * field is the one its flag's definition names (`config` in FLAGS: `--iptables-sync-period` is
 * `firewall.syncPeriodMs`), plus the fields worked out from them (DerivedConfig).
 */
export type AgentConfig = Merged<Intersection<{ [Name in FlagName]: ConfigField<(typeof FLAGS)[Name]> }[FlagName]> & DerivedConfig>;

/** The flags' values as AgentConfig: each where its definition says, then the derived fields. */
export function toConfig(values: FlagValues, env: NodeJS.ProcessEnv): AgentConfig {
  const config: Record<string, unknown> = {};
  for (const [name, definition] of Object.entries(FLAGS) as Array<[FlagName, FlagDefinition]>) {
    if (definition.config === undefined) continue;
    const [path, convert] = typeof definition.config === 'string' ? [definition.config] : definition.config;
    const value = values[name];
    setPath(config, path, convert ? (convert as (value: unknown) => unknown)(value) : value);
  }
  const [nodeName, nodeNameSource] = resolveNodeName(values['hostname-override'], env);
  setPath(config, 'nodeName', nodeName);
  setPath(config, 'nodeNameSource', nodeNameSource);
  setPath(config, 'logging.level', logLevelFor(values.v));
  setPath(config, 'routing.cniConfFile', env.KUBE_ROUTER_CNI_CONF_FILE || undefined);
  return config as AgentConfig;
}

/** The value of a flag in a configuration: its field, which its definition names. */
export function configValue(config: AgentConfig, name: string, definition: FlagDefinition): unknown {
  if (definition.config === undefined) throw new Error(`--${name} has no field in the agent's configuration`);
  const path = typeof definition.config === 'string' ? definition.config : definition.config[0];
  return path.split('.').reduce<unknown>((group, key) => (group as Record<string, unknown>)[key], config);
}

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split('.');
  const last = keys.pop() as string;
  let group = target;
  for (const key of keys) group = (group[key] ??= {}) as Record<string, unknown>;
  group[last] = value;
}

/** kube-router's precedence: --hostname-override, then $NODE_NAME, then the host name. */
function resolveNodeName(override: string, env: NodeJS.ProcessEnv): [string, AgentConfig['nodeNameSource']] {
  if (override !== '') return [override, '--hostname-override'];
  if (env.NODE_NAME) return [env.NODE_NAME, 'NODE_NAME'];
  return [hostname(), 'hostname'];
}

function logLevelFor(verbosity: number): Level {
  return verbosity >= 3 ? 'trace' : verbosity >= 1 ? 'debug' : 'info';
}
