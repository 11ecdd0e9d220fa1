import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/** sbin directories hold the kernel tools but are missing from many non-root PATHs. */
const SBIN_DIRECTORIES = ['/usr/local/sbin', '/usr/sbin', '/sbin'];

/** The absolute path of an executable on PATH (plus the sbin directories), or undefined. */
export function findExecutable(name: string, searchPath = process.env.PATH ?? ''): string | undefined {
  // A path is looked up as it is, as spawn does.
  const directories = name.includes('/') ? [''] : [...searchPath.split(delimiter).filter(Boolean), ...SBIN_DIRECTORIES];
  for (const directory of directories) {
    const candidate = directory === '' ? name : join(directory, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

export function hasTool(name: string): boolean {
  return findExecutable(name) !== undefined;
}
