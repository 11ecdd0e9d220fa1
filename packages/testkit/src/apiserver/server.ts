import { rmSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ApiToken } from './authentication.js';
import { TokenAuthenticator } from './authentication.js';
import { badRequest } from './errors.js';
import type { ApiServerFaults } from './faults.js';
import { FaultInjector } from './faults.js';
import { buildApp } from './http/app.js';
import type { RequestLog } from './http/request-log.js';
import { RequestLog as RequestLogImpl } from './http/request-log.js';
import { WatchStreams } from './http/watch.js';
import type { KubeObject } from './kube-object.js';
import { kubeconfigYaml, type KubeconfigAccess } from './kubeconfig.js';
import type { PatchType } from './patch/apply-patch.js';
import type { RbacObjects } from './rbac.js';
import { authorize, bootstrapPolicy, RBAC_GROUP } from './rbac.js';
import type { RequestAttributes } from './request-attributes.js';
import type { ResourceType } from './resources.js';
import { ResourceRegistry } from './resources.js';
import { parseFieldSelector } from './selectors/field-selector.js';
import { parseLabelSelector } from './selectors/label-selector.js';
import { ObjectStore } from './store/object-store.js';
import type { WriteOptions } from './store/object-store.js';
import { loadSchemaValidators, SchemaValidation } from './store/schema-validation.js';
import { createServingCertificate } from './tls.js';
import { startEndpointSliceController, type EndpointSliceControllerOptions } from './endpointslice-controller.js';

/**
 * What the programmatic API accepts: a plain KubeObject, or any object with apiVersion, kind and metadata
 * such as the classes of @kubernetes/client-node (V1Pod, ...), which KubeObject's index signature refuses.
 */
export type KubeObjectInput =
  | KubeObject
  | { apiVersion?: string; kind?: string; metadata?: { name?: string; namespace?: string; resourceVersion?: string } };

export interface ApiServerOptions {
  /** Address to listen on; default 127.0.0.1. */
  host?: string;
  /** Port to listen on; default 0 (a free port). */
  port?: number;
  /** Objects to create before the server listens (Namespaces are created first). */
  seed?: readonly KubeObjectInput[];
  /** How often watches that allow bookmarks get one; default 1000 ms. */
  bookmarkIntervalMs?: number;
  /** How many changes a watch can resume across; older resourceVersions are expired (410); default 1000. */
  historyLimit?: number;
  /** Service cluster IP ranges, one per family; default 10.96.0.0/12 and fd00:10:96::/108. */
  serviceCidrs?: readonly string[];
  /**
   * Whether created and updated objects of the built-in kinds are checked against the Kubernetes schemas and refused
   * as kube-apiserver refuses them (400 for a field of the wrong type, 422 Invalid for a missing required field or an
   * unsupported value). Default true. `false` stores anything, for tests that feed bad objects to the agent on
   * purpose; `{ except: ['pods'] }` validates every resource but the plurals listed. Seeds are validated too.
   */
  validation?: boolean | { except: readonly string[] };
  /**
   * Serve HTTPS, with a CA and a serving certificate made for this server (for `host`, localhost and loopback), as
   * kube-apiserver does; `server.ca` is the CA to trust. Default false: plain HTTP.
   */
  tls?: boolean;
  /**
   * The bearer tokens the server accepts. Given, every API request without one of them is answered 401 Unauthorized,
   * as kube-apiserver answers it (the health endpoints stay open); `server.authentication.setTokens` changes them
   * while it runs, as a rotated service account token does. A plain string authenticates an administrator (in
   * `system:masters`, never restricted); `{ token, user }` authenticates that user (see `serviceAccountUser`), whom
   * `rbac` restricts. Default: no authentication (every request is `system:anonymous`).
   */
  tokens?: readonly ApiToken[];
  /**
   * Authorize every API request as kube-apiserver's RBAC authorizer does, from the Roles, ClusterRoles, RoleBindings
   * and ClusterRoleBindings stored in the server, and answer a denied one 403 Forbidden with kube-apiserver's Status.
   * kube-apiserver's bootstrap cluster-admin, system:discovery and system:public-info-viewer roles and bindings are
   * created at start, so every authenticated user reads discovery and OpenAPI. Default false: whoever authenticates
   * may do anything.
   */
  rbac?: boolean;
  /**
   * Keep EndpointSlices as kube-controller-manager's EndpointSlice controller does (a slice per address family of
   * every Service with a selector, from the pods it selects; ready, serving and terminating conditions, named ports,
   * zones and hints; slices of a Service that went removed), and create kube-apiserver's `kubernetes` Service in
   * `default` with its EndpointSlice `kubernetes` (this server's address and port). Default false: no slice appears
   * unless someone writes it.
   */
  endpointSliceController?: boolean | EndpointSliceControllerOptions;
  /**
   * Delete Pods gracefully, as kube-apiserver does: a DELETE of a pod bound to a node, with a grace period above 0
   * (DeleteOptions.gracePeriodSeconds, else spec.terminationGracePeriodSeconds, else 30), only sets its
   * deletionTimestamp and deletionGracePeriodSeconds (a MODIFIED event) and the node's kubelet removes it with grace
   * 0 once it stopped; a second DELETE may shorten the grace, never lengthen it. An unbound or finished pod, or grace
   * 0, goes at once. Default false: a DELETE removes a pod at once, for servers with no kubelet to finish the job.
   */
  gracefulPodDeletion?: boolean;
}

/** Per-write options of the programmatic API. */
export interface WriteRequestOptions {
  /** Check this object against its schema (true) or store it as it is (false); default: `server.validation`. */
  validate?: boolean;
}

/** The schema validation switch of a running server; resources are plurals (`pods`, `networkpolicies`). */
export interface ApiServerValidation {
  isEnabled(resource: string): boolean;
  /** Validates writes to every resource, or to one. */
  enable(resource?: string): void;
  /** Stores anything written to every resource, or to one. */
  disable(resource?: string): void;
}

/** DeleteOptions of the programmatic API. */
export interface DeleteRequestOptions {
  gracePeriodSeconds?: number;
}

export interface ListSelectors {
  labelSelector?: string;
  fieldSelector?: string;
}

export interface ApiServer {
  /** http://host:port, or https:// with `tls` */
  readonly url: string;
  /** The CA (PEM) that signed the serving certificate, with `tls`. */
  readonly ca: string | undefined;
  /** The bearer tokens accepted now; undefined when the server authenticates no one (anyone may call). */
  readonly authentication: { readonly tokens: readonly ApiToken[] | undefined; setTokens(tokens: readonly ApiToken[] | undefined): void };
  /** Whether requests are authorized by RBAC (the `rbac` option). */
  readonly rbac: boolean;
  readonly port: number;
  readonly registry: ResourceRegistry;
  readonly faults: ApiServerFaults;
  /** Every API request the server answered, with its Kubernetes verb and resource. */
  readonly requests: RequestLog;
  /** Turns schema validation on or off while the server runs, for every resource or one. */
  readonly validation: ApiServerValidation;
  /** The current (global) resourceVersion. */
  readonly resourceVersion: string;
  /**
   * Writes a kubeconfig (context 'embedded') to `path` or a temporary file; returns the path. It trusts the server's
   * CA and, unless `access` says otherwise, sends the first accepted token.
   */
  writeKubeconfig(path?: string, access?: KubeconfigAccess): Promise<string>;
  kubeconfigYaml(access?: KubeconfigAccess): string;
  create(obj: KubeObjectInput, options?: WriteRequestOptions): KubeObject;
  get(apiVersion: string, kind: string, namespace: string | undefined, name: string): KubeObject | undefined;
  list(apiVersion: string, kind: string, namespace?: string, selectors?: ListSelectors): KubeObject[];
  /** Replaces an object (not its status, for kinds with a status subresource); 409 on a stale resourceVersion. */
  update(obj: KubeObjectInput, options?: WriteRequestOptions): KubeObject;
  /** Replaces only the status, as a PUT to the status subresource does. */
  updateStatus(obj: KubeObjectInput, options?: WriteRequestOptions): KubeObject;
  /** Creates the object, or replaces it (ignoring resourceVersion) when it exists. */
  upsert(obj: KubeObjectInput, options?: WriteRequestOptions): KubeObject;
  patch(
    apiVersion: string,
    kind: string,
    namespace: string | undefined,
    name: string,
    patch: unknown,
    type?: PatchType,
    options?: WriteRequestOptions,
  ): KubeObject;
  patchStatus(
    apiVersion: string,
    kind: string,
    namespace: string | undefined,
    name: string,
    patch: unknown,
    type?: PatchType,
    options?: WriteRequestOptions,
  ): KubeObject;
  /** As a DELETE: a pod may only be marked for deletion (`gracefulPodDeletion`) unless `gracePeriodSeconds` is 0. */
  delete(apiVersion: string, kind: string, namespace: string | undefined, name: string, options?: DeleteRequestOptions): KubeObject;
  /** The number of open watch streams, optionally on one resource (a plural, e.g. 'pods'). */
  openWatches(resource?: string): number;
  /** Ends every watch, stops listening and removes temporary kubeconfigs. */
  close(): Promise<void>;
}

const initialNamespaces = ['default', 'kube-system', 'kube-public', 'kube-node-lease'];

// Temporary kubeconfig directories of servers not closed yet; a test that fails before close() still
// leaves no files behind once its process exits.
const temporaryKubeconfigDirs = new Set<string>();
let exitCleanupRegistered = false;

async function temporaryKubeconfigDir(): Promise<string> {
  if (!exitCleanupRegistered) {
    exitCleanupRegistered = true;
    process.once('exit', () => {
      for (const dir of temporaryKubeconfigDirs) rmSync(dir, { recursive: true, force: true });
    });
  }
  const dir = await mkdtemp(join(tmpdir(), 'krt-kubeconfig-'));
  temporaryKubeconfigDirs.add(dir);
  return dir;
}

/** Starts the embedded Kubernetes API server, over plain HTTP unless `tls`. */
export async function startApiServer(options: ApiServerOptions = {}): Promise<ApiServer> {
  const host = options.host ?? '127.0.0.1';
  const certificate = options.tls ? await createServingCertificate([host]) : undefined;
  const authenticator = new TokenAuthenticator(options.tokens);
  const registry = new ResourceRegistry();
  const validationOption = options.validation ?? true;
  const validation = new SchemaValidation(
    await loadSchemaValidators(),
    validationOption !== false,
    typeof validationOption === 'object' ? validationOption.except : [],
  );
  const store = new ObjectStore({
    registry,
    historyLimit: options.historyLimit ?? 1000,
    serviceCidrs: options.serviceCidrs ?? ['10.96.0.0/12', 'fd00:10:96::/108'],
    validation,
    gracefulPodDeletion: options.gracefulPodDeletion ?? false,
  });
  const kinds = new KindResolver(registry);
  seedStore(store, kinds, options);
  const watches = new WatchStreams(store, options.bookmarkIntervalMs ?? 1000);
  const faults = new FaultInjector(
    (resource) => watches.close(resource),
    () => store.compactHistory(),
    (resource, line) => watches.writeLine(resource, line),
  );
  const requests = new RequestLogImpl();
  const rbacObjects = rbacObjectsOf(store, kinds);
  let address = '';

  const app = buildApp({
    registry,
    store,
    watches,
    faults,
    requests,
    serverAddress: () => address,
    ...(certificate && { https: { key: certificate.key, cert: certificate.cert } }),
    // With neither tokens nor RBAC, nobody is asked who they are.
    ...((authenticator.enabled || options.rbac) && { authenticate: (authorization: string | undefined) => authenticator.authenticate(authorization) }),
    ...(options.rbac && { authorize: (attributes: RequestAttributes) => authorize(rbacObjects, attributes) }),
  });
  await app.listen({ host, port: options.port ?? 0 });
  const { port } = app.server.address() as AddressInfo;
  let endpointSliceController: ReturnType<typeof startEndpointSliceController> | undefined;
  try {
    if (options.endpointSliceController) endpointSliceController = startEndpointSliceController(store, registry, { ...options, port }, options.endpointSliceController);
  } catch (error) {
    await app.close();
    throw error;
  }
  address = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  const url = `${certificate ? 'https' : 'http'}://${address}`;
  const kubeconfigs = new KubeconfigFiles(url, (given = {}) => {
    const token = authenticator.firstToken;
    const defaults = { ...(certificate && { ca: certificate.ca }), ...(token !== undefined && given.tokenFile === undefined && { token }) };
    return { ...defaults, ...given };
  });

  return {
    url,
    port,
    ca: certificate?.ca,
    authentication: {
      get tokens() {
        return authenticator.tokens;
      },
      setTokens(next) {
        authenticator.set(next);
      },
    },
    rbac: options.rbac === true,
    registry,
    faults,
    requests,
    validation,
    get resourceVersion() {
      return String(store.resourceVersion);
    },
    kubeconfigYaml: (given) => kubeconfigs.yaml(given),
    writeKubeconfig: (path, given) => kubeconfigs.write(path, given),
    ...objectApi(store, kinds),
    openWatches: (resource) => watches.count(resource),
    async close() {
      endpointSliceController?.stop();
      watches.close();
      await app.close();
      await kubeconfigs.remove();
    },
  };
}

/** The registry's resources by apiVersion and kind, as the programmatic API and the seed name them. */
class KindResolver {
  constructor(private readonly registry: ResourceRegistry) {}

  resourceOf(apiVersion: string | undefined, kind: string | undefined): ResourceType {
    const resource = apiVersion && kind ? this.registry.byKind(apiVersion, kind) : undefined;
    if (!resource) throw badRequest(`the embedded API server does not serve ${apiVersion ?? '?'} ${kind ?? '?'}`);
    return resource;
  }

  /** A copy of the input as a KubeObject, in the default namespace when its kind is namespaced and it names none. */
  asObject(input: KubeObjectInput): KubeObject {
    const obj = structuredClone(input) as KubeObject;
    obj.metadata ??= {};
    const resource = this.resourceOf(obj.apiVersion, obj.kind);
    if (resource.namespaced) obj.metadata.namespace ||= 'default';
    return obj;
  }
}

/** The namespaces kube-apiserver starts with, the seed (its Namespaces first), then RBAC's bootstrap policy. */
function seedStore(store: ObjectStore, kinds: KindResolver, options: ApiServerOptions): void {
  for (const name of initialNamespaces) {
    store.create(kinds.resourceOf('v1', 'Namespace'), { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  }
  const seed = [...(options.seed ?? [])].sort((a, b) => Number(b.kind === 'Namespace') - Number(a.kind === 'Namespace'));
  for (const input of seed) {
    const obj = kinds.asObject(input);
    const resource = kinds.resourceOf(obj.apiVersion, obj.kind);
    if (resource.kind === 'Namespace' && initialNamespaces.includes(obj.metadata.name ?? '')) {
      store.update(resource, { ...obj, metadata: { ...obj.metadata, resourceVersion: undefined } });
    } else {
      store.create(resource, obj);
    }
  }
  // After the seed, which may bring its own version of a bootstrap role: kube-apiserver keeps an existing one too.
  for (const obj of options.rbac ? bootstrapPolicy() : []) {
    const resource = kinds.resourceOf(obj.apiVersion, obj.kind);
    if (!store.tryGet(resource, undefined, obj.metadata.name ?? '')) store.create(resource, obj);
  }
}

/** The RBAC objects the authorizer reads, as stored now. */
function rbacObjectsOf(store: ObjectStore, kinds: KindResolver): RbacObjects {
  const rbacResource = (kind: string) => kinds.resourceOf(`${RBAC_GROUP}/v1`, kind);
  return {
    clusterRoleBindings: () => store.list(rbacResource('ClusterRoleBinding'), undefined),
    roleBindings: (namespace) => store.list(rbacResource('RoleBinding'), namespace),
    clusterRole: (name) => store.tryGet(rbacResource('ClusterRole'), undefined, name),
    role: (namespace, name) => store.tryGet(rbacResource('Role'), namespace, name),
  };
}

type ObjectApi = Pick<ApiServer, 'create' | 'get' | 'list' | 'update' | 'updateStatus' | 'upsert' | 'patch' | 'patchStatus' | 'delete'>;

/** The programmatic API: the store's writes and reads, by apiVersion and kind. */
function objectApi(store: ObjectStore, kinds: KindResolver): ObjectApi {
  const writeOptions = (request: WriteRequestOptions | undefined): WriteOptions =>
    request?.validate === undefined ? {} : { validate: request.validate };
  const statusOf = (resource: ResourceType) => resource.hasStatusSubresource && { subresource: 'status' as const };
  return {
    create(input, request) {
      const obj = kinds.asObject(input);
      return store.create(kinds.resourceOf(obj.apiVersion, obj.kind), obj, writeOptions(request));
    },
    get(apiVersion, kind, namespace, name) {
      return store.tryGet(kinds.resourceOf(apiVersion, kind), namespace ?? 'default', name);
    },
    list(apiVersion, kind, namespace, selectors = {}) {
      const resource = kinds.resourceOf(apiVersion, kind);
      return store.list(resource, namespace, {
        labelSelector: parseLabelSelector(selectors.labelSelector),
        fieldSelector: parseFieldSelector(selectors.fieldSelector, resource),
      });
    },
    update(input, request) {
      const obj = kinds.asObject(input);
      return store.update(kinds.resourceOf(obj.apiVersion, obj.kind), obj, writeOptions(request));
    },
    updateStatus(input, request) {
      const obj = kinds.asObject(input);
      const resource = kinds.resourceOf(obj.apiVersion, obj.kind);
      return store.update(resource, obj, { ...writeOptions(request), ...statusOf(resource) });
    },
    upsert(input, request) {
      const obj = kinds.asObject(input);
      const resource = kinds.resourceOf(obj.apiVersion, obj.kind);
      if (!store.tryGet(resource, obj.metadata.namespace, obj.metadata.name ?? '')) return store.create(resource, obj, writeOptions(request));
      return store.update(resource, { ...obj, metadata: { ...obj.metadata, resourceVersion: undefined } }, writeOptions(request));
    },
    patch(apiVersion, kind, namespace, name, patch, type = 'merge', request) {
      return store.patch(kinds.resourceOf(apiVersion, kind), namespace ?? 'default', name, type, patch, writeOptions(request));
    },
    patchStatus(apiVersion, kind, namespace, name, patch, type = 'merge', request) {
      const resource = kinds.resourceOf(apiVersion, kind);
      return store.patch(resource, namespace ?? 'default', name, type, patch, { ...writeOptions(request), ...statusOf(resource) });
    },
    delete(apiVersion, kind, namespace, name, request) {
      const gracePeriodSeconds = request?.gracePeriodSeconds;
      return store.delete(kinds.resourceOf(apiVersion, kind), namespace ?? 'default', name, gracePeriodSeconds === undefined ? {} : { gracePeriodSeconds });
    },
  };
}

/** The server's kubeconfigs: as YAML, or written to a path or to a temporary file that close() removes. */
class KubeconfigFiles {
  private readonly temporaryDirs: string[] = [];

  constructor(
    private readonly url: string,
    private readonly access: (given?: KubeconfigAccess) => KubeconfigAccess,
  ) {}

  yaml(given?: KubeconfigAccess): string {
    return kubeconfigYaml(this.url, 'default', this.access(given));
  }

  async write(path?: string, given?: KubeconfigAccess): Promise<string> {
    let target = path;
    if (target === undefined) {
      const dir = await temporaryKubeconfigDir();
      this.temporaryDirs.push(dir);
      target = join(dir, 'config');
    }
    await writeFile(target, this.yaml(given), { mode: 0o600 });
    return target;
  }

  async remove(): Promise<void> {
    await Promise.all(this.temporaryDirs.map((dir) => rm(dir, { recursive: true, force: true })));
    for (const dir of this.temporaryDirs) temporaryKubeconfigDirs.delete(dir);
  }
}
