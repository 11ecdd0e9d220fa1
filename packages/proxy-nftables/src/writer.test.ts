import { Nft, RecordingRunner } from '@kube-router/netfilter';
import { describe, expect, it } from 'vitest';
import { buildProxyModel } from './model.js';
import { renderTable } from './render.js';
import { staleFlows, stillStale } from './stale-flows.js';
import { node, service, slice } from './testing/objects.js';
import type { SliceEndpoint } from './testing/objects.js';
import { STALE_CHAIN_DELAY_MS, TableWriter } from './writer.js';

function model(endpoints: (string | SliceEndpoint)[], protocol = 'TCP') {
  return buildProxyModel(
    {
      services: [service('web', { type: 'NodePort', ports: [{ name: 'http', port: 80, protocol, nodePort: 30080 }], externalIPs: ['203.0.113.1'] })],
      slicesFor: () => [slice(endpoints.map((endpoint) => (typeof endpoint === 'string' ? { ip: endpoint } : endpoint)), [{ name: 'http', port: 8080, protocol }])],
      node: node(),
      nodeName: 'node-a',
    },
    { families: ['ipv4'], nodePortBindOnAllIp: false, serviceProxyName: 'kube-router' },
  );
}

function state(endpoints: string[]) {
  const built = model(endpoints);
  return renderTable(built.ports.ipv4, built.nodePortAddresses.ipv4, { family: 'ipv4', podCidrs: [], masqueradeAll: false, nodePortBindOnAllIp: false });
}

function writer(runner: RecordingRunner, clock: { now: number }) {
  return new TableWriter(new Nft({ runner }), 'ip', 'kube-router-proxy', () => clock.now);
}

const NO_TABLE = { exitCode: 1, stderr: 'Error: No such file or directory; did you mean table ‘x’ in family ip?' };

describe('TableWriter', () => {
  it('lists and writes everything first, then writes only changes without listing', async () => {
    const runner = new RecordingRunner().on('nft', {}).on((spec) => spec.args?.includes('list') ?? false, NO_TABLE);
    const clock = { now: 0 };
    const tables = writer(runner, clock);
    expect(await tables.write(state(['10.244.0.5', '10.244.0.6']), false)).toMatchObject({ mode: 'full', drift: undefined });
    expect(runner.lines()).toEqual(['nft -j list table ip kube-router-proxy', 'nft -f -']);
    runner.invocations.length = 0;
    const report = await tables.write(state(['10.244.0.5']), false);
    expect(report.mode).toBe('partial');
    expect(runner.lines()).toEqual(['nft -f -']);
    expect(runner.invocations[0]?.input).not.toContain('add table');
    expect(tables.staleChains).toBe(1);
    // The flushed chain goes once the kernel has let go of it.
    runner.invocations.length = 0;
    await tables.deleteStaleChains();
    expect(runner.lines()).toEqual([]);
    clock.now += STALE_CHAIN_DELAY_MS;
    await tables.deleteStaleChains();
    expect(runner.invocations[0]?.input).toMatch(/^delete chain ip kube-router-proxy endpoint-.*10\.244\.0\.6\/8080\n$/);
    expect(tables.staleChains).toBe(0);
    expect(await tables.write(state(['10.244.0.5']), false)).toMatchObject({ mode: 'unchanged' });
  });

  it('a full write deletes the plugin\'s counters the listing shows and no element needs, and keeps the others', async () => {
    const listing = JSON.stringify({
      nftables: [
        { counter: { family: 'ip', name: 'in-AAAAAAAA-default/gone/tcp/http__10.96.0.99/80', table: 'kube-router-proxy', handle: 4, packets: 3, bytes: 180 } },
        { counter: { family: 'ip', name: 'someone-elses', table: 'kube-router-proxy', handle: 5, packets: 0, bytes: 0 } },
      ],
    }).replaceAll('":', '": ').replaceAll(',"', ', "');
    const runner = new RecordingRunner().on('nft', {}).on((spec) => spec.args?.includes('list') ?? false, { stdout: listing });
    await writer(runner, { now: 0 }).write(state(['10.244.0.5']), true);
    const script = runner.invocations.at(-1)?.input ?? '';
    expect(script.match(/^delete counter .*$/gm)).toEqual(['delete counter ip kube-router-proxy in-AAAAAAAA-default/gone/tcp/http__10.96.0.99/80']);
    // Cluster IP, external IP and the NodePort on the node's address: three counters each, added again (counts kept).
    expect(script.match(/^add counter /gm)).toHaveLength(9);
  });

  it('after a refused write, the next one lists the table and writes it all again', async () => {
    const runner = new RecordingRunner().on('nft', {}).on((spec) => spec.args?.includes('list') ?? false, { stdout: '{"nftables": []}' });
    runner.once((spec) => spec.args?.includes('-f') ?? false, { exitCode: 1, stderr: 'Error: Could not process rule: No such file or directory' });
    const tables = writer(runner, { now: 0 });
    await expect(tables.write(state(['10.244.0.5']), false)).rejects.toThrow(/Could not process rule/);
    expect(tables.written).toBeUndefined();
    expect(await tables.write(state(['10.244.0.5']), false)).toMatchObject({ mode: 'full' });
  });
});

describe('staleFlows', () => {
  it('names the UDP flows of a gone endpoint at every Service address and the NodePort, none for TCP', () => {
    const flows = staleFlows(model(['10.244.0.5', '10.244.0.6'], 'UDP').ports.ipv4, model(['10.244.0.5'], 'UDP').ports.ipv4);
    expect(flows).toEqual([
      { family: 'ipv4', originalDestination: '10.96.0.10', originalPort: 80, replySource: '10.244.0.6' },
      { family: 'ipv4', originalDestination: '203.0.113.1', originalPort: 80, replySource: '10.244.0.6' },
      { family: 'ipv4', originalDestination: undefined, originalPort: 30080, replySource: '10.244.0.6' },
    ]);
    expect(staleFlows(model(['10.244.0.5', '10.244.0.6']).ports.ipv4, model(['10.244.0.5']).ports.ipv4)).toEqual([]);
  });

  it('clears the refused flows of a Service port that gets its first endpoint', () => {
    const flows = staleFlows(model([], 'UDP').ports.ipv4, model(['10.244.0.5'], 'UDP').ports.ipv4);
    expect(flows).toEqual([
      { family: 'ipv4', originalDestination: '10.96.0.10', originalPort: 80, replySource: undefined },
      { family: 'ipv4', originalDestination: '203.0.113.1', originalPort: 80, replySource: undefined },
      { family: 'ipv4', originalDestination: undefined, originalPort: 30080, replySource: undefined },
    ]);
  });

  it('keeps the flows of an endpoint still serving, terminating or not chosen; deletes those of one no longer serving', () => {
    const before = model(['10.244.0.5', '10.244.0.6', '10.244.0.7'], 'UDP').ports.ipv4;
    const after = model(['10.244.0.5', { ip: '10.244.0.6', ready: false, serving: true, terminating: true }, { ip: '10.244.0.7', ready: false, serving: false, terminating: true }], 'UDP').ports.ipv4;
    expect(after[0]?.endpoints.allReachable.map((endpoint) => endpoint.address)).toEqual(['10.244.0.5']);
    expect(staleFlows(before, after).map((flow) => flow.replySource)).toEqual(['10.244.0.7', '10.244.0.7', '10.244.0.7']);
    // A flow that failed to go is retried only while its endpoint does not serve the port again.
    const [flow] = staleFlows(before, after);
    expect(flow && stillStale(flow, after)).toBe(true);
    expect(flow && stillStale(flow, before)).toBe(false);
  });
});
