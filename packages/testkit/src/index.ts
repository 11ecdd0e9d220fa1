export { startApiServer } from './apiserver/server.js';
export { ApiError } from './apiserver/errors.js';
export { ResourceRegistry, builtinResources } from './apiserver/resources.js';
export { parseManifests, loadManifestFiles } from './apiserver/seed.js';
export { parseLabelSelector, matchesLabelSelector } from './apiserver/selectors/label-selector.js';
export { kubeconfigYaml, kubeconfigContext } from './apiserver/kubeconfig.js';
export type { KubeconfigAccess } from './apiserver/kubeconfig.js';
export { ADMIN_USER, serviceAccountUser, serviceAccountUsername } from './apiserver/authentication.js';
export type { ApiToken, UserInfo } from './apiserver/authentication.js';
export { freePort } from './ports.js';
export { waitFor } from './wait.js';
export { captureLogs } from './capture-logs.js';
export type { CapturedLogs, LogLine } from './capture-logs.js';

export type { WaitOptions } from './wait.js';
export type {
  ApiServer,
  ApiServerOptions,
  ApiServerValidation,
  KubeObjectInput,
  ListSelectors,
  WriteRequestOptions,
} from './apiserver/server.js';
export type { ApiServerFaults } from './apiserver/faults.js';
export type { EndpointSliceControllerOptions } from './apiserver/endpointslice-controller.js';
export type { KubeObject, ObjectMeta, WatchEventType } from './apiserver/kube-object.js';
export type { KubeVerb, ResourceType } from './apiserver/resources.js';
export type { RequestLog, RequestRecord, RequestFilter } from './apiserver/http/request-log.js';
export type { Status, StatusReason } from './apiserver/errors.js';
export type { PatchType } from './apiserver/patch/apply-patch.js';
export type { LabelSelector, LabelRequirement } from './apiserver/selectors/label-selector.js';

export * from './lab/index.js';
export { cniAdd, cniDel, DEFAULT_CNI_PATH } from './cni/cni-runner.js';
export type { CniAddResult, CniInvocation } from './cni/cni-runner.js';
export { KUBE_ROUTER_CNI_CONFLIST, KUBE_ROUTER_CNI_CONF_NAME } from './cni/kube-router-cni-conf.js';
export { KUBE_ROUTER_CHANGE_ME_ARGS, KUBE_ROUTER_DAEMONSETS } from './kube-router-manifests/daemonsets.js';
