// The lab's kubelet in CNI mode, with Debian's bridge and host-local plugins: a pod is refused while the CNI file has
// no ranges, retried, started once it has them; its removal gives back the address and leaves nothing behind.
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CNI_PATH } from '../cni/cni-runner.js';
import { KUBE_ROUTER_CNI_CONFLIST } from '../cni/kube-router-cni-conf.js';
import { startApiServer, type ApiServer } from '../index.js';
import { startLab, type Lab } from './lab.js';
import { listNetns } from './netns.js';
import { runCommand } from './run-command.js';
import { labSkipReason } from './testing/preconditions.js';

const missingPlugins = ['bridge', 'host-local'].filter((plugin) => !existsSync(join(DEFAULT_CNI_PATH, plugin)));
const skipReason = labSkipReason() ?? (missingPlugins.length > 0 ? `missing CNI plugins: ${missingPlugins.join(', ')}` : undefined);

describe.skipIf(skipReason !== undefined)(`lab kubelet with CNI plugins${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  let api: ApiServer;
  let lab: Lab;
  let dir = '';
  let confFile = '';
  const leases = () => join(dir, 'leases', KUBE_ROUTER_CNI_CONFLIST.name);
  const conflist = (ranges?: unknown) => {
    const [bridge] = KUBE_ROUTER_CNI_CONFLIST.plugins;
    return JSON.stringify({ ...KUBE_ROUTER_CNI_CONFLIST, plugins: [{ ...bridge, ipam: { ...bridge.ipam, dataDir: join(dir, 'leases'), ...(ranges !== undefined && { ranges }) } }] });
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'krt-cni-mode-'));
    confFile = join(dir, '10-kuberouter.conflist');
    // As install-cni leaves it: no ranges until the agent writes them.
    await writeFile(confFile, conflist());
    api = await startApiServer({ port: 0 });
    lab = await startLab({ apiServer: api, runId: 'tcnim', nodeName: 'cni-node', podCidrs: ['10.246.0.0/24'], cniConfFile: confFile });
  }, 60_000);

  afterAll(async () => {
    await lab?.stop();
    await api?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  }, 60_000);

  it('waits through "no IP ranges specified", then runs the pod on kube-bridge with an address from the ranges written meanwhile', async () => {
    const adding = lab.addPod({ namespace: 'x', name: 'early', ports: [{ port: 80, protocol: 'TCP' }] });
    // The kubelet has tried (and failed) at least once before the ranges come.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await writeFile(confFile, conflist([[{ subnet: '10.246.0.0/24' }]]));
    const pod = await adding;
    expect(pod.ips).toEqual([expect.stringMatching(/^10\.246\.0\.\d+$/)]);
    expect(existsSync(join(leases(), pod.ips[0]!))).toBe(true);
    const ports = JSON.parse(await runCommand('ip', ['-n', lab.nodeNetns, '-j', 'link', 'show', 'master', 'kube-bridge'])) as unknown[];
    expect(ports).toHaveLength(1);
    expect(await lab.probe({ netns: lab.nodeNetns }, pod.ips[0]!, 80)).toBe(true);
  }, 60_000);

  it('gives the address back and removes the sandbox when the pod goes', async () => {
    const pod = lab.pod({ namespace: 'x', name: 'early' });
    await lab.deletePod({ namespace: 'x', name: 'early' });
    expect(existsSync(join(leases(), pod.ips[0]!))).toBe(false);
    expect(await listNetns()).not.toContain(pod.netns);
    expect(JSON.parse(await runCommand('ip', ['-n', lab.nodeNetns, '-j', 'link', 'show', 'master', 'kube-bridge']))).toEqual([]);
  }, 60_000);

  it('leaves no namespace of its own after it stops', async () => {
    await lab.stop();
    expect((await listNetns()).filter((name) => name.startsWith('krt-tcnim-'))).toEqual([]);
    expect((await readdir(leases())).filter((file) => /^\d/.test(file))).toEqual([]);
  }, 60_000);
});
