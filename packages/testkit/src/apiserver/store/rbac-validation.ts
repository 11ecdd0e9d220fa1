import type { StatusCause } from '../errors.js';
import type { KubeObject } from '../kube-object.js';
import { isPlainObject } from '../kube-object.js';

/**
 * kube-apiserver's validation of RBAC objects beyond the schema (pkg/apis/rbac/validation): what a role reference may
 * name, which subject kinds exist and what each needs, and that every rule says what it grants. Without these a test
 * could store a binding that no cluster accepts and that the authorizer then silently ignores.
 */

const RBAC_GROUP = 'rbac.authorization.k8s.io';
const SUBJECT_KINDS = ['ServiceAccount', 'User', 'Group'];

type Json = Record<string, unknown>;

const listed = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);
const quoted = (values: readonly string[]) => values.map((value) => JSON.stringify(value)).join(', ');

function unsupported(field: string, value: unknown, supported: readonly string[]): StatusCause {
  return { reason: 'FieldValueNotSupported', field, message: `Unsupported value: ${JSON.stringify(value)}: supported values: ${quoted(supported)}` };
}

function required(field: string, detail?: string): StatusCause {
  return { reason: 'FieldValueRequired', field, message: detail ? `Required value: ${detail}` : 'Required value' };
}

function ruleCauses(obj: KubeObject, namespaced: boolean): StatusCause[] {
  return listed((obj as Json).rules).flatMap((rule, index) => {
    if (!isPlainObject(rule)) return [];
    const at = `rules[${index}]`;
    const causes: StatusCause[] = [];
    if (listed(rule.verbs).length === 0) causes.push(required(`${at}.verbs`, 'verbs must contain at least one value'));
    if (listed(rule.nonResourceURLs).length > 0) {
      const value = JSON.stringify(rule.nonResourceURLs);
      if (namespaced) {
        causes.push({ reason: 'FieldValueInvalid', field: `${at}.nonResourceURLs`, message: `Invalid value: ${value}: namespaced rules cannot apply to non-resource URLs` });
      }
      if (listed(rule.apiGroups).length > 0 || listed(rule.resources).length > 0 || listed(rule.resourceNames).length > 0) {
        causes.push({
          reason: 'FieldValueInvalid',
          field: `${at}.nonResourceURLs`,
          message: `Invalid value: ${value}: rules cannot apply to both regular resources and non-resource URLs`,
        });
      }
      return causes;
    }
    if (listed(rule.apiGroups).length === 0) causes.push(required(`${at}.apiGroups`, 'resource rules must supply at least one api group'));
    if (listed(rule.resources).length === 0) causes.push(required(`${at}.resources`, 'resource rules must supply at least one resource'));
    return causes;
  });
}

function bindingCauses(obj: KubeObject, roleKinds: readonly string[], clusterScoped: boolean): StatusCause[] {
  const causes: StatusCause[] = [];
  const roleRef = isPlainObject((obj as Json).roleRef) ? ((obj as Json).roleRef as Json) : {};
  if (roleRef.apiGroup !== RBAC_GROUP) causes.push(unsupported('roleRef.apiGroup', roleRef.apiGroup ?? '', [RBAC_GROUP]));
  if (typeof roleRef.kind === 'string' && !roleKinds.includes(roleRef.kind)) causes.push(unsupported('roleRef.kind', roleRef.kind, roleKinds));
  if (roleRef.name === '') causes.push(required('roleRef.name'));
  listed((obj as Json).subjects).forEach((subject, index) => {
    if (!isPlainObject(subject)) return;
    const at = `subjects[${index}]`;
    if (subject.name === '' || subject.name === undefined) causes.push(required(`${at}.name`));
    switch (subject.kind) {
      case 'ServiceAccount':
        if ((subject.apiGroup ?? '') !== '') causes.push(unsupported(`${at}.apiGroup`, subject.apiGroup, ['']));
        if (clusterScoped && (subject.namespace ?? '') === '') causes.push(required(`${at}.namespace`));
        break;
      case 'User':
      case 'Group':
        // An empty apiGroup is defaulted to rbac.authorization.k8s.io (defaultRbacSubjects) before validation.
        if ((subject.apiGroup ?? '') !== '' && subject.apiGroup !== RBAC_GROUP) causes.push(unsupported(`${at}.apiGroup`, subject.apiGroup, [RBAC_GROUP]));
        break;
      default:
        causes.push(unsupported(`${at}.kind`, subject.kind ?? '', SUBJECT_KINDS));
    }
  });
  return causes;
}

export const rbacCausesByKind: Record<string, (obj: KubeObject) => StatusCause[]> = {
  [`${RBAC_GROUP}/v1/ClusterRole`]: (obj) => ruleCauses(obj, false),
  [`${RBAC_GROUP}/v1/Role`]: (obj) => ruleCauses(obj, true),
  [`${RBAC_GROUP}/v1/ClusterRoleBinding`]: (obj) => bindingCauses(obj, ['ClusterRole'], true),
  [`${RBAC_GROUP}/v1/RoleBinding`]: (obj) => bindingCauses(obj, ['Role', 'ClusterRole'], false),
};

/** SetDefaults_Subject: a User or Group subject without an apiGroup is in rbac.authorization.k8s.io. */
export function defaultRbacSubjects(obj: KubeObject): void {
  for (const subject of listed((obj as Json).subjects)) {
    if (isPlainObject(subject) && (subject.kind === 'User' || subject.kind === 'Group') && (subject.apiGroup ?? '') === '') subject.apiGroup = RBAC_GROUP;
  }
}
