import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApiError } from '../errors.js';
import type { KubeObject } from '../kube-object.js';
import type { ResourceType } from '../resources.js';
import { ResourceRegistry } from '../resources.js';
import { parseLabelSelector } from '../selectors/label-selector.js';
import type { ListPage, Selectors } from './object-store.js';
import { ObjectStore } from './object-store.js';
import { SchemaValidation } from './schema-validation.js';

const registry = new ResourceRegistry();
const pods = registry.byKind('v1', 'Pod') as ResourceType;
const namespaces = registry.byKind('v1', 'Namespace') as ResourceType;

function newStore(historyLimit = 1000): ObjectStore {
  return new ObjectStore({ registry, historyLimit, serviceCidrs: ['10.96.0.0/12'], validation: new SchemaValidation(new Map(), false) });
}

function pod(namespace: string, name: string, labels: Record<string, string> = {}): KubeObject {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { namespace, name, labels }, spec: { containers: [{ name: 'main', image: 'app:1' }] } };
}

function withNamespaces(store: ObjectStore, ...names: string[]): ObjectStore {
  for (const name of names) store.create(namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  return store;
}

const keyOf = (obj: KubeObject) => `${obj.metadata.namespace}/${obj.metadata.name}`;

/** Every page of a list, with `between` run after each page (changes made while a client pages). */
function allPages(store: ObjectStore, namespace: string | undefined, selectors: Selectors, limit: number, between: (page: number) => void = () => {}): ListPage[] {
  const pages: ListPage[] = [];
  let continueFrom: { resourceVersion: number; key: string } | undefined;
  do {
    const page = store.listPage(pods, namespace, selectors, { limit, ...(continueFrom ? { continueFrom } : {}) });
    pages.push(page);
    continueFrom = page.continueAfter === undefined ? undefined : { resourceVersion: page.resourceVersion, key: page.continueAfter };
    between(pages.length);
  } while (continueFrom);
  return pages;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('ObjectStore lists', () => {
  it('lists in namespace/name order, and one namespace alone, whatever order the objects came in', () => {
    // 'a-b/…' sorts before 'a/…' ('-' < '/'): a namespace is a key prefix, not a sort of namespaces.
    const store = withNamespaces(newStore(), 'b', 'a', 'a-b', 'a0');
    for (const [ns, name] of [['b', 'x'], ['a', 'z'], ['a-b', 'y'], ['a', 'c'], ['a0', 'q'], ['b', 'a'], ['a', 'm']] as const) store.create(pods, pod(ns, name));
    expect(store.list(pods, undefined).map(keyOf)).toEqual(['a-b/y', 'a/c', 'a/m', 'a/z', 'a0/q', 'b/a', 'b/x']);
    expect(store.list(pods, 'a').map(keyOf)).toEqual(['a/c', 'a/m', 'a/z']);
    expect(store.list(pods, 'a-b').map(keyOf)).toEqual(['a-b/y']);
    expect(store.list(pods, 'none')).toEqual([]);
    store.delete(pods, 'a', 'm');
    expect(store.list(pods, 'a').map(keyOf)).toEqual(['a/c', 'a/z']);
  });

  it('serves every continued page as the collection was at the first page, whatever changed since', () => {
    const store = withNamespaces(newStore(), 'a', 'b');
    const name = (i: number) => `p-${String(i).padStart(2, '0')}`;
    for (let i = 0; i < 30; i++) store.create(pods, pod('a', name(i), { n: String(i) }));
    store.create(pods, pod('b', 'other'));
    const before = store.list(pods, 'a');

    const pages = allPages(store, 'a', {}, 10, (page) => {
      if (page !== 1) return;
      store.delete(pods, 'a', name(12)); // in the next page: still served
      store.create(pods, pod('a', 'p-15a')); // created after the first page: not served
      store.update(pods, { ...pod('a', name(25), { n: 'changed' }) }); // served as it was
      store.delete(pods, 'a', name(27));
      store.create(pods, pod('a', name(27), { n: 'recreated' })); // served as it was before the deletion
      store.create(pods, pod('a', 'p-99')); // after the last key: not served
    });
    expect(pages.flatMap((page) => page.items)).toEqual(before);
    expect(new Set(pages.map((page) => page.resourceVersion))).toEqual(new Set([pages[0]?.resourceVersion]));
    expect(pages.map((page) => page.items.length)).toEqual([10, 10, 10]);
    // Counted as of the first page too, without selectors.
    expect(pages.map((page) => page.remainingItemCount)).toEqual([20, 10, undefined]);
    // A new list sees the changes.
    const now = store.list(pods, 'a').map((obj) => obj.metadata.name);
    expect(now).toContain('p-15a');
    expect(now).not.toContain(name(12));
  });

  it('filters by selectors while walking: no count of what remains, and a last page that may come out empty', () => {
    const store = withNamespaces(newStore(), 'a');
    for (let i = 0; i < 10; i++) store.create(pods, pod('a', `p-${i}`, { tier: i < 4 ? 'edge' : 'web' }));
    const pages = allPages(store, 'a', { labelSelector: parseLabelSelector('tier=edge') }, 2);
    expect(pages.map((page) => page.items.map((obj) => obj.metadata.name))).toEqual([['p-0', 'p-1'], ['p-2', 'p-3'], []]);
    expect(pages.map((page) => page.remainingItemCount)).toEqual([undefined, undefined, undefined]);
    // As etcd's paging does: more keys follow the second page, matching or not.
    expect(pages[1]?.continueAfter).toBe('a/p-3');
  });

  it('refuses a continue point older than the history with 410 Expired', () => {
    const store = withNamespaces(newStore(), 'a');
    for (let i = 0; i < 5; i++) store.create(pods, pod('a', `p-${i}`));
    const first = store.listPage(pods, 'a', {}, { limit: 2 });
    store.create(pods, pod('a', 'p-new'));
    store.compactHistory();
    const continued = () => store.listPage(pods, 'a', {}, { limit: 2, continueFrom: { resourceVersion: first.resourceVersion, key: first.continueAfter as string } });
    expect(continued).toThrow(ApiError);
    expect(continued).toThrow(/too old to display a consistent list/);
  });

  it('examines and copies only the objects of the page, not the collection', () => {
    const store = withNamespaces(newStore(), ...Array.from({ length: 50 }, (_, n) => `ns-${n}`));
    for (let i = 0; i < 5000; i++) store.create(pods, pod(`ns-${i % 50}`, `p-${String(i).padStart(5, '0')}`, { app: 'web' }));
    const middle = store.listPage(pods, undefined, {}, { limit: 2500 });
    for (let i = 0; i < 50; i++) store.update(pods, pod(`ns-${i}`, `p-${String(i).padStart(5, '0')}`, { app: 'web', changed: 'yes' }));

    const matches = vi.spyOn(store, 'matches');
    const clone = vi.spyOn(globalThis, 'structuredClone');
    const selected = store.listPage(pods, undefined, { labelSelector: parseLabelSelector('app=web') }, { limit: 10 });
    expect(selected.items).toHaveLength(10);
    expect(matches.mock.calls.length).toBe(10);
    const continued = store.listPage(pods, undefined, {}, {
      limit: 10,
      continueFrom: { resourceVersion: middle.resourceVersion, key: middle.continueAfter as string },
    });
    expect(continued.items).toHaveLength(10);
    expect(continued.remainingItemCount).toBe(2490);
    expect(clone.mock.calls.length).toBe(20);
    clone.mockClear();
    expect(store.listPage(pods, undefined, {}, { limit: 10, shared: true }).items).toHaveLength(10);
    expect(clone).not.toHaveBeenCalled();
  });

  it('pages through any interleaving of changes as the collection was at the first page', () => {
    const names = fc.constantFrom('p-0', 'p-1', 'p-2', 'p-3', 'p-4', 'p-5', 'p-6', 'p-7');
    const change = fc.record({
      op: fc.constantFrom('create', 'update', 'delete'),
      namespace: fc.constantFrom('a', 'b'),
      name: names,
      label: fc.constantFrom('x', 'y'),
    });
    fc.assert(
      fc.property(
        fc.array(change, { maxLength: 20 }),
        fc.array(fc.array(change, { maxLength: 6 }), { maxLength: 8 }),
        fc.integer({ min: 1, max: 4 }),
        fc.constantFrom(undefined, 'a'),
        fc.constantFrom('', 'l=x'),
        (setup, during, limit, namespace, selector) => {
          const store = withNamespaces(newStore(200), 'a', 'b');
          const apply = (c: { op: string; namespace: string; name: string; label: string }) => {
            const exists = store.tryGet(pods, c.namespace, c.name) !== undefined;
            if (c.op === 'delete' && exists) store.delete(pods, c.namespace, c.name);
            else if (c.op === 'update' && exists) store.update(pods, pod(c.namespace, c.name, { l: c.label }));
            else if (!exists) store.create(pods, pod(c.namespace, c.name, { l: c.label }));
          };
          setup.forEach(apply);
          const selectors = { labelSelector: parseLabelSelector(selector) };
          const snapshot = store.list(pods, namespace, selectors);
          const unfiltered = store.list(pods, namespace).length;
          const pages = allPages(store, namespace, selectors, limit, (page) => during[page - 1]?.forEach(apply));
          expect(pages.flatMap((page) => page.items)).toEqual(snapshot);
          if (!selector) {
            for (const [i, page] of pages.entries()) {
              if (page.continueAfter !== undefined) expect(page.remainingItemCount).toBe(unfiltered - limit * (i + 1));
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
