import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/** Whether an executable of that name is on PATH. */
export function hasTool(name: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((directory) => {
    try {
      accessSync(join(directory, name), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** Why a lab cannot run on this machine (it needs root and iproute2, plus `tools`), or undefined when it can. */
export function labSkipReason(...tools: string[]): string | undefined {
  if (process.getuid?.() !== 0) return 'the network-namespace lab needs root';
  const missing = ['ip', ...tools].filter((tool) => !hasTool(tool));
  return missing.length > 0 ? `missing tools: ${missing.join(', ')}` : undefined;
}
