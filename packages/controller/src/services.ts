import type { ServiceKey, Services } from './controller.js';

/** The agent's table of services that plugins provide and consume by typed key. */
export class ServiceRegistry implements Services {
  readonly #services = new Map<string, unknown>();

  get<T>(key: ServiceKey<T>): T {
    if (!this.#services.has(key.id)) {
      throw new Error(`service ${key.id} is not provided: is the plugin that provides it in the assembly?`);
    }
    return this.#services.get(key.id) as T;
  }

  has(key: ServiceKey<unknown>): boolean {
    return this.#services.has(key.id);
  }

  provide<T>(key: ServiceKey<T>, service: T): void {
    if (this.#services.has(key.id)) throw new Error(`service ${key.id} is provided twice`);
    this.#services.set(key.id, service);
  }
}
