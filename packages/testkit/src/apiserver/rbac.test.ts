// The RBAC authorizer and the request attributes it decides on, as kube-apiserver's rbac.go and RequestInfoFactory.
import { describe, expect, it } from 'vitest';
import { ADMIN_USER, ANONYMOUS_USER, serviceAccountUser, type UserInfo } from './authentication.js';
import type { KubeObject } from './kube-object.js';
import { authorize, bootstrapPolicy, forbidden, type PolicyRule, type RbacObjects, type Subject } from './rbac.js';
import { requestAttributes } from './request-attributes.js';

const routerAccount = serviceAccountUser('kube-system', 'kube-router');
const alice: UserInfo = { name: 'alice', groups: ['developers', 'system:authenticated'] };

const clusterRole = (name: string, rules: PolicyRule[]): KubeObject => ({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name }, rules });
const role = (namespace: string, name: string, rules: PolicyRule[]): KubeObject => ({
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'Role',
  metadata: { namespace, name },
  rules,
});
const binding = (kind: 'ClusterRoleBinding' | 'RoleBinding', namespace: string | undefined, roleRef: { kind: string; name: string }, subjects: Subject[]): KubeObject => ({
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind,
  metadata: { name: `${roleRef.name}-binding`, ...(namespace && { namespace }) },
  roleRef: { apiGroup: 'rbac.authorization.k8s.io', ...roleRef },
  subjects,
});

/** RbacObjects over plain arrays, as the store answers them. */
function objects(items: KubeObject[]): RbacObjects {
  const of = (kind: string) => items.filter((item) => item.kind === kind);
  return {
    clusterRoleBindings: () => of('ClusterRoleBinding'),
    roleBindings: (namespace) => of('RoleBinding').filter((item) => item.metadata.namespace === namespace),
    clusterRole: (name) => of('ClusterRole').find((item) => item.metadata.name === name),
    role: (namespace, name) => of('Role').find((item) => item.metadata.namespace === namespace && item.metadata.name === name),
  };
}

const routerRole = clusterRole('kube-router', [
  { apiGroups: [''], resources: ['pods', 'services'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: [''], resources: ['services/status'], verbs: ['update'] },
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] },
]);
const routerBinding = binding('ClusterRoleBinding', undefined, { kind: 'ClusterRole', name: 'kube-router' }, [
  { kind: 'ServiceAccount', name: 'kube-router', namespace: 'kube-system' },
]);

const can = (store: RbacObjects, user: UserInfo, method: string, url: string) => authorize(store, requestAttributes(user, method, url)).allowed;

describe('requestAttributes (RequestInfoFactory)', () => {
  const attributes = (method: string, url: string) => requestAttributes(alice, method, url);

  it('names the verb of each method, list and watch for a GET without a name, deletecollection for such a DELETE', () => {
    expect(attributes('GET', '/api/v1/namespaces/default/pods/web')).toMatchObject({ verb: 'get', apiGroup: '', namespace: 'default', resource: 'pods', name: 'web' });
    expect(attributes('GET', '/api/v1/pods')).toMatchObject({ verb: 'list', namespace: '', resource: 'pods', name: '' });
    expect(attributes('GET', '/api/v1/pods?watch=true&resourceVersion=5')).toMatchObject({ verb: 'watch', resource: 'pods' });
    expect(attributes('GET', '/api/v1/pods?watch=1')).toMatchObject({ verb: 'watch' });
    expect(attributes('GET', '/api/v1/pods?watch=false')).toMatchObject({ verb: 'list' });
    expect(attributes('GET', '/api/v1/watch/namespaces/default/pods')).toMatchObject({ verb: 'watch', namespace: 'default', resource: 'pods' });
    expect(attributes('POST', '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases')).toMatchObject({ verb: 'create', apiGroup: 'coordination.k8s.io', resource: 'leases' });
    expect(attributes('PUT', '/api/v1/namespaces/default/services/web/status')).toMatchObject({ verb: 'update', resource: 'services', subresource: 'status', name: 'web' });
    expect(attributes('PATCH', '/api/v1/namespaces/default/services/web/status')).toMatchObject({ verb: 'patch', subresource: 'status' });
    expect(attributes('DELETE', '/api/v1/namespaces/default/pods/web')).toMatchObject({ verb: 'delete', name: 'web' });
    expect(attributes('DELETE', '/api/v1/namespaces/default/pods')).toMatchObject({ verb: 'deletecollection', name: '' });
  });

  it('takes the name a list or watch pins with fieldSelector=metadata.name, so resourceNames rules apply to it', () => {
    expect(attributes('GET', '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?fieldSelector=metadata.name%3Dlock&watch=true')).toMatchObject({
      verb: 'watch',
      name: 'lock',
    });
    expect(attributes('GET', '/api/v1/pods?fieldSelector=spec.nodeName%3Dn1')).toMatchObject({ verb: 'list', name: '' });
  });

  it("reads a Namespace's own URLs as the namespace they name", () => {
    expect(attributes('GET', '/api/v1/namespaces/team-a')).toMatchObject({ resource: 'namespaces', name: 'team-a', namespace: 'team-a' });
    expect(attributes('PUT', '/api/v1/namespaces/team-a/status')).toMatchObject({ resource: 'namespaces', name: 'team-a', subresource: 'status', namespace: 'team-a' });
    expect(attributes('GET', '/api/v1/namespaces')).toMatchObject({ verb: 'list', resource: 'namespaces', namespace: '' });
  });

  it('treats discovery, OpenAPI and /version as non-resource paths with the lowercase method as verb', () => {
    for (const path of ['/api', '/api/v1', '/apis', '/apis/coordination.k8s.io', '/apis/coordination.k8s.io/v1', '/openapi/v3/api/v1', '/version']) {
      expect(attributes('GET', path), path).toEqual({ resourceRequest: false, user: alice, verb: 'get', path });
    }
  });
});

describe('authorize (the RBAC authorizer)', () => {
  it('allows what a ClusterRoleBinding of a ServiceAccount grants, everywhere, and nothing else', () => {
    const store = objects([routerRole, routerBinding]);
    expect(can(store, routerAccount, 'GET', '/api/v1/pods?watch=true')).toBe(true);
    expect(can(store, routerAccount, 'GET', '/api/v1/namespaces/team-a/services/web')).toBe(true);
    expect(can(store, routerAccount, 'PUT', '/api/v1/namespaces/default/services/web/status')).toBe(true);
    // The subresource is its own resource: services/status does not grant services, nor the other way round.
    expect(can(store, routerAccount, 'PUT', '/api/v1/namespaces/default/services/web')).toBe(false);
    expect(can(store, routerAccount, 'PATCH', '/api/v1/namespaces/default/services/web/status')).toBe(false);
    expect(can(store, routerAccount, 'GET', '/api/v1/namespaces/default/pods/web/status')).toBe(false);
    // The group is part of the grant: leases in coordination.k8s.io, not in the core group.
    expect(can(store, routerAccount, 'POST', '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases')).toBe(true);
    expect(can(store, routerAccount, 'GET', '/apis/coordination.k8s.io/v1/leases')).toBe(false);
    expect(can(store, routerAccount, 'DELETE', '/api/v1/namespaces/default/pods/web')).toBe(false);
    // Another ServiceAccount of that name in another namespace is someone else.
    expect(can(store, serviceAccountUser('default', 'kube-router'), 'GET', '/api/v1/pods')).toBe(false);
  });

  it('matches "*" verbs, groups and resources, "*/subresource", and resourceNames', () => {
    const store = objects([
      clusterRole('wide', [
        { apiGroups: ['*'], resources: ['leases'], verbs: ['*'] },
        { apiGroups: [''], resources: ['*/status'], verbs: ['patch'] },
        { apiGroups: ['networking.k8s.io'], resources: ['*'], verbs: ['list'] },
        { apiGroups: [''], resources: ['configmaps'], resourceNames: ['kube-proxy'], verbs: ['get', 'watch'] },
      ]),
      binding('ClusterRoleBinding', undefined, { kind: 'ClusterRole', name: 'wide' }, [{ kind: 'User', name: 'alice' }]),
    ]);
    expect(can(store, alice, 'DELETE', '/apis/coordination.k8s.io/v1/namespaces/x/leases')).toBe(true);
    expect(can(store, alice, 'PATCH', '/api/v1/namespaces/default/services/web/status')).toBe(true);
    expect(can(store, alice, 'PATCH', '/api/v1/nodes/n1/status')).toBe(true);
    expect(can(store, alice, 'PATCH', '/api/v1/nodes/n1')).toBe(false);
    expect(can(store, alice, 'GET', '/apis/networking.k8s.io/v1/networkpolicies')).toBe(true);
    expect(can(store, alice, 'GET', '/apis/networking.k8s.io/v1/networkpolicies?watch=true')).toBe(false);
    expect(can(store, alice, 'GET', '/api/v1/namespaces/kube-system/configmaps/kube-proxy')).toBe(true);
    expect(can(store, alice, 'GET', '/api/v1/namespaces/kube-system/configmaps/other')).toBe(false);
    // A list of every ConfigMap is not a get of one; a watch pinned to the name is.
    expect(can(store, alice, 'GET', '/api/v1/namespaces/kube-system/configmaps')).toBe(false);
    expect(can(store, alice, 'GET', '/api/v1/namespaces/kube-system/configmaps?watch=true&fieldSelector=metadata.name%3Dkube-proxy')).toBe(true);
  });

  it('grants a RoleBinding only in its namespace, whether it binds a Role or a ClusterRole', () => {
    const store = objects([
      clusterRole('reader', [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list'] }]),
      binding('RoleBinding', 'team-a', { kind: 'ClusterRole', name: 'reader' }, [{ kind: 'Group', name: 'developers' }]),
      role('team-b', 'lease-writer', [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] }]),
      // A ServiceAccount subject without a namespace is the binding's namespace's.
      binding('RoleBinding', 'team-b', { kind: 'Role', name: 'lease-writer' }, [{ kind: 'ServiceAccount', name: 'builder' }]),
    ]);
    expect(can(store, alice, 'GET', '/api/v1/namespaces/team-a/pods')).toBe(true);
    expect(can(store, alice, 'GET', '/api/v1/namespaces/team-b/pods')).toBe(false);
    expect(can(store, alice, 'GET', '/api/v1/pods')).toBe(false);
    const builder = serviceAccountUser('team-b', 'builder');
    expect(can(store, builder, 'POST', '/apis/coordination.k8s.io/v1/namespaces/team-b/leases')).toBe(true);
    expect(can(store, builder, 'POST', '/apis/coordination.k8s.io/v1/namespaces/team-a/leases')).toBe(false);
    expect(can(store, serviceAccountUser('team-a', 'builder'), 'POST', '/apis/coordination.k8s.io/v1/namespaces/team-b/leases')).toBe(false);
  });

  it('never restricts system:masters, and grants discovery to every authenticated user by the bootstrap policy', () => {
    const store = objects(bootstrapPolicy());
    expect(can(store, ADMIN_USER, 'DELETE', '/api/v1/namespaces/default/pods')).toBe(true);
    expect(can(objects([]), ADMIN_USER, 'GET', '/api/v1/secrets')).toBe(true);
    for (const path of ['/api', '/api/v1', '/apis', '/apis/discovery.k8s.io/v1', '/openapi/v3', '/openapi/v3/api/v1', '/version']) {
      expect(can(store, routerAccount, 'GET', path), path).toBe(true);
    }
    expect(can(store, routerAccount, 'GET', '/api/v1/pods')).toBe(false);
    expect(can(store, ANONYMOUS_USER, 'GET', '/version')).toBe(true);
    expect(can(store, ANONYMOUS_USER, 'GET', '/apis')).toBe(false);
  });

  it('names the missing role of a binding of the user in the reason of a denial', () => {
    const decision = authorize(objects([routerBinding]), requestAttributes(routerAccount, 'GET', '/api/v1/pods'));
    expect(decision).toEqual({ allowed: false, reason: 'RBAC: clusterrole.rbac.authorization.k8s.io "kube-router" not found' });
    expect(authorize(objects([routerBinding]), requestAttributes(alice, 'GET', '/api/v1/pods')).reason).toBe('');
  });
});

describe('forbidden: the 403 Status', () => {
  it("words a denial exactly as kube-apiserver's, with details naming the resource", () => {
    const statusPatch = forbidden(requestAttributes(routerAccount, 'PATCH', '/api/v1/namespaces/default/services/x/status'));
    expect(statusPatch.toStatus()).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message:
        'services "x" is forbidden: User "system:serviceaccount:kube-system:kube-router" cannot patch resource "services/status" in API group "" in the namespace "default"',
      reason: 'Forbidden',
      details: { name: 'x', kind: 'services' },
      code: 403,
    });
    expect(forbidden(requestAttributes(routerAccount, 'GET', '/apis/coordination.k8s.io/v1/leases?watch=true')).toStatus()).toMatchObject({
      message: 'leases.coordination.k8s.io is forbidden: User "system:serviceaccount:kube-system:kube-router" cannot watch resource "leases" in API group "coordination.k8s.io" at the cluster scope',
      details: { group: 'coordination.k8s.io', kind: 'leases' },
    });
    expect(forbidden(requestAttributes(ANONYMOUS_USER, 'GET', '/apis')).toStatus()).toMatchObject({
      message: 'forbidden: User "system:anonymous" cannot get path "/apis"',
      details: {},
    });
    expect(forbidden(requestAttributes(alice, 'GET', '/api/v1/pods'), 'RBAC: clusterrole.rbac.authorization.k8s.io "x" not found').message).toBe(
      'pods is forbidden: User "alice" cannot list resource "pods" in API group "" at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io "x" not found',
    );
  });
});
