import { isDeepStrictEqual } from 'node:util';
import type { AgentConfig } from './config.js';
import { FEATURES, FLAGS, type Feature, type FlagDefinition, type FlagName, type FlagValues } from './flags.js';
import { FEATURE_FLAGS, type PluginCatalog } from './catalog.js';
import { formatGoDuration } from './duration.js';

/** Something the command line asks for that this build cannot do. */
export type Unsupported =
  | { kind: 'feature'; feature: Feature; message: string }
  | { kind: 'flag'; flag: FlagName; message: string };

/**
 * What the command line asks for that this build lacks: an enabled feature with no plugin in the catalog, or a flag
 * that no plugin implements set to anything but its default while one of its features is enabled (the agent's own
 * flags always matter). A flag of a disabled feature is ignored, as kube-router ignores it; a flag of an enabled
 * feature that has no plugin is covered by the feature's own refusal. Nothing else is left unsaid: the start is
 * refused on any of these, so no flag is silently ignored.
 */
export function unsupportedSettings(
  config: Pick<AgentConfig, 'features' | 'cleanupConfig'> & { proxy?: Pick<AgentConfig['proxy'], 'useNftables'> },
  values: FlagValues,
  catalog: PluginCatalog,
): Unsupported[] {
  const found: Unsupported[] = [];
  // --cleanup-config removes what every plugin of the build owns, whatever --run-* says: no feature is missing then.
  const active = FEATURES.filter((feature) => config.features[feature] || config.cleanupConfig);
  if (!config.cleanupConfig) {
    for (const feature of active.filter((f) => catalog[f] === undefined)) {
      found.push({
        kind: 'feature',
        feature,
        message: `${FEATURE_FLAGS[feature]}: this build has no plugin for ${feature}; disable it with ${FEATURE_FLAGS[feature]}=false`,
      });
    }
  }
  for (const [name, definition] of Object.entries(FLAGS) as Array<[FlagName, FlagDefinition]>) {
    if (definition.implemented) continue;
    const value = values[name];
    if (isDeepStrictEqual(value, definition.default)) continue;
    if (definition.builtValue !== undefined && isDeepStrictEqual(value, definition.builtValue)) continue;
    const matters =
      definition.features.length === 0 ||
      definition.features.some((feature) => active.includes(feature) && catalog[feature] !== undefined);
    if (!matters) continue;
    const owners = definition.features.length === 0 ? 'the agent' : `the ${definition.features.join('/')} plugins`;
    found.push({
      kind: 'flag',
      flag: name,
      message: `--${name}=${describe(value, definition)}: not implemented by ${owners} of this build (only its default ${describe(definition.default, definition)}${definition.builtValue === undefined ? '' : ` and ${describe(definition.builtValue, definition)}, what this build does,`} is accepted)`,
    });
  }
  if (config.proxy?.useNftables && active.includes('service-proxy')) found.push(...ipvsOnlySettings(values));
  return found;
}

/** IPVS flags whose every value describes the nftables proxy: it hairpins every Service, as kube-proxy does. */
const NFTABLES_PROXY_DOES_EITHER: ReadonlySet<FlagName> = new Set(['hairpin-mode']);

/**
 * The proxy flags that only IPVS has (a plugin option of proxy-ipvs that proxy-nftables lacks: graceful termination,
 * --ipvs-permit-all, the IPVS timeouts, --excluded-cidrs), set to anything but their default while the nftables proxy
 * is chosen: refused like an unimplemented flag, since the nftables proxy would silently do otherwise.
 */
function ipvsOnlySettings(values: FlagValues): Unsupported[] {
  const found: Unsupported[] = [];
  for (const [name, definition] of Object.entries(FLAGS) as Array<[FlagName, FlagDefinition]>) {
    if (!definition.options?.['proxy-ipvs'] || definition.options['proxy-nftables']) continue;
    if (NFTABLES_PROXY_DOES_EITHER.has(name)) continue;
    if (!definition.features.includes('service-proxy') || definition.features.length > 1) continue;
    const value = values[name];
    if (isDeepStrictEqual(value, definition.default)) continue;
    found.push({
      kind: 'flag',
      flag: name,
      message: `--${name}=${describe(value, definition)}: an IPVS setting that the nftables service proxy (--use-nftables-for-service-proxy) has no counterpart for (only its default ${describe(definition.default, definition)} is accepted with it)`,
    });
  }
  return found;
}

/** A value as it would be written on the command line. */
function describe(value: unknown, definition: FlagDefinition): string {
  if (definition.type === 'duration') return formatGoDuration(value as number);
  if (Array.isArray(value)) return value.length === 0 ? '""' : value.join(',');
  return value === '' ? '""' : String(value);
}
