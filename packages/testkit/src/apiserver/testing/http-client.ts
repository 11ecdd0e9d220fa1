// Small HTTP helpers for this package's tests: plain fetch against the embedded server, no Kubernetes client.

export interface JsonResponse<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  body: T;
}

export async function call<T = Record<string, unknown>>(
  baseUrl: string,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
  headers: Record<string, string> = {},
): Promise<JsonResponse<T>> {
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { accept: 'application/json', ...(body !== undefined ? { 'content-type': contentType } : {}), ...headers },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: (text ? JSON.parse(text) : undefined) as T };
}

export interface WatchEventJson {
  type: string;
  object: Record<string, unknown> & { metadata?: Record<string, unknown> };
}

/** An open watch stream: events are queued as they arrive and awaited one by one. */
export class WatchClient {
  readonly events: WatchEventJson[] = [];
  private consumed = 0;
  private waiters: (() => void)[] = [];
  private finished = false;
  readonly ended: Promise<void>;

  private constructor(
    readonly status: number,
    private readonly controller: AbortController,
    body: ReadableStream<Uint8Array> | null,
  ) {
    this.ended = this.pump(body);
  }

  static async open(url: string, headers: Record<string, string> = {}): Promise<WatchClient> {
    const controller = new AbortController();
    const response = await fetch(url, { signal: controller.signal, headers });
    return new WatchClient(response.status, controller, response.body);
  }

  get isEnded(): boolean {
    return this.finished;
  }

  private async pump(body: ReadableStream<Uint8Array> | null): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of body ?? []) {
        buffer += decoder.decode(chunk, { stream: true });
        let newline: number;
        while ((newline = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, newline).trim();
          buffer = buffer.slice(newline + 1);
          if (line) this.events.push(JSON.parse(line) as WatchEventJson);
          this.wake();
        }
      }
    } catch {
      // aborted by close()
    } finally {
      this.finished = true;
      this.wake();
    }
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter();
  }

  /** The next event not yet returned, skipping BOOKMARKs unless asked for. */
  async next(options: { timeoutMs?: number; bookmarks?: boolean } = {}): Promise<WatchEventJson> {
    const deadline = Date.now() + (options.timeoutMs ?? 5000);
    for (;;) {
      while (this.consumed < this.events.length) {
        const event = this.events[this.consumed++] as WatchEventJson;
        if (event.type !== 'BOOKMARK' || options.bookmarks) return event;
      }
      if (this.finished) throw new Error('watch stream ended');
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new Error('timed out waiting for a watch event');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, remaining);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.controller.abort();
  }
}

/** Polls until `check` returns a value other than undefined/false. */
export async function eventually<T>(check: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
