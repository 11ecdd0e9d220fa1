/**
 * The input line a restore tool's stderr blames: iptables-restore says "line 3 failed" or "Error occurred at line: 4",
 * ipset "Error in line 3:", nft "/dev/stdin:3:23-23: Error:", ip -batch "Command failed -:3".
 */
export function blamedInputLine(stderr: string, input: string): { line: number; text: string } | undefined {
  const match = /line:? (\d+)/.exec(stderr) ?? /stdin>?:(\d+):/.exec(stderr) ?? /failed -:(\d+)/.exec(stderr);
  if (!match) return undefined;
  const line = Number(match[1]);
  const text = input.split('\n')[line - 1];
  return text === undefined ? undefined : { line, text };
}
