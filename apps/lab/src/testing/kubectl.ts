import { ExecRunner } from '@kube-router/netfilter';

const runner = new ExecRunner({ defaultTimeoutMs: 30_000 });

/** kubectl against one kubeconfig, as the labs' tests drive a cluster: its output, or an error with its stderr. */
export function kubectlWith(kubeconfig: string): { kubectl(...args: string[]): Promise<string>; kubectlApply(manifest: string): Promise<void> } {
  return {
    kubectl: async (...args) => (await runner.run({ command: 'kubectl', args: ['--kubeconfig', kubeconfig, ...args] })).stdout,
    kubectlApply: async (manifest) => {
      await runner.run({ command: 'kubectl', args: ['--kubeconfig', kubeconfig, 'apply', '-f', '-'], input: manifest });
    },
  };
}
