import type { KubeObject } from './kube-object.js';

// events.k8s.io/v1 renames some core/v1 Event fields; both API versions read and write one store.
const renamedFields: readonly (readonly [core: string, eventsV1: string])[] = [
  ['involvedObject', 'regarding'],
  ['message', 'note'],
  ['reportingComponent', 'reportingController'],
  ['source', 'deprecatedSource'],
  ['firstTimestamp', 'deprecatedFirstTimestamp'],
  ['lastTimestamp', 'deprecatedLastTimestamp'],
  ['count', 'deprecatedCount'],
];

function renameFields(obj: KubeObject, apiVersion: string, direction: 0 | 1): KubeObject {
  const converted: KubeObject = { ...obj, apiVersion };
  for (const pair of renamedFields) {
    const from = pair[direction];
    const to = pair[direction === 0 ? 1 : 0];
    if (from in converted) {
      converted[to] = converted[from];
      delete converted[from];
    }
  }
  return converted;
}

export function coreEventToEventsV1(obj: KubeObject): KubeObject {
  return renameFields(obj, 'events.k8s.io/v1', 0);
}

export function eventsV1ToCoreEvent(obj: KubeObject): KubeObject {
  return renameFields(obj, 'v1', 1);
}
