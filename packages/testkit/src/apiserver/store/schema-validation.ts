import type { ValidateFunc } from '@kubernetes-models/validate';
import { ApiError, invalid } from '../errors.js';
import type { StatusCause } from '../errors.js';
import type { KubeObject } from '../kube-object.js';
import { isPlainObject } from '../kube-object.js';
import type { ResourceType } from '../resources.js';
import { valueCauses } from './value-validation.js';

type SchemaError = NonNullable<ValidateFunc<unknown>['errors']>[number];
/** A generated validator; not a type guard, so that a failed check leaves the object's type alone. */
interface Validator {
  (data: unknown): boolean;
  errors?: SchemaError[] | null;
}

// The generated validators of kubernetes-models (Kubernetes 1.32's OpenAPI schemas compiled by ajv), by the
// apiVersion/kind they check. Imported on start, not with the package: together they take about 150 ms to load.
const schemaModules: Record<string, () => Promise<{ validate: (data: unknown) => boolean }>> = {
  'v1/Pod': () => import('kubernetes-models/_schemas/IoK8sApiCoreV1Pod'),
  'v1/Service': () => import('kubernetes-models/_schemas/IoK8sApiCoreV1Service'),
  'v1/Namespace': () => import('kubernetes-models/_schemas/IoK8sApiCoreV1Namespace'),
  'v1/Node': () => import('kubernetes-models/_schemas/IoK8sApiCoreV1Node'),
  'v1/Event': () => import('kubernetes-models/_schemas/IoK8sApiCoreV1Event'),
  'v1/ServiceAccount': () => import('kubernetes-models/_schemas/IoK8sApiCoreV1ServiceAccount'),
  'discovery.k8s.io/v1/EndpointSlice': () => import('kubernetes-models/_schemas/IoK8sApiDiscoveryV1EndpointSlice'),
  'networking.k8s.io/v1/NetworkPolicy': () => import('kubernetes-models/_schemas/IoK8sApiNetworkingV1NetworkPolicy'),
  'coordination.k8s.io/v1/Lease': () => import('kubernetes-models/_schemas/IoK8sApiCoordinationV1Lease'),
  'rbac.authorization.k8s.io/v1/ClusterRole': () => import('kubernetes-models/_schemas/IoK8sApiRbacV1ClusterRole'),
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': () => import('kubernetes-models/_schemas/IoK8sApiRbacV1ClusterRoleBinding'),
  'rbac.authorization.k8s.io/v1/Role': () => import('kubernetes-models/_schemas/IoK8sApiRbacV1Role'),
  'rbac.authorization.k8s.io/v1/RoleBinding': () => import('kubernetes-models/_schemas/IoK8sApiRbacV1RoleBinding'),
};

let loading: Promise<Map<string, Validator>> | undefined;

/** Loads every schema validator once per process. */
export function loadSchemaValidators(): Promise<Map<string, Validator>> {
  loading ??= Promise.all(
    Object.entries(schemaModules).map(async ([kind, load]) => [kind, (await load()).validate as Validator] as const),
  ).then((entries) => new Map(entries));
  return loading;
}

/** Which writes are checked against the schemas: the server's `validation` option and its runtime switches. */
export class SchemaValidation {
  #enabled: boolean;
  readonly #exceptions = new Set<string>();
  readonly #validators: Map<string, Validator>;

  constructor(validators: Map<string, Validator>, enabled: boolean, exceptions: readonly string[] = []) {
    this.#validators = validators;
    this.#enabled = enabled;
    for (const resource of exceptions) this.#exceptions.add(resource);
  }

  /** Whether writes to `resource` (a plural, e.g. `pods`) are validated. */
  isEnabled(resource: string): boolean {
    return this.#enabled !== this.#exceptions.has(resource);
  }

  /** Validates writes to every resource, or to one (a plural). */
  enable(resource?: string): void {
    this.#set(true, resource);
  }

  /** Stores anything written to every resource, or to one (a plural), for tests that feed bad objects on purpose. */
  disable(resource?: string): void {
    this.#set(false, resource);
  }

  #set(enabled: boolean, resource: string | undefined): void {
    if (resource === undefined) {
      this.#enabled = enabled;
      this.#exceptions.clear();
    } else if (enabled === this.#enabled) {
      this.#exceptions.delete(resource);
    } else {
      this.#exceptions.add(resource);
    }
  }

  /**
   * Refuses an object the way kube-apiserver does: a field of the wrong JSON type cannot be decoded into the Go
   * type, so the request is a 400 BadRequest ("cannot be handled as a Pod"); a missing required field or a value
   * outside an enumeration is a 422 Invalid whose causes name the fields, and so is a port number or an address
   * that kube-apiserver's validation refuses (value-validation.ts). Kinds without a schema or such checks pass.
   *
   * `part` limits the check to what a write changes: a status write is not refused for a spec that a test stored
   * without validation, nor a spec write for such a status.
   */
  check(resource: ResourceType, obj: KubeObject, part: 'all' | 'status' | 'main' = 'all'): void {
    const validate = this.#validators.get(`${obj.apiVersion}/${obj.kind}`);
    const inPart = (field: string): boolean => {
      const inStatus = field === 'status' || field.startsWith('status.') || field.startsWith('status[');
      return part === 'all' || (part === 'status') === inStatus;
    };
    const schemaErrors = validate && !validate(obj) ? (validate.errors ?? []) : [];
    const errors = schemaErrors.filter((error) => inPart(fieldPath(obj, error.instancePath)));
    const decodeErrors = errors.filter(isDecodeError);
    const name = typeof obj.metadata.name === 'string' ? obj.metadata.name : '';
    if (decodeErrors.length > 0) throw cannotBeHandled(resource, obj, decodeErrors);
    // The schema says which fields are there and of what type; kube-apiserver's validation then checks their values.
    const causes = [...errors.flatMap((error) => invalidCause(obj, error)), ...valueCauses(obj).filter((cause) => inPart(cause.field ?? ''))];
    if (causes.length > 0) throw invalid(resource, name, causes);
  }
}

const decodeKeywords = new Set(['type', 'format', 'oneOf', 'anyOf']);

function isDecodeError(error: SchemaError): boolean {
  return decodeKeywords.has(error.keyword);
}

function cannotBeHandled(resource: ResourceType, obj: KubeObject, errors: readonly SchemaError[]): ApiError {
  const causes = new Map<string, StatusCause>();
  for (const error of errors) {
    const field = fieldPath(obj, error.instancePath);
    const value = valueAt(obj, error.instancePath);
    const expected = error.keyword === 'type' ? String(error.params.type) : error.keyword === 'format' ? String(error.params.format) : 'int-or-string';
    // An int-or-string reports each alternative and then the oneOf: keep the last, which names the field's type.
    causes.set(field, {
      reason: 'FieldValueTypeInvalid',
      field,
      message: `cannot unmarshal ${jsonType(value)} into Go struct field ${resource.kind}.${field} of type ${expected}`,
    });
  }
  const list = [...causes.values()];
  const message =
    `${resource.kind} in version "${resource.version}" cannot be handled as a ${resource.kind}: json: ` +
    list.map((cause) => cause.message).join('; ');
  return new ApiError(400, 'BadRequest', message, { causes: list });
}

function invalidCause(obj: KubeObject, error: SchemaError): StatusCause[] {
  const at = fieldPath(obj, error.instancePath);
  switch (error.keyword) {
    case 'required': {
      const missing = String(error.params.missingProperty);
      return [{ reason: 'FieldValueRequired', field: at ? `${at}.${missing}` : missing, message: 'Required value' }];
    }
    case 'enum': {
      const allowed = (error.params.allowedValues as unknown[]).map((value) => JSON.stringify(value)).join(', ');
      const value = valueAt(obj, error.instancePath);
      return [{ reason: 'FieldValueNotSupported', field: at, message: `Unsupported value: ${JSON.stringify(value)}: supported values: ${allowed}` }];
    }
    default:
      return [{ reason: 'FieldValueInvalid', field: at, message: `Invalid value: ${JSON.stringify(valueAt(obj, error.instancePath))}` }];
  }
}

function segments(instancePath: string): string[] {
  return instancePath === '' ? [] : instancePath.slice(1).split('/').map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** `/spec/ingress/0/from` → `spec.ingress[0].from`, Kubernetes' field path notation. */
function fieldPath(root: unknown, instancePath: string): string {
  let path = '';
  let current = root;
  for (const segment of segments(instancePath)) {
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

function valueAt(root: unknown, instancePath: string): unknown {
  let current = root;
  for (const segment of segments(instancePath)) {
    current = Array.isArray(current) ? current[Number(segment)] : isPlainObject(current) ? current[segment] : undefined;
  }
  return current;
}

/** The JSON type names Go's encoding/json uses in its errors. */
function jsonType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'object') return 'object';
  if (typeof value === 'boolean') return 'bool';
  return typeof value;
}
