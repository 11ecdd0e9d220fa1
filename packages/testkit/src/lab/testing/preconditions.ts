import { execFileSync } from 'node:child_process';

export { hasTool, labSkipReason } from '../preconditions.js';

/** Processes whose command line mentions a text, by pid (the lab puts `krt-<runid>-` in its helpers' command lines). */
export function processesMentioning(text: string): number[] {
  const output = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  return output
    .split('\n')
    .filter((line) => line.includes(text) && !line.includes('ps -eo'))
    .map((line) => Number.parseInt(line.trim(), 10))
    .filter((pid) => pid !== process.pid);
}

export function interfacesInNetns(netns: string): string[] {
  const output = execFileSync('ip', ['-n', netns, '-o', 'link', 'show'], { encoding: 'utf8' });
  return output
    .split('\n')
    .map((line) => line.split(':')[1]?.trim().split('@')[0] ?? '')
    .filter((name) => name !== '');
}

export function rootNetnsInterfaces(): string[] {
  const output = execFileSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8' });
  return output
    .split('\n')
    .map((line) => line.split(':')[1]?.trim().split('@')[0] ?? '')
    .filter((name) => name !== '');
}

export function runInNetns(netns: string, command: string, ...args: string[]): string {
  return execFileSync('ip', ['netns', 'exec', netns, command, ...args], { encoding: 'utf8', timeout: 10_000 });
}
