/** Invalid input at a path inside a policy; collected as a PolicyProblem, never thrown out of the compiler. */
export class PolicyInputError extends Error {
  constructor(readonly path: string, message: string) {
    super(message);
    this.name = 'PolicyInputError';
  }
}

export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${String(value)}`;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Fields we do not know could change a policy's meaning (a future peer type, a misspelt key), so they are errors and
 * the policy fails closed rather than being half-understood. Undefined values do not count: client-node's
 * deserialiser sets every known field, present or not.
 */
export function assertKnownFields(object: Record<string, unknown>, known: readonly string[], path: string): void {
  for (const key of Object.keys(object)) {
    if (!known.includes(key) && object[key] !== undefined) {
      throw new PolicyInputError(`${path}.${key}`, `unsupported field ${JSON.stringify(key)}`);
    }
  }
}
