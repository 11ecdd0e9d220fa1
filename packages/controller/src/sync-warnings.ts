/** Records a Warning event on a namespaced object. Never throws. */
export type RecordWarning = (namespace: string, name: string, reason: string, message: string) => void;

/**
 * The Warning events of a controller's syncs on namespaced objects (`namespace/name`): each recorded once while it
 * keeps happening, and again if it comes back after a sync that did not see it. A level-triggered sync sees the same
 * problem every period; an operator wants one event for it, not one a period.
 */
export class SyncWarnings {
  readonly #record: RecordWarning;
  #reported = new Set<string>();
  #seen = new Set<string>();

  constructor(record: RecordWarning) {
    this.#record = record;
  }

  /** A sync starts: what it warns about from now on is what stays reported. */
  beginSync(): void {
    this.#seen = new Set();
  }

  warn(object: string, reason: string, message: string): void {
    const key = `${object}\0${reason}\0${message}`;
    this.#seen.add(key);
    if (this.#reported.has(key)) return;
    this.#reported.add(key);
    const [namespace = '', name = ''] = object.split('/');
    this.#record(namespace, name, reason, message);
  }

  /** The sync ended: what it did not warn about again is forgotten, so that it is recorded again if it comes back. */
  endSync(): void {
    this.#reported = new Set([...this.#reported].filter((key) => this.#seen.has(key)));
  }
}
