import { stringify } from 'yaml';

export const kubeconfigContext = 'embedded';

/** How a kubeconfig's user reaches the server: which CA it trusts and which bearer token it sends. */
export interface KubeconfigAccess {
  /** PEM of the CA to trust, written as certificate-authority-data (an HTTPS server's). */
  ca?: string;
  /** A CA file instead, as kubeadm's kube-proxy kubeconfig points at the service account's ca.crt. */
  caFile?: string;
  token?: string;
  /** client-go's `tokenFile`, as kubeadm writes it: the client re-reads it, so a rotated token is taken up. */
  tokenFile?: string;
}

/** A kubeconfig for the embedded server: one cluster, one user, context 'embedded'. */
export function kubeconfigYaml(serverUrl: string, namespace = 'default', access: KubeconfigAccess = {}): string {
  const cluster = {
    server: serverUrl,
    ...(access.caFile !== undefined
      ? { 'certificate-authority': access.caFile }
      : access.ca !== undefined
        ? { 'certificate-authority-data': Buffer.from(access.ca).toString('base64') }
        : // @kubernetes/client-node refuses plain http:// servers unless TLS verification is marked as skipped.
          { 'insecure-skip-tls-verify': true }),
  };
  const user = {
    ...(access.token !== undefined && { token: access.token }),
    ...(access.tokenFile !== undefined && { tokenFile: access.tokenFile }),
  };
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: kubeconfigContext, cluster }],
    users: [{ name: kubeconfigContext, user }],
    contexts: [{ name: kubeconfigContext, context: { cluster: kubeconfigContext, user: kubeconfigContext, namespace } }],
    'current-context': kubeconfigContext,
    preferences: {},
  });
}
