import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

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

/** Why the suite cannot run here (the lab needs root and iproute2), or undefined when it can. */
export function worldSkipReason(): string | undefined {
  if (process.getuid?.() !== 0) return 'the network-namespace lab needs root';
  return hasTool('ip') ? undefined : 'missing tools: ip';
}
