import { stringify } from 'yaml';

export const kubeconfigContext = 'embedded';

/** A kubeconfig for the embedded server: one cluster, a user without credentials, context 'embedded'. */
export function kubeconfigYaml(serverUrl: string, namespace = 'default'): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    // @kubernetes/client-node refuses plain http:// servers unless TLS verification is marked as skipped.
    clusters: [{ name: kubeconfigContext, cluster: { server: serverUrl, 'insecure-skip-tls-verify': true } }],
    users: [{ name: kubeconfigContext, user: {} }],
    contexts: [{ name: kubeconfigContext, context: { cluster: kubeconfigContext, user: kubeconfigContext, namespace } }],
    'current-context': kubeconfigContext,
    preferences: {},
  });
}
