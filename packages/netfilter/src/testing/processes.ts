import { readFile } from 'node:fs/promises';

/** Alive means running or sleeping; a zombie waiting for its parent to reap it is already dead. */
export async function processAlive(pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}
