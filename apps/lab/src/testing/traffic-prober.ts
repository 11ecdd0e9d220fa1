import type { PodProber } from './pod-traffic.js';

export type Verdict = 'open' | 'closed';
/** What the policies say of a flow: open, closed, or either while a change is expected to land. */
export type Expectation = Verdict | 'either';

export interface ProbedFlow {
  /** `client->web`. */
  name: string;
  from: PodProber;
  ip: string;
  port: number;
}

export interface ProbeResult {
  flow: string;
  startedAt: number;
  endedAt: number;
  verdict: Verdict;
  /** The verdict is neither what was expected when the probe started nor what was expected when it ended. */
  wrong: boolean;
}

const allows = (expectation: Expectation, verdict: Verdict) => expectation === 'either' || expectation === verdict;

/**
 * Every flow probed every `intervalMs` (each flow on its own: a refused connection whose ICMP error the kernel's rate
 * limit swallows takes the probe's whole 700 ms, and must not slow the others), each verdict held against
 * what the policies say at that moment. The test moves the expectations as it changes the cluster; a verdict is wrong
 * only when it matches the expectation neither at the probe's start nor at its end, so a change of expectation
 * during a probe never makes a wrong verdict of a right one.
 */
export class TrafficProber {
  readonly results: ProbeResult[] = [];
  /** Probes that got no verdict (the prober process itself failed). */
  readonly errors: { flow: string; at: number; error: string }[] = [];
  readonly #flows: readonly ProbedFlow[];
  readonly #expectations: Map<string, Expectation>;
  readonly #intervalMs: number;
  #running: Promise<void> | undefined;
  #stopping = false;

  constructor(flows: readonly ProbedFlow[], expectations: Readonly<Record<string, Expectation>>, intervalMs = 200) {
    this.#flows = flows;
    this.#expectations = new Map(Object.entries(expectations));
    this.#intervalMs = intervalMs;
    for (const flow of flows) if (!this.#expectations.has(flow.name)) throw new Error(`no expectation for ${flow.name}`);
  }

  expect(flow: string, expectation: Expectation): void {
    if (!this.#expectations.has(flow)) throw new Error(`no flow ${flow}`);
    this.#expectations.set(flow, expectation);
  }

  start(): void {
    this.#running ??= Promise.all(this.#flows.map((flow) => this.#loop(flow))).then(() => undefined);
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#running;
  }

  /** The results of probes that started at or after `from` (and, given `to`, ended by then). */
  between(from: number, to = Infinity): ProbeResult[] {
    return this.results.filter((result) => result.startedAt >= from && result.endedAt <= to);
  }

  /** How often each flow was probed between `from` and `to`, on average: `client->web every 210 ms, ...`. */
  cadence(from: number, to = Date.now()): string {
    return this.#flows
      .map((flow) => {
        const probes = this.between(from, to).filter((result) => result.flow === flow.name).length;
        return `${flow.name} every ${probes === 0 ? '-' : Math.round((to - from) / probes)} ms`;
      })
      .join(', ');
  }

  /** Wrong verdicts since `from`, one line each, for an assertion's message. */
  wrongSince(from: number): string[] {
    return this.between(from)
      .filter((result) => result.wrong)
      .map((result) => `${new Date(result.startedAt).toISOString()} ${result.flow} ${result.verdict}`);
  }

  /** Resolves with the end time of the first probe of `flow` that started at or after `from` with `verdict`. */
  async waitForVerdict(flow: string, verdict: Verdict, from: number, timeoutMs: number): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.results.find((result) => result.flow === flow && result.startedAt >= from && result.verdict === verdict);
      if (found) return found.endedAt;
      if (Date.now() > deadline) throw new Error(`${flow} was not ${verdict} within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  async #loop(flow: ProbedFlow): Promise<void> {
    while (!this.#stopping) {
      const started = Date.now();
      await this.#probe(flow);
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, this.#intervalMs - (Date.now() - started))));
    }
  }

  async #probe(flow: ProbedFlow): Promise<void> {
    const before = this.#expectations.get(flow.name)!;
    const startedAt = Date.now();
    try {
      const verdict: Verdict = (await flow.from.connect(flow.ip, flow.port)) ? 'open' : 'closed';
      const after = this.#expectations.get(flow.name)!;
      this.results.push({ flow: flow.name, startedAt, endedAt: Date.now(), verdict, wrong: !allows(before, verdict) && !allows(after, verdict) });
    } catch (error) {
      this.errors.push({ flow: flow.name, at: startedAt, error: error instanceof Error ? error.message : String(error) });
    }
  }
}
