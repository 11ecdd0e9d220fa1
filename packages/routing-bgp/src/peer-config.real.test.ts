import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SyncFailures } from '@kube-router/controller';
import { labSkipReason } from '@kube-router/testkit';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GobgpClient, type PeerConfig } from './gobgp-api.js';
import { GobgpdSupervisor } from './gobgpd.js';
import { asListed, matchesConfig, OwnedPeers, PeerTable, type WantedPeer } from './peer-sync.js';

const skipReason = labSkipReason('gobgpd');
const logger = pino({ level: 'silent' });

// What ListPeer reports of a peer is what a restarted agent adopts a peer by: checked against a real gobgpd (no
// session is needed: the peers' addresses are never reached, gobgpd listens nowhere).
describe.skipIf(skipReason)(`adopting gobgpd's peers by what ListPeer reports${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  let dir = '';
  let supervisor: GobgpdSupervisor | undefined;
  let client: GobgpClient | undefined;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tbgp-adopt-'));
    const target = `unix://${join(dir, 'api.sock')}`;
    supervisor = new GobgpdSupervisor({ binary: 'gobgpd', apiHosts: [target], logger });
    await supervisor.start();
    client = new GobgpClient({ target, callTimeoutMs: 5_000 });
    await client.waitReady(10_000);
    await client.startBgp({ asn: 64_512, routerId: '192.0.2.254', listenPort: -1 });
  });
  afterAll(async () => {
    client?.close();
    await supervisor?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const external: PeerConfig = {
    neighborAddress: '198.51.100.7',
    peerAsn: 65_010,
    localAddress: '192.0.2.254',
    remotePort: 1790,
    holdTimeSeconds: 30,
    families: ['AFI_IP', 'AFI_IP6'],
    password: 'first secret',
    ebgpMultihopTtl: 3,
    gracefulRestart: { restartTimeSeconds: 120, deferralTimeSeconds: 300 },
  };
  const reflectorClient: PeerConfig = {
    neighborAddress: '198.51.100.8',
    peerAsn: 64_512,
    remotePort: 179,
    holdTimeSeconds: 90,
    families: ['AFI_IP'],
    routeReflectorClient: { clusterId: '10.0.0.1' },
  };

  it('a peer matches the configuration it was added with, and no longer does when any setting differs', async () => {
    await client!.addPeer(external);
    await client!.addPeer(reflectorClient);
    const listed = new Map((await client!.listPeers()).map((p) => [p.conf?.neighborAddress, p]));
    expect(matchesConfig(listed.get(external.neighborAddress)!, external)).toBe(true);
    expect(matchesConfig(listed.get(reflectorClient.neighborAddress)!, reflectorClient)).toBe(true);
    const changes: Partial<PeerConfig>[] = [
      { password: 'second secret' },
      { password: undefined },
      { ebgpMultihopTtl: 4 },
      { ebgpMultihopTtl: undefined },
      { holdTimeSeconds: 9 },
      { families: ['AFI_IP'] },
      { gracefulRestart: { restartTimeSeconds: 90, deferralTimeSeconds: 300 } },
      { gracefulRestart: undefined },
      { peerAsn: 65_011 },
      { remotePort: 179 },
    ];
    for (const change of changes) expect(matchesConfig(listed.get(external.neighborAddress)!, { ...external, ...change }), JSON.stringify(change)).toBe(false);
    expect(matchesConfig(listed.get(reflectorClient.neighborAddress)!, { ...reflectorClient, routeReflectorClient: { clusterId: '10.0.0.2' } })).toBe(false);
    expect(matchesConfig(listed.get(reflectorClient.neighborAddress)!, { ...reflectorClient, routeReflectorClient: undefined })).toBe(false);
    // A sync's PeerTable records its own AddPeer as asListed(config) rather than listing again: it must judge every
    // configuration as gobgpd's own listing of that peer does.
    const reflectorChanges: Partial<PeerConfig>[] = [{ routeReflectorClient: { clusterId: '10.0.0.2' } }, { routeReflectorClient: undefined }];
    for (const config of [external, reflectorClient]) {
      for (const change of [{}, ...changes, ...reflectorChanges]) {
        const variant = { ...config, ...change };
        expect(matchesConfig(asListed(config), variant), `${config.neighborAddress} ${JSON.stringify(change)}`).toBe(
          matchesConfig(listed.get(config.neighborAddress)!, variant),
        );
      }
    }
  });

  it('a restarted agent re-adds an adopted peer whose MD5 password changed, and keeps one that is unchanged', async () => {
    const wanted = (config: PeerConfig): WantedPeer => ({ config, object: `external-peer/${config.neighborAddress}`, logFields: {} });
    const reconcile = async (owned: OwnedPeers, config: PeerConfig) => {
      const failures = new SyncFailures();
      const existing = await PeerTable.list(client!);
      await owned.reconcile({ client: client!, wanted: [wanted(config)], existing, failures, deferDeletions: false });
      failures.throwIfAny();
    };
    const passwordOf = async () => (await client!.listPeers()).find((p) => p.conf?.neighborAddress === external.neighborAddress)?.conf?.authPassword;
    // A fresh OwnedPeers is a restarted agent: it knows nothing of what the previous one added.
    await reconcile(new OwnedPeers(new Set(), 'external', logger), external);
    expect(await passwordOf()).toBe('first secret');
    await reconcile(new OwnedPeers(new Set(), 'external', logger), { ...external, password: 'second secret' });
    expect(await passwordOf()).toBe('second secret');
  });
});
