/** What a kubelet's liveness probe allows, as deploy/'s DaemonSets set it: 1 s to answer, 3 failures in a row. */
export const LIVENESS_TIMEOUT_MS = 1_000;
export const LIVENESS_FAILURE_THRESHOLD = 3;

export interface HealthSample {
  at: number;
  node: string;
  /** The status of /healthz, or undefined when it did not answer within LIVENESS_TIMEOUT_MS. */
  healthz: number | undefined;
  /** The status of /readyz?verbose, or undefined without an answer. */
  readyz: number | undefined;
  /** The failing checks `/readyz?verbose` names (`informers failed: ...`). */
  failing: string[];
}

export interface WatchedNode {
  name: string;
  /** `http://<address>:<port>/healthz`, as the lab prints it. */
  healthUrl: string;
}

/** Each node's /healthz and /readyz?verbose, polled every `intervalMs` while the test runs. */
export class HealthWatch {
  readonly samples: HealthSample[] = [];
  readonly #nodes: readonly WatchedNode[];
  readonly #intervalMs: number;
  #running: Promise<void> | undefined;
  #stopping = false;

  constructor(nodes: readonly WatchedNode[], intervalMs = 1_000) {
    this.#nodes = nodes;
    this.#intervalMs = intervalMs;
  }

  start(): void {
    this.#running ??= Promise.all(this.#nodes.map((node) => this.#poll(node))).then(() => undefined);
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#running;
  }

  /** The time of the first sample of `node` taken at or after `from` that `accept` takes. */
  async waitFor(what: string, node: string, accept: (sample: HealthSample) => boolean, from: number, timeoutMs: number): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.samples.find((sample) => sample.node === node && sample.at >= from && accept(sample));
      if (found) return found.at;
      if (Date.now() > deadline) {
        const last = this.samples.findLast((sample) => sample.node === node);
        throw new Error(`${node}: no ${what} within ${timeoutMs} ms; last seen ${JSON.stringify(last)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /**
   * What a kubelet would hold against /healthz between `from` and `to`: an answer other than 200, or
   * LIVENESS_FAILURE_THRESHOLD unanswered probes in a row; and how many went unanswered.
   */
  liveness(node: string, from: number, to = Infinity): { samples: number; notOk: HealthSample[]; unanswered: number; longestUnansweredRun: number } {
    const samples = this.samples.filter((sample) => sample.node === node && sample.at >= from && sample.at <= to);
    let run = 0;
    let longestUnansweredRun = 0;
    for (const sample of samples) {
      run = sample.healthz === undefined ? run + 1 : 0;
      longestUnansweredRun = Math.max(longestUnansweredRun, run);
    }
    return {
      samples: samples.length,
      notOk: samples.filter((sample) => sample.healthz !== undefined && sample.healthz !== 200),
      unanswered: samples.filter((sample) => sample.healthz === undefined).length,
      longestUnansweredRun,
    };
  }

  /** Readiness changes of `node` since `from`, in seconds after it: `200@0.0s 500(informers)@100.2s 200@104.0s`. */
  readinessTimeline(node: string, from: number): string {
    const steps: string[] = [];
    let last = '';
    for (const sample of this.samples.filter((candidate) => candidate.node === node && candidate.at >= from)) {
      const failing = sample.failing.map((check) => check.split(' ')[0]).join(',');
      const state = sample.readyz === undefined ? 'no-answer' : `${sample.readyz}${failing ? `(${failing})` : ''}`;
      if (state !== last) steps.push(`${state}@${((sample.at - from) / 1000).toFixed(1)}s`);
      last = state;
    }
    return steps.join(' ');
  }

  async #poll(node: WatchedNode): Promise<void> {
    const readyUrl = node.healthUrl.replace(/\/healthz$/, '/readyz?verbose');
    while (!this.#stopping) {
      const at = Date.now();
      const healthz = await fetch(node.healthUrl, { signal: AbortSignal.timeout(LIVENESS_TIMEOUT_MS) }).then(
        async (response) => (await response.text(), response.status),
        () => undefined,
      );
      const ready = await fetch(readyUrl, { signal: AbortSignal.timeout(2_000) }).then(
        async (response) => ({ status: response.status, body: await response.text() }),
        () => undefined,
      );
      const failing = (ready?.body ?? '').split('\n').filter((line) => line.startsWith('[-]')).map((line) => line.slice(3));
      this.samples.push({ at, node: node.name, healthz, readyz: ready?.status, failing });
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, this.#intervalMs - (Date.now() - at))));
    }
  }
}
