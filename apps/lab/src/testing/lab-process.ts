import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { cleanupStale } from '@kube-router/testkit';
import { kubectlWith } from './kubectl.js';

/** A seeded pod as `kubectl get pods -o json` shows it: its node, its address and the lab's netns annotation. */
export interface LabPod {
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
  spec: { nodeName: string };
  status: { phase?: string; podIP?: string };
}

export interface LabProcessOptions {
  /** LAB_RUN_ID: names of this run's own, so that other labs can run beside it. */
  runId: string;
  /** LAB_UNDERLAY_CIDRS: subnets no other lab on this machine uses. */
  underlayCidrs: readonly string[];
  /** kube-router flags for every agent. */
  flags?: readonly string[];
  /** More LAB_* settings. */
  env?: Readonly<Record<string, string>>;
}

/**
 * `npm start` as a person runs it: `src/lab.ts` in one process (no npx or tsx wrapper in between, so that the signal
 * and the exit code are the lab's own), its printed lines all a test knows, kubectl on the printed KUBECONFIG.
 */
export class LabProcess {
  readonly runId: string;
  readonly child: ChildProcess;
  readonly stdout: string[] = [];
  readonly stderr: string[] = [];
  /** Settles with the lab's exit code. */
  readonly exited: Promise<number | null>;

  constructor(options: LabProcessOptions) {
    this.runId = options.runId;
    this.child = spawn(process.execPath, ['--conditions=@kube-router/source', '--import', 'tsx', 'src/lab.ts', ...(options.flags ?? [])], {
      cwd: new URL('../..', import.meta.url).pathname,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LAB_RUN_ID: options.runId, LAB_UNDERLAY_CIDRS: options.underlayCidrs.join(','), ...options.env },
    });
    createInterface({ input: this.child.stdout! }).on('line', (line) => this.stdout.push(line));
    createInterface({ input: this.child.stderr! }).on('line', (line) => this.stderr.push(line));
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The printed KUBECONFIG path. */
  get kubeconfig(): string {
    const line = this.stdout.find((candidate) => candidate.startsWith('KUBECONFIG='));
    if (line === undefined) throw new Error(`the lab printed no KUBECONFIG yet: ${JSON.stringify(this.stdout)}`);
    return line.slice('KUBECONFIG='.length);
  }

  /** The printed health URLs (`http://<node address>:<port>/healthz`), node by node. */
  get healthUrls(): string[] {
    return this.stdout.filter((line) => line.endsWith('/healthz'));
  }

  /** The printed metrics URLs, node by node. */
  get metricsUrls(): string[] {
    return this.stdout.filter((line) => line.endsWith('/metrics'));
  }

  kubectl(...args: string[]): Promise<string> {
    return kubectlWith(this.kubeconfig).kubectl(...args);
  }

  kubectlApply(manifest: string): Promise<void> {
    return kubectlWith(this.kubeconfig).kubectlApply(manifest);
  }

  async pods(): Promise<LabPod[]> {
    return (JSON.parse(await this.kubectl('get', 'pods', '-A', '-o', 'json')) as { items: LabPod[] }).items;
  }

  /**
   * Stops the lab as a person does (SIGINT, which removes everything it made), kills it if it hangs, and removes
   * whatever it left in its namespaces (its agents run in process groups of their own). Resolves with its exit code.
   */
  async stop(): Promise<number | null> {
    if (this.running) {
      this.child.kill('SIGINT');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 40_000);
      await this.exited;
      clearTimeout(timer);
    }
    await cleanupStale(`krt-${this.runId}-`);
    return this.exited;
  }
}

/** The pods by name, with their network namespace (the lab's annotation) and address. */
export function podsByName(items: readonly LabPod[]): (name: string) => { netns: string; ip: string; node: string } {
  return (name) => {
    const pod = items.find((candidate) => candidate.metadata.name === name);
    if (pod === undefined) throw new Error(`no pod ${name} in ${items.map((item) => item.metadata.name).join(', ')}`);
    return { netns: pod.metadata.annotations!['lab.kube-router.io/netns']!, ip: pod.status.podIP!, node: pod.spec.nodeName };
  };
}
