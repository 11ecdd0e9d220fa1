import { IP_FAMILIES } from '@kube-router/netpol';
import type { InNode, NetpolTestBackend } from './backend.js';

/** Names of a pod's or a policy's objects: what goes when the pods and policies do. */
const POD_OR_POLICY_OBJECT = /^(KUBE-POD-FW-|KUBE-NWPLCY-[0-9A-F]{16}$|KUBE-SRC-|KUBE-DST-)/;

/** Our objects of either family that belong to a pod or a policy, as `<family>/<name>`. */
export async function policyObjects(backend: NetpolTestBackend, inNode: InNode): Promise<string[]> {
  return ownObjects(backend, inNode, (name) => POD_OR_POLICY_OBJECT.test(name));
}

/** Our objects of either family, as `<family>/<name>`. */
export async function ownObjects(backend: NetpolTestBackend, inNode: InNode, which: (name: string) => boolean = () => true): Promise<string[]> {
  const names: string[] = [];
  for (const family of IP_FAMILIES) {
    for (const name of await backend.kernel.objects(inNode, family)) if (which(name)) names.push(`${family}/${name}`);
  }
  return names;
}
