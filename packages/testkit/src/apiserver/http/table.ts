import type { KubeObject } from '../kube-object.js';
import { isPlainObject } from '../kube-object.js';
import type { ResourceType } from '../resources.js';
import type { TableVersion } from './negotiation.js';

export type IncludeObject = 'None' | 'Metadata' | 'Object';

interface ColumnDefinition {
  name: string;
  type: 'string' | 'integer' | 'date';
  format: string;
  description: string;
  priority: number;
}

interface Column {
  definition: ColumnDefinition;
  cell(obj: KubeObject, now: number): string | number;
}

type Json = Record<string, unknown>;

const record = (value: unknown): Json => (isPlainObject(value) ? value : {});
const list = (value: unknown): Json[] => (Array.isArray(value) ? value.filter(isPlainObject) : []);

function column(name: string, cell: Column['cell'], options: Partial<ColumnDefinition> = {}): Column {
  return {
    definition: { name, type: 'string', format: '', description: name, priority: 0, ...options },
    cell,
  };
}

/** kubectl's HumanDuration, so ages read as they do against a real cluster. */
export function humanDuration(seconds: number): string {
  if (seconds < 0) return '<invalid>';
  const s = Math.floor(seconds);
  const minutes = Math.floor(s / 60);
  const hours = Math.floor(s / 3600);
  const days = Math.floor(s / 86400);
  if (s < 120) return `${s}s`;
  if (minutes < 10) return s % 60 === 0 ? `${minutes}m` : `${minutes}m${s % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) return hours % 24 === 0 ? `${days}d` : `${days}d${hours % 24}h`;
  if (days < 365 * 2) return `${days}d`;
  const years = Math.floor(days / 365);
  return days % 365 === 0 ? `${years}y` : `${years}y${days % 365}d`;
}

function age(timestamp: unknown, now: number): string {
  if (typeof timestamp !== 'string') return '<unknown>';
  return humanDuration((now - Date.parse(timestamp)) / 1000);
}

const nameColumn = column('Name', (obj) => obj.metadata.name ?? '', { format: 'name', description: 'Name must be unique within a namespace.' });
const ageColumn = column('Age', (obj, now) => age(obj.metadata.creationTimestamp, now));

function labelSelectorText(selector: unknown): string {
  const labels = record(record(selector).matchLabels);
  const expressions = list(record(selector).matchExpressions).map(
    (e) => `${String(e.key)} ${String(e.operator)} (${(Array.isArray(e.values) ? e.values : []).join(',')})`,
  );
  const parts = [...Object.entries(labels).map(([key, value]) => `${key}=${String(value)}`), ...expressions];
  return parts.length === 0 ? '<none>' : parts.join(',');
}

function servicePorts(obj: KubeObject): string {
  const ports = list(record(obj.spec).ports).map(
    (p) => `${String(p.port)}${p.nodePort ? `:${String(p.nodePort)}` : ''}/${String(p.protocol ?? 'TCP')}`,
  );
  return ports.length === 0 ? '<none>' : ports.join(',');
}

function externalIps(obj: KubeObject): string {
  const spec = record(obj.spec);
  const ingress = list(record(record(obj.status).loadBalancer).ingress).map((i) => String(i.ip ?? i.hostname));
  const ips = [...(Array.isArray(spec.externalIPs) ? spec.externalIPs.map(String) : []), ...ingress];
  if (ips.length > 0) return ips.join(',');
  if (spec.type === 'LoadBalancer') return '<pending>';
  if (spec.type === 'ExternalName') return String(spec.externalName ?? '<none>');
  return '<none>';
}

function nodeStatus(obj: KubeObject): string {
  const ready = list(record(obj.status).conditions).find((c) => c.type === 'Ready');
  const status = ready === undefined ? 'Unknown' : ready.status === 'True' ? 'Ready' : 'NotReady';
  return record(obj.spec).unschedulable === true ? `${status},SchedulingDisabled` : status;
}

function nodeRoles(obj: KubeObject): string {
  const roles = Object.keys(obj.metadata.labels ?? {})
    .filter((key) => key.startsWith('node-role.kubernetes.io/'))
    .map((key) => key.slice('node-role.kubernetes.io/'.length));
  return roles.length === 0 ? '<none>' : roles.sort().join(',');
}

const columnsByKind: Record<string, Column[]> = {
  'v1/Pod': [
    nameColumn,
    column('Ready', (obj) => {
      const containers = list(record(obj.spec).containers).length;
      const ready = list(record(obj.status).containerStatuses).filter((s) => s.ready === true).length;
      return `${ready}/${containers}`;
    }),
    column('Status', (obj) => String(record(obj.status).reason ?? record(obj.status).phase ?? 'Unknown')),
    column('Restarts', (obj) => list(record(obj.status).containerStatuses).reduce((sum, s) => sum + (Number(s.restartCount) || 0), 0), { type: 'integer' }),
    ageColumn,
    column('IP', (obj) => String(record(obj.status).podIP ?? '<none>'), { priority: 1 }),
    column('Node', (obj) => String(record(obj.spec).nodeName ?? '<none>'), { priority: 1 }),
  ],
  'v1/Service': [
    nameColumn,
    column('Type', (obj) => String(record(obj.spec).type ?? 'ClusterIP')),
    column('Cluster-IP', (obj) => String(record(obj.spec).clusterIP ?? '<none>')),
    column('External-IP', externalIps),
    column('Port(s)', servicePorts),
    ageColumn,
    column('Selector', (obj) => {
      const selector = Object.entries(record(record(obj.spec).selector));
      return selector.length === 0 ? '<none>' : selector.map(([k, v]) => `${k}=${String(v)}`).join(',');
    }, { priority: 1 }),
  ],
  'v1/Node': [
    nameColumn,
    column('Status', nodeStatus),
    column('Roles', nodeRoles),
    ageColumn,
    column('Version', (obj) => String(record(record(obj.status).nodeInfo).kubeletVersion ?? '')),
    column('Internal-IP', (obj) => String(list(record(obj.status).addresses).find((a) => a.type === 'InternalIP')?.address ?? '<none>'), { priority: 1 }),
  ],
  'v1/Namespace': [nameColumn, column('Status', (obj) => String(record(obj.status).phase ?? 'Active')), ageColumn],
  'networking.k8s.io/v1/NetworkPolicy': [nameColumn, column('Pod-Selector', (obj) => labelSelectorText(record(obj.spec).podSelector)), ageColumn],
  'discovery.k8s.io/v1/EndpointSlice': [
    nameColumn,
    column('AddressType', (obj) => String(obj.addressType ?? '')),
    column('Ports', (obj) => {
      const ports = list(obj.ports).map((p) => String(p.port ?? ''));
      return ports.length === 0 ? '<unset>' : ports.join(',');
    }),
    column('Endpoints', (obj) => {
      const addresses = list(obj.endpoints).flatMap((e) => (Array.isArray(e.addresses) ? e.addresses.map(String) : []));
      return addresses.length === 0 ? '<unset>' : addresses.join(',');
    }),
    ageColumn,
  ],
  'coordination.k8s.io/v1/Lease': [nameColumn, column('Holder', (obj) => String(record(obj.spec).holderIdentity ?? '')), ageColumn],
};

function columnsFor(resource: ResourceType): Column[] {
  return columnsByKind[`${resource.apiVersion}/${resource.kind}`] ?? [nameColumn, ageColumn];
}

function rowObject(obj: KubeObject, includeObject: IncludeObject, version: TableVersion): KubeObject | undefined {
  if (includeObject === 'None') return undefined;
  if (includeObject === 'Object') return obj;
  return { kind: 'PartialObjectMetadata', apiVersion: `meta.k8s.io/${version}`, metadata: obj.metadata };
}

/** A meta.k8s.io Table, the server-side printing kubectl get asks for. */
export function toTable(
  resource: ResourceType,
  objects: readonly KubeObject[],
  resourceVersion: string,
  version: TableVersion,
  includeObject: IncludeObject,
): KubeObject {
  const now = Date.now();
  const columns = columnsFor(resource);
  return {
    kind: 'Table',
    apiVersion: `meta.k8s.io/${version}`,
    metadata: { resourceVersion },
    columnDefinitions: columns.map((c) => c.definition),
    rows: objects.map((obj) => {
      const object = rowObject(obj, includeObject, version);
      return { cells: columns.map((c) => c.cell(obj, now)), ...(object ? { object } : {}) };
    }),
  };
}
