import { hasTool } from '@kube-router/netfilter';

/** netfilter's probe (PATH plus the sbin directories), the one every test and the agent use. */
export { hasTool };

/** Why a lab cannot run on this machine (it needs root and iproute2, plus `tools`), or undefined when it can. */
export function labSkipReason(...tools: string[]): string | undefined {
  if (process.getuid?.() !== 0) return 'the network-namespace lab needs root';
  const missing = ['ip', ...tools].filter((tool) => !hasTool(tool));
  return missing.length > 0 ? `missing tools: ${missing.join(', ')}` : undefined;
}
