/**
 * Namespaces on one bridge for the routers' own tests, and a gobgpd driven with its CLI (testkit cannot import
 * routing-bgp's client). Every name starts with `bl` + a run id.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExecRunner } from '@kube-router/netfilter';
import { waitFor } from '../../wait.js';

const runner = new ExecRunner({ defaultTimeoutMs: 10_000 });

export async function sh(command: string, args: string[], netns?: string): Promise<string> {
  return (await runner.run({ command, args, ...(netns && { netns }) })).stdout;
}

export interface Member {
  netns: string;
  address: string;
  address6: string;
}

export interface Topology {
  members: Record<string, Member>;
  teardown(): Promise<void>;
}

/** A bridge namespace and one namespace per member, on 10.<subnet>.0.0/24 and fd00:<subnet>::/64. */
export async function createTopology(memberNames: readonly string[], subnet: number): Promise<Topology> {
  const prefix = `bl${Math.random().toString(36).slice(2, 6)}`;
  const bridge = `${prefix}-br`;
  const created: string[] = [];
  const teardown = async () => {
    for (const netns of created.reverse()) await sh('ip', ['netns', 'delete', netns]).catch(() => undefined);
  };
  try {
    await sh('ip', ['netns', 'add', bridge]);
    created.push(bridge);
    await sh('ip', ['link', 'add', 'br0', 'type', 'bridge'], bridge);
    await sh('ip', ['link', 'set', 'br0', 'up'], bridge);
    const members: Record<string, Member> = {};
    for (const [index, name] of memberNames.entries()) {
      const netns = `${prefix}-${name}`;
      await sh('ip', ['netns', 'add', netns]);
      created.push(netns);
      const member = { netns, address: `10.${subnet}.0.${index + 1}`, address6: `fd00:${subnet}::${index + 1}` };
      await sh('ip', ['link', 'add', 'eth0', 'netns', netns, 'type', 'veth', 'peer', 'name', `v${index}`, 'netns', bridge]);
      await sh('ip', ['link', 'set', `v${index}`, 'master', 'br0', 'up'], bridge);
      await sh('ip', ['addr', 'add', `${member.address}/24`, 'dev', 'eth0'], netns);
      await sh('ip', ['addr', 'add', `${member.address6}/64`, 'dev', 'eth0', 'nodad'], netns);
      await sh('ip', ['link', 'set', 'eth0', 'up'], netns);
      await sh('ip', ['link', 'set', 'lo', 'up'], netns);
      members[name] = member;
    }
    return { members, teardown };
  } catch (error) {
    await teardown();
    throw error;
  }
}

export interface GobgpNeighbor {
  address: string;
  asn: number;
  password?: string;
  families?: ('ipv4-unicast' | 'ipv6-unicast')[];
  /** Announces graceful restart with this restart time. */
  gracefulRestartSeconds?: number;
}

export interface Gobgp {
  /** Runs `gobgp <args>` against this gobgpd. */
  cli(args: string[]): Promise<string>;
  /** `gobgp -j global rib -a <family>`: prefix -> its paths. */
  rib(family?: 'ipv4' | 'ipv6'): Promise<Record<string, GobgpPath[]>>;
  neighborState(address: string): Promise<string>;
  stop(): Promise<void>;
  /** SIGKILL, no goodbye to its peers: what a crash or an agent restart looks like to them. */
  kill(): Promise<void>;
}

export interface GobgpPath {
  nlri: { prefix: string };
  attrs: { type: number; as_paths?: { asns: number[] }[]; communities?: number[]; nexthop?: string; value?: unknown }[];
  best?: boolean;
}

/** gobgpd in a namespace, configured from a TOML file; its gRPC API listens on the namespace's own loopback. */
export async function startGobgpd(netns: string, asn: number, routerId: string, neighbors: GobgpNeighbor[]): Promise<Gobgp> {
  const dir = await mkdtemp(join(tmpdir(), 'blgobgp-'));
  const toml = [
    '[global.config]',
    `  as = ${asn}`,
    `  router-id = "${routerId}"`,
    ...neighbors.flatMap((neighbor) => [
      '[[neighbors]]',
      '  [neighbors.config]',
      `    neighbor-address = "${neighbor.address}"`,
      `    peer-as = ${neighbor.asn}`,
      ...(neighbor.password ? [`    auth-password = "${neighbor.password}"`] : []),
      '  [neighbors.timers.config]',
      '    connect-retry = 1',
      ...(neighbor.gracefulRestartSeconds
        ? ['  [neighbors.graceful-restart.config]', '    enabled = true', `    restart-time = ${neighbor.gracefulRestartSeconds}`]
        : []),
      ...(neighbor.families ?? [neighbor.address.includes(':') ? 'ipv6-unicast' : 'ipv4-unicast']).flatMap((family) => [
        '  [[neighbors.afi-safis]]',
        '    [neighbors.afi-safis.config]',
        `      afi-safi-name = "${family}"`,
        ...(neighbor.gracefulRestartSeconds ? ['    [neighbors.afi-safis.mp-graceful-restart.config]', '      enabled = true'] : []),
      ]),
    ]),
  ].join('\n');
  await writeFile(join(dir, 'gobgpd.toml'), `${toml}\n`);
  const child: ChildProcess = spawn('ip', ['netns', 'exec', netns, 'gobgpd', '-f', join(dir, 'gobgpd.toml'), '--pprof-disable', '--api-hosts=127.0.0.1:50051'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (log = (log + chunk).slice(-8_000)));
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const cli = (args: string[]) => sh('gobgp', ['-u', '127.0.0.1', '-p', '50051', ...args], netns);
  const gobgp: Gobgp = {
    cli,
    async rib(family = 'ipv4') {
      return JSON.parse(await cli(['-j', 'global', 'rib', '-a', family])) as Record<string, GobgpPath[]>;
    },
    async neighborState(address) {
      const [neighbor] = JSON.parse(await cli(['-j', 'neighbor', address])) as { state: { session_state: number | string } }[];
      return String(neighbor?.state.session_state);
    },
    async stop() {
      process.off('exit', killOnExit);
      child.kill('SIGTERM');
      await exited;
      await rm(dir, { recursive: true, force: true });
    },
    async kill() {
      child.kill('SIGKILL');
      await gobgp.stop();
    },
  };
  try {
    await waitFor(`gobgpd in ${netns} to answer`, () => cli(['global']).then(() => true, () => false));
    return gobgp;
  } catch (error) {
    await gobgp.stop();
    throw new Error(`${String(error)}; log: ${log}`, { cause: error });
  }
}
