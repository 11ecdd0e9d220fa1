import { readFileSync } from 'node:fs';

/**
 * The version of this package, which is the version of the plugin contract a host offers: a plugin's `host` range is
 * checked against it. Read from the package's own manifest (one directory above both src/ and dist/), so that a
 * changeset's bump is the only place the version changes.
 */
export const PLUGIN_CONTRACT_VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
