import type { KubernetesObject } from '@kubernetes/client-node';
import { ObjectSerializer } from '@kubernetes/client-node/dist/gen/models/ObjectSerializer.js';
import type { ResourceDescriptor, ResourceName } from './resources.js';

/**
 * Why an object was skipped: the `reason` label of `kube_router_informer_objects_skipped_total`. `malformed_event`
 * is a watch event that carries no object to read (no type, an unknown type, a bookmark without a resourceVersion).
 */
export type SkipReason = 'not_an_object' | 'invalid_metadata' | 'invalid_fields' | 'undecodable' | 'malformed_event';

export const SKIP_REASONS: readonly SkipReason[] = ['not_an_object', 'invalid_metadata', 'invalid_fields', 'undecodable', 'malformed_event'];

/** What is known of an object that could not be read, to name it in logs and to give it an Event. */
export interface SkippedObjectIdentity {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
}

export type ObjectReading<T> =
  | { ok: true; object: T }
  | { ok: false; reason: SkipReason; problem: string; identity?: SkippedObjectIdentity };

/** One error of an ajv validator, as the generated validators of kubernetes-models report them. */
interface SchemaError {
  instancePath: string;
  keyword: string;
  params: Record<string, unknown>;
}

interface SchemaValidator {
  (data: unknown): boolean;
  errors?: SchemaError[] | null;
}

type ValidatorModule = { validate: (data: unknown) => boolean };

// Loaded on first use: each schema pulls in a tree of generated modules (about 120 ms for all six), and an agent
// that runs only a firewall never informs on Services or EndpointSlices.
const schemaModules: Record<ResourceName, () => Promise<ValidatorModule>> = {
  pods: () => import('kubernetes-models/_schemas/IoK8sApiCoreV1Pod'),
  namespaces: () => import('kubernetes-models/_schemas/IoK8sApiCoreV1Namespace'),
  nodes: () => import('kubernetes-models/_schemas/IoK8sApiCoreV1Node'),
  services: () => import('kubernetes-models/_schemas/IoK8sApiCoreV1Service'),
  endpointslices: () => import('kubernetes-models/_schemas/IoK8sApiDiscoveryV1EndpointSlice'),
  networkpolicies: () => import('kubernetes-models/_schemas/IoK8sApiNetworkingV1NetworkPolicy'),
};

const MAX_LISTED_PROBLEMS = 3;

/**
 * Decides whether the informers can hand an object to plugins, and turns it into client-node's model when they can.
 * Plugins are typed against client-node's models and read them without defensive checks, so an object is readable
 * when its shape is what those types promise: a JSON object whose metadata has a name (and a namespace, for a
 * namespaced kind), whose fields have the JSON types of the Kubernetes schema (a list is a list, a string a string,
 * an int-or-string one of the two), and whose required fields are present, as every object a real API server
 * validated has them. Values the schema enumerates are not checked: a newer API server may add one (a new protocol,
 * a new Service type), and refusing it would hide a whole object from the agent; plugins refuse what they do not
 * support, with an event.
 */
export class ObjectReader<T extends KubernetesObject> {
  readonly #descriptor: ResourceDescriptor;
  #validator: SchemaValidator | undefined;

  constructor(descriptor: ResourceDescriptor) {
    this.#descriptor = descriptor;
  }

  /** Loads the schema validator; `read` needs it. Idempotent. */
  async load(): Promise<void> {
    this.#validator ??= (await schemaModules[this.#descriptor.name]()).validate as SchemaValidator;
  }

  get loaded(): boolean {
    return this.#validator !== undefined;
  }

  /**
   * Reads one listed or watched object. Never throws. It may fill in apiVersion and kind (list items come without
   * them), so the caller must own `raw`.
   */
  read(raw: unknown): ObjectReading<T> {
    if (!isPlainObject(raw)) return { ok: false, reason: 'not_an_object', problem: `not a JSON object: ${describeJson(raw)}` };
    const identity = identityOf(raw);
    const skip = (reason: SkipReason, problem: string): ObjectReading<T> => ({
      ok: false,
      reason,
      problem,
      ...(identity && { identity }),
    });
    const metadataProblem = this.#metadataProblem(raw.metadata);
    if (metadataProblem) return skip('invalid_metadata', metadataProblem);
    // Server-side apply's field ownership: no plugin reads it, and on a real cluster it is a third or more of a
    // pod's JSON, which the cache would otherwise hold for every pod (client-go informers are told to drop it too).
    delete (raw.metadata as Record<string, unknown>).managedFields;
    const { apiVersion, kind } = this.#descriptor;
    raw.apiVersion ??= apiVersion;
    raw.kind ??= kind;
    if (raw.apiVersion !== apiVersion || raw.kind !== kind) {
      return skip('invalid_fields', `apiVersion/kind ${describeJson(raw.apiVersion)}/${describeJson(raw.kind)}: expected ${apiVersion}/${kind}`);
    }
    const validator = this.#validator;
    if (!validator) return skip('undecodable', `the schema of ${this.#descriptor.kind} is not loaded yet`);
    if (!validator(raw)) {
      const problems = fieldProblems(raw, validator.errors ?? []);
      if (problems.length > 0) return skip('invalid_fields', problems.join('; '));
    }
    try {
      return { ok: true, object: ObjectSerializer.deserialize(raw, this.#descriptor.model, '') as T };
    } catch (error) {
      return skip('undecodable', error instanceof Error ? error.message : String(error));
    }
  }

  #metadataProblem(metadata: unknown): string | undefined {
    if (!isPlainObject(metadata)) return `metadata: ${metadata === undefined ? 'missing' : `not a JSON object: ${describeJson(metadata)}`}`;
    if (typeof metadata.name !== 'string' || metadata.name === '') return `metadata.name: missing or not a string: ${describeJson(metadata.name)}`;
    if (this.#descriptor.namespaced && (typeof metadata.namespace !== 'string' || metadata.namespace === '')) {
      return `metadata.namespace: missing or not a string: ${describeJson(metadata.namespace)}`;
    }
    return undefined;
  }
}

/** `namespace/name`, `name`, or `<unnamed>`: how logs name a skipped object. */
export function skippedObjectKey(identity: SkippedObjectIdentity | undefined): string {
  if (!identity) return '<unnamed>';
  return identity.namespace ? `${identity.namespace}/${identity.name}` : identity.name;
}

function identityOf(raw: Record<string, unknown>): SkippedObjectIdentity | undefined {
  const metadata = raw.metadata;
  if (!isPlainObject(metadata) || typeof metadata.name !== 'string' || metadata.name === '') return undefined;
  const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);
  const namespace = text(metadata.namespace);
  const uid = text(metadata.uid);
  const resourceVersion = text(metadata.resourceVersion);
  return {
    name: metadata.name,
    ...(namespace && { namespace }),
    ...(uid && { uid }),
    ...(resourceVersion && { resourceVersion }),
  };
}

/**
 * The schema errors that make an object unreadable, one per field, in Kubernetes' field path notation
 * (`spec.ingress[0].from: must be array`). An int-or-string field reports one error per alternative plus the oneOf;
 * they become one problem.
 */
function fieldProblems(raw: unknown, errors: readonly SchemaError[]): string[] {
  const byField = new Map<string, string>();
  for (const error of errors) {
    if (error.keyword === 'enum') continue;
    const field = fieldPath(raw, error.instancePath);
    if (byField.has(field) && error.keyword !== 'oneOf') continue;
    byField.set(field, schemaMessage(error));
  }
  const problems = [...byField].map(([field, message]) => `${field || '<object>'}: ${message}`);
  if (problems.length <= MAX_LISTED_PROBLEMS) return problems;
  return [...problems.slice(0, MAX_LISTED_PROBLEMS), `and ${problems.length - MAX_LISTED_PROBLEMS} more`];
}

function schemaMessage(error: SchemaError): string {
  switch (error.keyword) {
    case 'type':
      return `must be ${String(error.params.type)}`;
    case 'required':
      return `required field ${String(error.params.missingProperty)} is missing`;
    case 'format':
      return `must be ${String(error.params.format)}`;
    case 'oneOf':
    case 'anyOf':
      return 'must be an integer or a string';
    default:
      return `fails the schema's ${error.keyword} rule`;
  }
}

/** `/spec/ingress/0/from` → `spec.ingress[0].from`, telling list indexes from map keys by the data. */
export function fieldPath(root: unknown, instancePath: string): string {
  if (instancePath === '') return '';
  let path = '';
  let current: unknown = root;
  for (const encoded of instancePath.slice(1).split('/')) {
    const segment = encoded.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(current)) {
      path += `[${segment}]`;
      current = current[Number(segment)];
    } else {
      path += path === '' ? segment : `.${segment}`;
      current = isPlainObject(current) ? current[segment] : undefined;
    }
  }
  return path;
}

function describeJson(value: unknown): string {
  if (value === undefined) return 'undefined';
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
