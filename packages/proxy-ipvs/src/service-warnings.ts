/** Records a Warning event on a Service. */
export type WarnService = (namespace: string, name: string, reason: string, message: string) => void;

/**
 * The Warning events of the proxy's syncs on Services (`namespace/name`): each recorded once while it keeps
 * happening, and again if it comes back after a sync that did not see it.
 */
export class ServiceWarnings {
  readonly #record: WarnService;
  readonly #reported = new Set<string>();
  #seen = new Set<string>();

  constructor(record: WarnService) {
    this.#record = record;
  }

  /** A sync starts: what it sees from now on is what stays reported. */
  beginSync(): void {
    this.#seen = new Set();
  }

  warn(owner: string, reason: string, message: string): void {
    const key = `${owner}\0${reason}\0${message}`;
    this.#seen.add(key);
    if (this.#reported.has(key)) return;
    this.#reported.add(key);
    const [namespace = '', name = ''] = owner.split('/');
    this.#record(namespace, name, reason, message);
  }

  /** The sync ended: what it did not see is forgotten, so that it is recorded again if it comes back. */
  endSync(): void {
    for (const key of [...this.#reported]) if (!this.#seen.has(key)) this.#reported.delete(key);
  }
}
