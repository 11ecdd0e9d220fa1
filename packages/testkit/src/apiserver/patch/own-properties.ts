/**
 * Property access for patch code, which walks and writes objects along keys a client chose. A plain `target[key]`
 * reads through the prototype chain (`constructor`, `__proto__`), and assigning `__proto__` replaces an object's
 * prototype instead of storing a field: a JSON patch to `/__proto__/namespace` once wrote to Object.prototype of the
 * whole server. These helpers only see and make own data properties, whatever the key.
 */

export function ownValue(target: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(target, key) ? target[key] : undefined;
}

export function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
}

/** The one key no Kubernetes object has (field names and label/annotation keys start with an alphanumeric). */
export const prototypeKey = '__proto__';

/**
 * The field path (`spec.containers[0].__proto__`) of the first `__proto__` key in `value`, if any. Walked with an
 * explicit stack: patches built in code have no depth bound.
 */
export function findPrototypeKey(value: unknown): string | undefined {
  const pending: [unknown, string][] = [[value, '']];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [current, path] = next;
    if (Array.isArray(current)) {
      current.forEach((item, index) => pending.push([item, `${path}[${index}]`]));
    } else if (typeof current === 'object' && current !== null) {
      for (const [key, item] of Object.entries(current)) {
        const field = path === '' ? key : `${path}.${key}`;
        if (key === prototypeKey) return field;
        pending.push([item, field]);
      }
    }
  }
  return undefined;
}
