import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { isIPv6 } from 'node:net';
import { dirname, isAbsolute, join } from 'node:path';
import { dumpYaml, KubeConfig, loadYaml } from '@kubernetes/client-node';
import type { Cluster, User } from '@kubernetes/client-node';
import { addTokenFileAuthenticator, tokenFileUser } from './token-file-auth.js';

/** Where Kubernetes mounts a pod's service account credentials. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface KubeConfigOptions {
  /** --kubeconfig: a kubeconfig file. Its current context is used. */
  kubeconfig?: string;
  /** --master: the API server URL; overrides the server of the kubeconfig or of the in-cluster config. */
  master?: string;
  /** Environment to read KUBERNETES_SERVICE_HOST/PORT and KUBECONFIG from. Default process.env. */
  env?: NodeJS.ProcessEnv;
  /** The service account directory, for tests. */
  serviceAccountDir?: string;
}

/**
 * Builds the client configuration the way kube-router does: `--kubeconfig` (with `--master` overriding its server),
 * else the in-cluster service account (with `--master` overriding the service address, which matters when this
 * agent is the service proxy and the kubernetes Service VIP is not programmed yet), else `--master` alone, else the
 * KUBECONFIG file for running outside a cluster. It throws a readable error when none of them is available.
 */
export function loadKubeConfig(options: KubeConfigOptions = {}): KubeConfig {
  const env = options.env ?? process.env;
  const master = options.master?.trim() || undefined;
  const kubeConfig = new KubeConfig();
  addTokenFileAuthenticator(kubeConfig);

  if (options.kubeconfig) {
    if (!existsSync(options.kubeconfig)) throw new Error(`kubeconfig ${options.kubeconfig} does not exist`);
    loadKubeconfigFile(kubeConfig, options.kubeconfig);
    if (!kubeConfig.getCurrentCluster()) {
      throw new Error(`kubeconfig ${options.kubeconfig} has no current context with a cluster`);
    }
  } else if (inClusterPossible(env, options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR)) {
    loadInCluster(kubeConfig, env, options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR);
  } else if (master) {
    kubeConfig.loadFromClusterAndUser({ name: 'master', server: master, skipTLSVerify: false }, { name: 'anonymous' });
  } else if (env.KUBECONFIG) {
    const file = env.KUBECONFIG.split(':').find((path) => path.length > 0);
    if (!file || !existsSync(file)) throw new Error(`KUBECONFIG ${env.KUBECONFIG} does not name an existing file`);
    loadKubeconfigFile(kubeConfig, file);
  } else {
    throw new Error(
      'no Kubernetes client configuration: not running in a cluster (KUBERNETES_SERVICE_HOST and a service account ' +
        'token are missing) and neither --kubeconfig nor --master was given',
    );
  }

  if (master) overrideServer(kubeConfig, master);
  allowPlainHttp(kubeConfig);
  return kubeConfig;
}

/**
 * A kubeconfig file, with a user's token file read as client-go reads it. client-node knows only `token-file`, read
 * once at load, and not client-go's `tokenFile`, which kubeadm's kube-proxy kubeconfig (mounted by kube-router's
 * kubeadm DaemonSets) uses: every request went out without credentials and got 401. Either spelling becomes a
 * tokenFileUser, whose token is re-read as soon as the file changes (and at least every minute, as client-go does),
 * so a rotated bound service account token is used for lists, watches and writes alike. A relative path is relative
 * to the kubeconfig's directory, as in client-go.
 */
function loadKubeconfigFile(kubeConfig: KubeConfig, file: string): void {
  const raw = loadYaml<{ users?: Array<{ name?: unknown; user?: Record<string, unknown> | null }> } | null>(readFileSync(file, 'utf8'));
  const tokenFiles = new Map<string, string>();
  for (const entry of raw?.users ?? []) {
    const user = entry.user;
    const path = user?.tokenFile ?? user?.['token-file'];
    if (!user || typeof entry.name !== 'string' || typeof path !== 'string' || path === '') continue;
    // client-node would read `token-file` once, here and relative to the working directory.
    delete user.tokenFile;
    delete user['token-file'];
    // An inline token wins, as in client-go.
    if (!user.token) tokenFiles.set(entry.name, isAbsolute(path) ? path : join(dirname(file), path));
  }
  // What loadFromFile does, with the token files taken out.
  kubeConfig.loadFromString(dumpYaml(raw));
  kubeConfig.makePathsAbsolute(dirname(file));
  if (tokenFiles.size === 0) return;
  kubeConfig.loadFromOptions({
    clusters: kubeConfig.getClusters(),
    contexts: kubeConfig.getContexts(),
    users: kubeConfig.getUsers().map((user): User => {
      const tokenFile = tokenFiles.get(user.name);
      return tokenFile === undefined ? user : tokenFileUser(user, tokenFile);
    }),
    currentContext: kubeConfig.getCurrentContext(),
  });
}

function inClusterPossible(env: NodeJS.ProcessEnv, serviceAccountDir: string): boolean {
  return Boolean(env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT) && existsSync(join(serviceAccountDir, 'token'));
}

function loadInCluster(kubeConfig: KubeConfig, env: NodeJS.ProcessEnv, serviceAccountDir: string): void {
  const host = env.KUBERNETES_SERVICE_HOST ?? '';
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  const namespaceFile = join(serviceAccountDir, 'namespace');
  kubeConfig.loadFromOptions({
    clusters: [
      {
        name: 'in-cluster',
        server: `https://${isIPv6(host) ? `[${host}]` : host}:${port}`,
        caFile: join(serviceAccountDir, 'ca.crt'),
        skipTLSVerify: false,
      },
    ],
    // Bound service account tokens rotate: the token is re-read when the file changes.
    users: [tokenFileUser({ name: 'in-cluster' }, join(serviceAccountDir, 'token'))],
    contexts: [
      {
        name: 'in-cluster',
        cluster: 'in-cluster',
        user: 'in-cluster',
        ...(existsSync(namespaceFile) && { namespace: readFileSync(namespaceFile, 'utf8').trim() }),
      },
    ],
    currentContext: 'in-cluster',
  });
}

function overrideServer(kubeConfig: KubeConfig, master: string): void {
  const current = kubeConfig.getCurrentCluster();
  if (!current) throw new Error('cannot apply --master: the configuration has no current cluster');
  replaceCluster(kubeConfig, current.name, { ...current, server: master });
}

/**
 * client-node refuses http:// servers unless the cluster skips TLS verification, which for plain HTTP means nothing;
 * kube-router accepts an http --master (an insecure local port or a test server), so this does too.
 */
function allowPlainHttp(kubeConfig: KubeConfig): void {
  const current = kubeConfig.getCurrentCluster();
  if (current && current.server.startsWith('http:') && !current.skipTLSVerify) {
    replaceCluster(kubeConfig, current.name, { ...current, skipTLSVerify: true });
  }
}

function replaceCluster(kubeConfig: KubeConfig, name: string, cluster: Cluster): void {
  kubeConfig.loadFromOptions({
    clusters: kubeConfig.getClusters().map((existing) => (existing.name === name ? cluster : existing)),
    contexts: kubeConfig.getContexts(),
    users: kubeConfig.getUsers(),
    currentContext: kubeConfig.getCurrentContext(),
  });
}

export interface NodeNameOptions {
  /** --hostname-override. */
  hostnameOverride?: string;
  env?: NodeJS.ProcessEnv;
  /** Default os.hostname. */
  hostname?: () => string;
}

/**
 * This node's name, in kube-router's order (utils.GetNodeObject): --hostname-override, else NODE_NAME (set from the
 * downward API in the DaemonSet), else the host name. An explicit flag wins over the environment, so an operator
 * can override what the DaemonSet sets.
 */
export function resolveNodeName(options: NodeNameOptions = {}): string {
  const env = options.env ?? process.env;
  const name = options.hostnameOverride?.trim() || env.NODE_NAME?.trim() || (options.hostname ?? hostname)().trim();
  if (!name) throw new Error('cannot determine the node name: set NODE_NAME or --hostname-override');
  return name;
}

/** The leader election identity: POD_NAME (the downward API), else the host name. */
export function resolveIdentity(options: { env?: NodeJS.ProcessEnv; hostname?: () => string } = {}): string {
  const env = options.env ?? process.env;
  return env.POD_NAME?.trim() || (options.hostname ?? hostname)().trim();
}

/** The namespace this agent runs in: POD_NAMESPACE, else the service account's namespace, else kube-system. */
export function resolveNamespace(
  options: { env?: NodeJS.ProcessEnv; kubeConfig?: KubeConfig; serviceAccountDir?: string } = {},
): string {
  const env = options.env ?? process.env;
  if (env.POD_NAMESPACE?.trim()) return env.POD_NAMESPACE.trim();
  const namespaceFile = join(options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR, 'namespace');
  if (existsSync(namespaceFile)) {
    const namespace = readFileSync(namespaceFile, 'utf8').trim();
    if (namespace) return namespace;
  }
  return 'kube-system';
}
