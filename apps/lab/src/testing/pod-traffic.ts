import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A TCP connect from inside a network namespace, by a process of its own, as any client in the pod would. */
export async function canConnect(netns: string, ip: string, port: number): Promise<boolean> {
  const script = `const s = require('net').connect(${port}, '${ip}'); s.setTimeout(700);
    s.on('connect', () => process.exit(0)); s.on('timeout', () => process.exit(1)); s.on('error', () => process.exit(1));`;
  return run('ip', ['netns', 'exec', netns, process.execPath, '-e', script], { timeout: 5_000 }).then(
    () => true,
    () => false,
  );
}

/** The lab's seeded demo/web pod opened to demo/client alone, on port 80: the intruder (namespace other) is cut off. */
export const WEB_FROM_CLIENT_POLICY = `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: { name: web-from-client, namespace: demo }
spec:
  podSelector: { matchLabels: { app: web } }
  ingress:
    - from: [{ podSelector: { matchLabels: { app: client } } }]
      ports: [{ port: 80, protocol: TCP }]
`;
