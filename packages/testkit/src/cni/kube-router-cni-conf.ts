/**
 * The CNI configuration kube-router's DaemonSets install: the `cni-conf.json` of their kube-router-cfg ConfigMap,
 * which the install-cni init container copies to /etc/cni/net.d/10-kuberouter.conflist (transcribed from kube-router's
 * daemonset/kubeadm-kuberouter-all-features.yaml). Its host-local ipam has no ranges: the agent adds the node's pod
 * CIDRs, and until it has, every pod on the node fails with host-local's "no IP ranges specified".
 */
export const KUBE_ROUTER_CNI_CONFLIST = {
  cniVersion: '0.3.0',
  name: 'mynet',
  plugins: [
    {
      name: 'kubernetes',
      type: 'bridge',
      bridge: 'kube-bridge',
      isDefaultGateway: true,
      hairpinMode: true,
      ipam: { type: 'host-local' },
    },
  ],
} as const;

/** Where the install-cni init container puts it, and kube-router's KUBE_ROUTER_CNI_CONF_FILE in those DaemonSets. */
export const KUBE_ROUTER_CNI_CONF_NAME = '10-kuberouter.conflist';
