import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ApiServer } from '../apiserver/server.js';
import { serviceAccountUser } from '../apiserver/authentication.js';
import { KUBE_ROUTER_CNI_CONF_NAME, KUBE_ROUTER_CNI_CONFLIST } from '../cni/kube-router-cni-conf.js';

/**
 * Where kube-router's kubeadm DaemonSets (kubeadm-kuberouter-all-features.yaml) mount what the node gives the
 * container: the pod's service account, kubeadm's kube-proxy kubeconfig (the ConfigMap's kubeconfig.conf as
 * `kubeconfig`) and the CNI directory the install-cni init container fills.
 */
export const KUBEADM_MOUNT_PATHS = {
  serviceAccount: '/var/run/secrets/kubernetes.io/serviceaccount',
  kubeconfigDir: '/var/lib/kube-router',
  cniConfDir: '/etc/cni/net.d',
} as const;

/** A node file or directory and where the DaemonSet's container sees it. */
export interface KubeadmMount {
  source: string;
  target: string;
  readOnly: boolean;
}

export interface KubeadmNodeFiles {
  /** The node's copy of the CNI file, for the lab's kubelet (`cniConfFile` of a lab node). */
  cniConfFile: string;
  /** The container's view: serviceaccount (ro), kube-router's kubeconfig directory (ro), the CNI directory. */
  mounts: readonly KubeadmMount[];
  /** The agent's kubeconfig path inside the container. */
  kubeconfig: string;
  /** The CNI file's path inside the container (KUBE_ROUTER_CNI_CONF_FILE). */
  containerCniConfFile: string;
}

/**
 * What a kubeadm node running kube-router's kubeadm DaemonSet has before the agent starts, in `dir`: the
 * `kube-system/kube-router` ServiceAccount's token (registered with `server`), ca.crt and namespace; kubeadm's
 * kube-proxy kubeconfig naming them where the container sees them (HTTPS, client-go's `tokenFile`); and the DaemonSet
 * ConfigMap's conflist without ranges, with host-local's leases in `dir` (a node's /var/lib/cni is its own).
 */
export async function writeKubeadmNodeFiles(server: ApiServer, dir: string): Promise<KubeadmNodeFiles> {
  if (server.ca === undefined) throw new Error('a kubeadm node needs an HTTPS API server (startApiServer({ tls: true }))');
  const accountDir = join(dir, 'serviceaccount');
  const kubeconfigDir = join(dir, 'kube-router');
  const cniDir = join(dir, 'cni-net.d');
  for (const path of [accountDir, kubeconfigDir, cniDir]) await mkdir(path, { recursive: true });
  const token = randomBytes(24).toString('hex');
  await writeFile(join(accountDir, 'token'), token, { mode: 0o600 });
  await writeFile(join(accountDir, 'ca.crt'), server.ca);
  await writeFile(join(accountDir, 'namespace'), 'kube-system');
  server.authentication.setTokens([...(server.authentication.tokens ?? []), { token, user: serviceAccountUser('kube-system', 'kube-router') }]);
  await server.writeKubeconfig(join(kubeconfigDir, 'kubeconfig'), {
    caFile: `${KUBEADM_MOUNT_PATHS.serviceAccount}/ca.crt`,
    tokenFile: `${KUBEADM_MOUNT_PATHS.serviceAccount}/token`,
  });
  const [bridge, ...others] = KUBE_ROUTER_CNI_CONFLIST.plugins;
  const conflist = { ...KUBE_ROUTER_CNI_CONFLIST, plugins: [{ ...bridge, ipam: { ...bridge.ipam, dataDir: join(dir, 'cni-leases') } }, ...others] };
  const cniConfFile = join(cniDir, KUBE_ROUTER_CNI_CONF_NAME);
  await writeFile(cniConfFile, JSON.stringify(conflist, null, 2));
  return {
    cniConfFile,
    mounts: [
      { source: accountDir, target: KUBEADM_MOUNT_PATHS.serviceAccount, readOnly: true },
      { source: kubeconfigDir, target: KUBEADM_MOUNT_PATHS.kubeconfigDir, readOnly: true },
      { source: cniDir, target: KUBEADM_MOUNT_PATHS.cniConfDir, readOnly: false },
    ],
    kubeconfig: `${KUBEADM_MOUNT_PATHS.kubeconfigDir}/kubeconfig`,
    containerCniConfFile: `${KUBEADM_MOUNT_PATHS.cniConfDir}/${KUBE_ROUTER_CNI_CONF_NAME}`,
  };
}
