import { backendTestRunId, missingForBackendTests, startBackendWorld } from '@kube-router/testkit/netpol-conformance';
import type { BackendWorld } from '@kube-router/testkit/netpol-conformance';
import type { NetpolTestBackend } from './backend.js';
import { startTestEnforcer } from './enforcer.js';
import type { TestEnforcer, TestEnforcerOptions } from './enforcer.js';

/** Why the backend's real tests cannot run here (not root, a tool missing), or undefined. */
export function missingForRealTests(backend: NetpolTestBackend, ...tools: string[]): string | undefined {
  return missingForBackendTests([...backend.tools, ...tools]);
}

/** `tnf` and three random characters: the lab's run id, so that every name these tests create starts with krt-tnf. */
export function testRunId(): string {
  return backendTestRunId('tnf');
}

export type World = BackendWorld<TestEnforcerOptions, TestEnforcer>;

/** The embedded API server and a lab node (names `krt-tnf...`); enforcers started through it stop with it. */
export function startWorld(backend: NetpolTestBackend): Promise<World> {
  return startBackendWorld({ startEnforcer: (env, extra) => startTestEnforcer(backend, env, extra), runId: testRunId() });
}

/**
 * The suites' pods: web/server, web/client and other/client, each serving 80/TCP; with `namedPorts`, web/server
 * serves 80 as `http` and 8080 as `alt`. Resolves with them in that order.
 */
export function addServerAndClients(world: World, { namedPorts = false } = {}): Promise<Awaited<ReturnType<World['lab']['addPod']>>[]> {
  const serverPorts = namedPorts
    ? [
        { port: 80, name: 'http' },
        { port: 8080, name: 'alt' },
      ]
    : [{ port: 80 }];
  return Promise.all([
    world.lab.addPod({ namespace: 'web', name: 'server', labels: { app: 'server' }, ports: serverPorts }),
    world.lab.addPod({ namespace: 'web', name: 'client', labels: { app: 'client' }, ports: [{ port: 80 }] }),
    world.lab.addPod({ namespace: 'other', name: 'client', labels: { app: 'client' }, ports: [{ port: 80 }] }),
  ]);
}
