/** How a strategic merge patch combines one list field; lists without an entry are replaced whole. */
export type ListStrategy = { mergeKey: string } | { mergePrimitives: true };

const byKey = (mergeKey: string): ListStrategy => ({ mergeKey });
const primitives: ListStrategy = { mergePrimitives: true };

const containerLists: Record<string, ListStrategy> = {
  ports: byKey('containerPort'),
  env: byKey('name'),
  volumeMounts: byKey('mountPath'),
  volumeDevices: byKey('devicePath'),
  resizePolicy: byKey('resourceName'),
};

function podSpecLists(prefix: string): Record<string, ListStrategy> {
  const lists: Record<string, ListStrategy> = {
    [`${prefix}.volumes`]: byKey('name'),
    [`${prefix}.imagePullSecrets`]: byKey('name'),
    [`${prefix}.hostAliases`]: byKey('ip'),
    [`${prefix}.topologySpreadConstraints`]: byKey('topologyKey'),
    [`${prefix}.resourceClaims`]: byKey('name'),
    [`${prefix}.schedulingGates`]: byKey('name'),
  };
  for (const containers of ['containers', 'initContainers', 'ephemeralContainers']) {
    lists[`${prefix}.${containers}`] = byKey('name');
    for (const [field, strategy] of Object.entries(containerLists)) {
      lists[`${prefix}.${containers}.${field}`] = strategy;
    }
  }
  return lists;
}

// The patchStrategy/patchMergeKey struct tags of the Kubernetes Go types this server serves, by kind and
// dotted path (list indices left out). kubectl apply and kubectl patch compute their patches from the same tags.
const listStrategies: Record<string, Record<string, ListStrategy>> = {
  '*': {
    'metadata.ownerReferences': byKey('uid'),
    'metadata.finalizers': primitives,
  },
  Pod: {
    ...podSpecLists('spec'),
    'status.conditions': byKey('type'),
    'status.podIPs': byKey('ip'),
    'status.hostIPs': byKey('ip'),
  },
  Node: {
    'spec.podCIDRs': primitives,
    'status.addresses': byKey('type'),
    'status.conditions': byKey('type'),
  },
  Service: {
    'spec.ports': byKey('port'),
    'status.conditions': byKey('type'),
  },
  Namespace: {
    'status.conditions': byKey('type'),
  },
};

export function listStrategyFor(kind: string, path: readonly string[]): ListStrategy | undefined {
  // Own entries only: a path such as `constructor` must not find Object's constructor as a strategy.
  const dotted = path.join('.');
  const entry = (table: Record<string, ListStrategy> | undefined) => (table && Object.hasOwn(table, dotted) ? table[dotted] : undefined);
  return entry(Object.hasOwn(listStrategies, kind) ? listStrategies[kind] : undefined) ?? entry(listStrategies['*']);
}
