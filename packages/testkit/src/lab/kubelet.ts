import { EventEmitter } from 'node:events';
import { ApiException, CoreV1Api, ListWatch, Watch } from '@kubernetes/client-node';
import type { KubeConfig, V1Pod, V1PodStatus } from '@kubernetes/client-node';
import { KeyedQueue } from './keyed-queue.js';
import type { KubeletNode, KubeletSandbox } from './kubelet-node.js';
import { NETNS_ANNOTATION, containerPorts, isPublished, runningPodStatus } from './pod-objects.js';

const retryBaseMs = 200;
const retryMaxMs = 5_000;
const watchRestartMs = 500;
const startTimeoutMs = 15_000;

export interface RunningPod<S extends KubeletSandbox = KubeletSandbox> {
  uid: string;
  sandbox: S;
  startTime: Date;
  published: boolean;
  /** When the kubelet first saw the pod's deletionTimestamp: its preStop hooks run from then on. */
  terminatingSince?: number;
  /** Wakes the reconcile once the preStop hooks are over. */
  preStopTimer?: NodeJS.Timeout;
}

/**
 * How long a terminating pod keeps running before its containers stop: the longest preStop sleep of its containers
 * (Kubernetes' PodLifecycleSleepAction). The lab's pods have no SIGTERM handler of their own, so without one they stop
 * at once.
 */
export function preStopSleepSeconds(pod: V1Pod): number {
  const sleeps = (pod.spec?.containers ?? []).map((container) => container.lifecycle?.preStop?.sleep?.seconds ?? 0);
  return Math.max(0, ...sleeps.filter((seconds) => Number.isFinite(seconds)));
}

export function podKeyOf(pod: V1Pod): string {
  return `${pod.metadata?.namespace ?? 'default'}/${pod.metadata?.name ?? ''}`;
}

/**
 * Plays the kubelet of one lab node (a LabNode, or any KubeletNode): every Pod bound to the node gets a sandbox
 * (netns, addresses, agent), its annotation and a Running status; a deleted Pod loses its sandbox. A pod marked for
 * deletion (deletionTimestamp, from an API server that deletes gracefully) keeps running through its preStop sleep,
 * bounded by its grace period, then is marked not Ready, loses its sandbox and is deleted with grace 0, as a kubelet
 * finishes a graceful deletion. Level-triggered: each event only queues the pod's key, and the reconcile compares the
 * informer's view with the sandboxes.
 */
export class LabKubelet<S extends KubeletSandbox = KubeletSandbox> {
  private readonly core: CoreV1Api;
  private readonly informer: ListWatch<V1Pod>;
  private readonly running = new Map<string, RunningPod<S>>();
  private readonly failures = new Map<string, number>();
  private readonly queue: KeyedQueue;
  private readonly events = new EventEmitter();
  private readonly retryTimers = new Set<NodeJS.Timeout>();
  private stopped = false;
  private lastWatchError: unknown;

  constructor(
    kubeConfig: KubeConfig,
    private readonly node: KubeletNode<S>,
  ) {
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    const fieldSelector = `spec.nodeName=${node.nodeName}`;
    this.informer = new ListWatch<V1Pod>(
      '/api/v1/pods',
      new Watch(kubeConfig),
      () => this.core.listPodForAllNamespaces({ fieldSelector }),
      false,
      undefined,
      fieldSelector,
    );
    this.queue = new KeyedQueue((key) => this.reconcileWithRetry(key));
    this.events.setMaxListeners(0);
    for (const verb of ['add', 'update', 'delete'] as const) {
      this.informer.on(verb, (pod) => this.queue.enqueue(podKeyOf(pod)));
    }
    // The informer stops on an error (a broken watch, an unreachable server); it resumes from its last version.
    this.informer.on('error', (error: unknown) => {
      this.lastWatchError = error;
      if (this.stopped) return;
      const timer = setTimeout(() => {
        this.retryTimers.delete(timer);
        if (!this.stopped) this.informer.start().catch((startError: unknown) => (this.lastWatchError = startError));
      }, watchRestartMs);
      this.retryTimers.add(timer);
    });
  }

  /** Lists and starts watching the node's pods; fails (instead of hanging) when the API server does not answer. */
  async start(timeoutMs = startTimeoutMs): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const cause = this.lastWatchError ? `: ${describe(this.lastWatchError)}` : '';
        reject(new Error(`lab kubelet for ${this.node.nodeName} could not list and watch pods within ${timeoutMs} ms${cause}`));
      }, timeoutMs);
    });
    try {
      await Promise.race([this.informer.start(), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Stops watching and waits for reconciles in flight; the sandboxes stay for the node to remove. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.retryTimers) clearTimeout(timer);
    this.retryTimers.clear();
    await this.informer.stop();
    await this.queue.drain();
  }

  runningPods(): RunningPod<S>[] {
    return [...this.running.values()].filter((pod) => pod.published);
  }

  runningPod(key: string): RunningPod<S> | undefined {
    const pod = this.running.get(key);
    return pod?.published ? pod : undefined;
  }

  /**
   * Resolves once the pod with this key (and uid, when given) runs; rejects on its first failure or at the timeout.
   * On a CNI node a failure is waited through, as a kubelet retries a pod whose network is not ready yet (the CNI file
   * has no ranges until the agent writes them); the timeout then names the last one.
   */
  waitUntilRunning(key: string, uid: string | undefined, timeoutMs: number): Promise<RunningPod<S>> {
    return this.waitFor(key, timeoutMs, 'to run', () => {
      const pod = this.runningPod(key);
      return pod && (uid === undefined || pod.uid === uid) ? pod : undefined;
    });
  }

  /** Resolves once the pod with this key has no sandbox any more. */
  async waitUntilGone(key: string, timeoutMs: number): Promise<void> {
    await this.waitFor(key, timeoutMs, 'to be removed', () => (this.running.has(key) ? undefined : true));
  }

  private waitFor<T>(key: string, timeoutMs: number, what: string, check: () => T | undefined): Promise<T> {
    const done = check();
    if (done !== undefined) return Promise.resolve(done);
    return new Promise((resolve, reject) => {
      const cleanup = (): void => {
        clearTimeout(timer);
        this.events.off(key, onChange);
        this.events.off(`error:${key}`, onError);
      };
      const onChange = (): void => {
        const result = check();
        if (result !== undefined) {
          cleanup();
          resolve(result);
        }
      };
      let lastFailure: unknown;
      const onError = (error: unknown): void => {
        if (this.node.cniConfFile !== undefined) {
          lastFailure = error;
          return;
        }
        cleanup();
        reject(error instanceof Error ? error : new Error(String(error)));
      };
      const timer = setTimeout(() => {
        cleanup();
        const watchProblem = this.lastWatchError ? ` (last watch error: ${String(this.lastWatchError)})` : '';
        const failure = lastFailure === undefined ? '' : ` (last failure: ${describe(lastFailure)})`;
        reject(new Error(`pod ${key} did not come ${what} on lab node ${this.node.nodeName} within ${timeoutMs} ms${watchProblem}${failure}`));
      }, timeoutMs);
      this.events.on(key, onChange);
      this.events.on(`error:${key}`, onError);
    });
  }

  private async reconcileWithRetry(key: string): Promise<void> {
    if (this.stopped) return;
    try {
      await this.reconcile(key);
      this.failures.delete(key);
    } catch (error) {
      const attempts = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, attempts);
      this.events.emit(`error:${key}`, new Error(`lab kubelet could not run pod ${key}: ${describe(error)}`, { cause: error }));
      const timer = setTimeout(() => {
        this.retryTimers.delete(timer);
        if (!this.stopped) this.queue.enqueue(key);
      }, Math.min(retryBaseMs * 2 ** (attempts - 1), retryMaxMs));
      this.retryTimers.add(timer);
    }
  }

  private async reconcile(key: string): Promise<void> {
    const [namespace = '', name = ''] = key.split('/');
    const pod = this.informer.get(name, namespace);
    const live = pod && !isTerminal(pod) ? pod : undefined;
    const current = this.running.get(key);
    if (current && current.uid !== live?.metadata?.uid) await this.removeRunning(key, current);
    if (pod?.metadata?.deletionTimestamp) {
      const entry = this.running.get(key);
      if (entry) {
        if (this.holdsForPreStop(key, pod, entry)) return;
        await this.markStopped(namespace, name, entry);
        await this.removeRunning(key, entry);
      }
      // Graceful deletion waits for the kubelet: the sandbox is gone, so the object may go now.
      await this.deletePodNow(namespace, name, pod.metadata.uid);
      return;
    }
    const wanted = live;
    if (!wanted) return;
    let entry = this.running.get(key);
    if (!entry) {
      const spec = { namespace, name, ports: containerPorts(wanted) };
      const sandbox = wanted.spec?.hostNetwork ? await this.node.addHostNetworkSandbox(spec) : await this.node.addSandbox(spec);
      entry = { uid: wanted.metadata?.uid ?? '', sandbox, startTime: new Date(), published: false };
      this.running.set(key, entry);
    }
    // Once written, the status stays; the informer's copy may lag behind the write and must not trigger another.
    if (!entry.published && !isPublished(wanted, entry.sandbox)) {
      if (!(await this.publish(namespace, name, entry))) return;
    }
    entry.published = true;
    this.events.emit(key);
  }

  private async removeRunning(key: string, entry: RunningPod<S>): Promise<void> {
    clearTimeout(entry.preStopTimer);
    await this.node.removeSandbox(entry.sandbox);
    this.running.delete(key);
    this.events.emit(key);
  }

  /**
   * Whether a terminating pod still runs its preStop hooks: then it keeps its sandbox and its Ready condition (its
   * containers run and answer, a serving and terminating endpoint) until min(preStop sleep, grace period) after the
   * kubelet saw the deletion; a shorter grace set by a second DELETE cuts the hooks short, as a kubelet's does.
   */
  private holdsForPreStop(key: string, pod: V1Pod, entry: RunningPod<S>): boolean {
    if (!entry.published) return false;
    const grace = pod.metadata?.deletionGracePeriodSeconds ?? 0;
    const holdMs = Math.min(preStopSleepSeconds(pod), grace) * 1000;
    entry.terminatingSince ??= Date.now();
    const remainingMs = entry.terminatingSince + holdMs - Date.now();
    if (remainingMs <= 0) return false;
    clearTimeout(entry.preStopTimer);
    const timer = setTimeout(() => {
      this.retryTimers.delete(timer);
      if (!this.stopped) this.queue.enqueue(key);
    }, remainingMs);
    entry.preStopTimer = timer;
    this.retryTimers.add(timer);
    return true;
  }

  /** Its containers stopped: the pod is no longer Ready (its endpoint stops serving) before its sandbox goes. */
  private async markStopped(namespace: string, name: string, entry: RunningPod<S>): Promise<void> {
    if (!entry.published) return;
    for (let attempt = 1; ; attempt += 1) {
      try {
        const pod = await this.core.readNamespacedPod({ name, namespace });
        if (pod.metadata?.uid !== entry.uid) return;
        pod.status = stoppedPodStatus(pod);
        await this.core.replaceNamespacedPodStatus({ name, namespace, body: pod });
        return;
      } catch (error) {
        if (error instanceof ApiException && error.code === 404) return;
        if (!(error instanceof ApiException && error.code === 409) || attempt >= 5) throw error;
      }
    }
  }

  /** Writes the netns annotation, then the Running status; false when the pod went away meanwhile. */
  private async publish(namespace: string, name: string, entry: RunningPod<S>): Promise<boolean> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        let pod = await this.core.readNamespacedPod({ name, namespace });
        if (pod.metadata?.uid !== entry.uid) return false;
        if (pod.metadata?.annotations?.[NETNS_ANNOTATION] !== entry.sandbox.netns) {
          pod.metadata = { ...pod.metadata, annotations: { ...pod.metadata?.annotations, [NETNS_ANNOTATION]: entry.sandbox.netns } };
          pod = await this.core.replaceNamespacedPod({ name, namespace, body: pod });
        }
        pod.status = runningPodStatus(pod, entry.sandbox, this.node.nodeIps, entry.startTime);
        await this.core.replaceNamespacedPodStatus({ name, namespace, body: pod });
        return true;
      } catch (error) {
        if (error instanceof ApiException && error.code === 404) return false;
        if (!(error instanceof ApiException && error.code === 409) || attempt >= 5) throw error;
      }
    }
  }

  private async deletePodNow(namespace: string, name: string, uid: string | undefined): Promise<void> {
    try {
      await this.core.deleteNamespacedPod({
        name,
        namespace,
        // In the body: kube-apiserver reads DeleteOptions from the body when there is one, and the query only without.
        body: { gracePeriodSeconds: 0, preconditions: uid ? { uid } : undefined },
      });
    } catch (error) {
      if (!(error instanceof ApiException && (error.code === 404 || error.code === 409))) throw error;
    }
  }
}

/** The status of a pod whose containers stopped on deletion: not Ready, each container terminated. */
function stoppedPodStatus(pod: V1Pod): V1PodStatus {
  const now = new Date();
  const notReady = new Set(['Ready', 'ContainersReady']);
  const conditions = (pod.status?.conditions ?? []).map((condition) =>
    notReady.has(condition.type) && condition.status !== 'False'
      ? { ...condition, status: 'False', reason: 'PodCompleted', lastTransitionTime: now }
      : condition,
  );
  const containerStatuses = (pod.status?.containerStatuses ?? []).map((status) => ({
    ...status,
    ready: false,
    started: false,
    state: { terminated: { exitCode: 0, reason: 'Completed', startedAt: status.state?.running?.startedAt, finishedAt: now } },
  }));
  return { ...pod.status, conditions, containerStatuses };
}

function isTerminal(pod: V1Pod): boolean {
  return pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';
}

function describe(error: unknown): string {
  if (error instanceof ApiException) {
    const body = error.body as { message?: string } | string | undefined;
    const message = typeof body === 'string' ? body : body?.message;
    return `HTTP ${error.code}${message ? `: ${message}` : ''}`;
  }
  return error instanceof Error ? error.message : String(error);
}
