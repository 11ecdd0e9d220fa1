import { AUTHENTICATED_GROUP, PRIVILEGED_GROUP, serviceAccountUsername, type UserInfo } from './authentication.js';
import { ApiError } from './errors.js';
import type { KubeObject } from './kube-object.js';
import type { RequestAttributes } from './request-attributes.js';

export const RBAC_GROUP = 'rbac.authorization.k8s.io';

/** rbacv1.PolicyRule, read defensively: a stored object is whatever was written when validation was off. */
export interface PolicyRule {
  verbs?: string[];
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

export interface Subject {
  kind?: string;
  apiGroup?: string;
  name?: string;
  namespace?: string;
}

export interface RoleRef {
  apiGroup?: string;
  kind?: string;
  name?: string;
}

/** Where the authorizer reads the Roles, ClusterRoles and their bindings: the server's store. */
export interface RbacObjects {
  clusterRoleBindings(): readonly KubeObject[];
  roleBindings(namespace: string): readonly KubeObject[];
  clusterRole(name: string): KubeObject | undefined;
  role(namespace: string, name: string): KubeObject | undefined;
}

export interface Decision {
  allowed: boolean;
  /** kube-apiserver's reason: on a denial, the bindings whose roles are missing (`RBAC: clusterrole... not found`). */
  reason: string;
}

const strings = (value: unknown): string[] => (Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : []);

function rulesOf(role: KubeObject): PolicyRule[] {
  const rules = (role as { rules?: unknown }).rules;
  if (!Array.isArray(rules)) return [];
  return rules
    .filter((rule): rule is Record<string, unknown> => typeof rule === 'object' && rule !== null)
    .map((rule) => ({
      verbs: strings(rule.verbs),
      apiGroups: strings(rule.apiGroups),
      resources: strings(rule.resources),
      resourceNames: strings(rule.resourceNames),
      nonResourceURLs: strings(rule.nonResourceURLs),
    }));
}

const has = (values: readonly string[] | undefined, value: string) => (values ?? []).some((item) => item === '*' || item === value);

/** rbacv1helpers.ResourceMatches: `*`, the resource, `resource/subresource`, or `*\/subresource`. */
function resourceMatches(rule: PolicyRule, resource: string, subresource: string): boolean {
  const combined = subresource === '' ? resource : `${resource}/${subresource}`;
  return (rule.resources ?? []).some(
    (ruleResource) =>
      ruleResource === '*' ||
      ruleResource === combined ||
      (subresource !== '' && ruleResource.length === subresource.length + 2 && ruleResource === `*/${subresource}`),
  );
}

/** rbacv1helpers.NonResourceURLMatches: `*`, the path, or a prefix ending in `*`. */
function nonResourceUrlMatches(rule: PolicyRule, path: string): boolean {
  return (rule.nonResourceURLs ?? []).some(
    (url) => url === '*' || url === path || (url.endsWith('*') && path.startsWith(url.slice(0, -1))),
  );
}

/** Whether one rule allows the request, as the RBAC authorizer's RuleAllows. */
export function ruleAllows(attributes: RequestAttributes, rule: PolicyRule): boolean {
  if (!has(rule.verbs, attributes.verb)) return false;
  if (!attributes.resourceRequest) return nonResourceUrlMatches(rule, attributes.path);
  if (!has(rule.apiGroups, attributes.apiGroup)) return false;
  if (!resourceMatches(rule, attributes.resource, attributes.subresource)) return false;
  const names = rule.resourceNames ?? [];
  return names.length === 0 || names.includes(attributes.name);
}

/**
 * Whether a binding's subject is the user (rbac.appliesToUser): a User by name, a Group the user is in, or a
 * ServiceAccount by its username, in the subject's namespace or, for a RoleBinding's subject without one, the
 * binding's namespace.
 */
export function subjectApplies(user: UserInfo, subject: Subject, bindingNamespace: string): boolean {
  switch (subject.kind) {
    case 'User':
      return subject.name === user.name;
    case 'Group':
      return subject.name !== undefined && user.groups.includes(subject.name);
    case 'ServiceAccount': {
      const namespace = subject.namespace || bindingNamespace;
      return namespace !== '' && subject.name !== undefined && serviceAccountUsername(namespace, subject.name) === user.name;
    }
    default:
      return false;
  }
}

function subjectsOf(binding: KubeObject): Subject[] {
  const subjects = (binding as { subjects?: unknown }).subjects;
  return Array.isArray(subjects) ? subjects.filter((subject): subject is Subject => typeof subject === 'object' && subject !== null) : [];
}

function roleRefOf(binding: KubeObject): RoleRef {
  const roleRef = (binding as { roleRef?: unknown }).roleRef;
  return typeof roleRef === 'object' && roleRef !== null ? (roleRef as RoleRef) : {};
}

/**
 * kube-apiserver's authorization chain with RBAC: `system:masters` is always allowed; everyone else is allowed when a
 * rule of a ClusterRole bound by a ClusterRoleBinding, or of a Role or ClusterRole bound by a RoleBinding in the
 * request's namespace, allows the request. A binding of the user whose role does not exist denies nothing and allows
 * nothing; it is named in the reason of a denial, as kube-apiserver names it.
 */
export function authorize(objects: RbacObjects, attributes: RequestAttributes): Decision {
  if (attributes.user.groups.includes(PRIVILEGED_GROUP)) return { allowed: true, reason: '' };
  const errors: string[] = [];
  const bound = (binding: KubeObject, namespace: string): PolicyRule[] | undefined => {
    if (!subjectsOf(binding).some((subject) => subjectApplies(attributes.user, subject, namespace))) return undefined;
    const { kind, name = '' } = roleRefOf(binding);
    if (kind !== 'ClusterRole' && kind !== 'Role') {
      errors.push(`unsupported role reference kind: ${JSON.stringify(kind ?? '')}`);
      return undefined;
    }
    const role = kind === 'ClusterRole' ? objects.clusterRole(name) : objects.role(namespace, name);
    if (role === undefined) {
      errors.push(`${kind.toLowerCase()}.${RBAC_GROUP} ${JSON.stringify(name)} not found`);
      return undefined;
    }
    return rulesOf(role);
  };
  for (const binding of objects.clusterRoleBindings()) {
    if (bound(binding, '')?.some((rule) => ruleAllows(attributes, rule))) return { allowed: true, reason: '' };
  }
  const namespace = attributes.resourceRequest ? attributes.namespace : '';
  if (namespace !== '') {
    for (const binding of objects.roleBindings(namespace)) {
      if (bound(binding, namespace)?.some((rule) => ruleAllows(attributes, rule))) return { allowed: true, reason: '' };
    }
  }
  return { allowed: false, reason: errors.length === 0 ? '' : `RBAC: ${errors.length === 1 ? errors[0] : `[${errors.join(', ')}]`}` };
}

/** responsewriters.forbiddenMessage: who cannot do what, where. */
function forbiddenMessage(attributes: RequestAttributes): string {
  const user = JSON.stringify(attributes.user.name);
  if (!attributes.resourceRequest) return `User ${user} cannot ${attributes.verb} path ${JSON.stringify(attributes.path)}`;
  const resource = attributes.subresource === '' ? attributes.resource : `${attributes.resource}/${attributes.subresource}`;
  const what = `User ${user} cannot ${attributes.verb} resource ${JSON.stringify(resource)} in API group ${JSON.stringify(attributes.apiGroup)}`;
  return attributes.namespace === '' ? `${what} at the cluster scope` : `${what} in the namespace ${JSON.stringify(attributes.namespace)}`;
}

/**
 * The 403 kube-apiserver answers a denied request with (apierrors.NewForbidden): `services "x" is forbidden: User
 * "..." cannot patch resource "services/status" in API group "" in the namespace "default"`, reason Forbidden, and
 * details naming the resource (without subresource), its group and the object.
 */
export function forbidden(attributes: RequestAttributes, reason = ''): ApiError {
  const message = reason === '' ? forbiddenMessage(attributes) : `${forbiddenMessage(attributes)}: ${reason}`;
  if (!attributes.resourceRequest || attributes.resource === '') return new ApiError(403, 'Forbidden', `forbidden: ${message}`, {});
  const { apiGroup, resource, name } = attributes;
  const qualified = apiGroup === '' ? resource : `${resource}.${apiGroup}`;
  return new ApiError(403, 'Forbidden', `${qualified}${name === '' ? '' : ` ${JSON.stringify(name)}`} is forbidden: ${message}`, {
    ...(name !== '' && { name }),
    ...(apiGroup !== '' && { group: apiGroup }),
    kind: resource,
  });
}

const bootstrapLabels = { 'kubernetes.io/bootstrapping': 'rbac-defaults' };
const autoupdate = { 'rbac.authorization.kubernetes.io/autoupdate': 'true' };

function bootstrapClusterRole(name: string, rules: PolicyRule[]): KubeObject {
  return { apiVersion: `${RBAC_GROUP}/v1`, kind: 'ClusterRole', metadata: { name, labels: bootstrapLabels, annotations: autoupdate }, rules };
}

function bootstrapBinding(name: string, groups: string[]): KubeObject {
  return {
    apiVersion: `${RBAC_GROUP}/v1`,
    kind: 'ClusterRoleBinding',
    metadata: { name, labels: bootstrapLabels, annotations: autoupdate },
    roleRef: { apiGroup: RBAC_GROUP, kind: 'ClusterRole', name },
    subjects: groups.map((group) => ({ apiGroup: RBAC_GROUP, kind: 'Group', name: group })),
  };
}

/**
 * The part of kube-apiserver's bootstrap policy that matters here, created at start when RBAC is on: cluster-admin for
 * `system:masters`, and the discovery, OpenAPI and version paths for every authenticated user (system:discovery) and
 * /version and the health paths for anyone (system:public-info-viewer).
 */
export function bootstrapPolicy(): KubeObject[] {
  return [
    bootstrapClusterRole('cluster-admin', [
      { apiGroups: ['*'], resources: ['*'], verbs: ['*'] },
      { nonResourceURLs: ['*'], verbs: ['*'] },
    ]),
    bootstrapBinding('cluster-admin', [PRIVILEGED_GROUP]),
    bootstrapClusterRole('system:discovery', [
      {
        nonResourceURLs: ['/api', '/api/*', '/apis', '/apis/*', '/healthz', '/livez', '/openapi', '/openapi/*', '/readyz', '/version', '/version/'],
        verbs: ['get'],
      },
    ]),
    bootstrapBinding('system:discovery', [AUTHENTICATED_GROUP]),
    bootstrapClusterRole('system:public-info-viewer', [
      { nonResourceURLs: ['/healthz', '/livez', '/readyz', '/version', '/version/'], verbs: ['get'] },
    ]),
    bootstrapBinding('system:public-info-viewer', [AUTHENTICATED_GROUP, 'system:unauthenticated']),
  ];
}
