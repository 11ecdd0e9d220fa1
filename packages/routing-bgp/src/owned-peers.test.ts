import { SyncFailures } from '@kube-router/controller';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { ApiPeer, GobgpClient, PeerConfig } from './gobgp-api.js';
import { OwnedPeers, type WantedPeer } from './peer-sync.js';

/** A stand-in for gobgpd's peer table (the real one is exercised by external-peers.real.test.ts). */
function fakeGobgp() {
  const peers = new Map<string, PeerConfig>();
  const calls: string[] = [];
  const client = {
    addPeer: (config: PeerConfig) => {
      calls.push(`add ${config.neighborAddress}`);
      peers.set(config.neighborAddress, config);
      return Promise.resolve();
    },
    deletePeer: (address: string) => {
      calls.push(`delete ${address}`);
      peers.delete(address);
      return Promise.resolve();
    },
  } as unknown as GobgpClient;
  const existing = () =>
    new Map<string, ApiPeer>(
      [...peers.values()].map((p) => [
        p.neighborAddress,
        {
          conf: { neighborAddress: p.neighborAddress, peerAsn: p.peerAsn },
          transport: { remotePort: p.remotePort },
          timers: { config: { holdTime: p.holdTimeSeconds } },
          afiSafis: p.families.map((afi) => ({ config: { family: { afi, safi: 'SAFI_UNICAST' }, enabled: true } })),
        },
      ]),
    );
  return { client, peers, calls, existing };
}

const wanted = (address: string, extra: Partial<PeerConfig> = {}): WantedPeer => ({
  config: { neighborAddress: address, peerAsn: 65_001, remotePort: 179, holdTimeSeconds: 90, families: ['AFI_IP'], ...extra },
  object: `external-peer/${address}`,
  logFields: {},
});

describe('OwnedPeers', () => {
  const logger = pino({ level: 'silent' });

  it('adds once, re-adds a peer whose settings changed, removes what is no longer wanted', async () => {
    const gobgp = fakeGobgp();
    const owned = new OwnedPeers(new Set(), 'external', logger);
    const run = async (peers: WantedPeer[], deferDeletions = false) => {
      const failures = new SyncFailures();
      const deferred = await owned.reconcile({ client: gobgp.client, wanted: peers, existing: gobgp.existing(), failures, deferDeletions });
      failures.throwIfAny();
      return deferred;
    };
    await run([wanted('192.0.2.1'), wanted('192.0.2.2')]);
    await run([wanted('192.0.2.1'), wanted('192.0.2.2')]);
    expect(gobgp.calls).toEqual(['add 192.0.2.1', 'add 192.0.2.2']);
    await run([wanted('192.0.2.1', { password: 'new' }), wanted('192.0.2.2')]);
    expect(gobgp.calls.slice(2)).toEqual(['delete 192.0.2.1', 'add 192.0.2.1']);
    expect(gobgp.peers.get('192.0.2.1')?.password).toBe('new');
    // Deferred: nothing is removed, and the caller learns what would have been.
    expect(await run([wanted('192.0.2.1', { password: 'new' })], true)).toEqual(['192.0.2.2']);
    expect(owned.addresses).toEqual(new Set(['192.0.2.1', '192.0.2.2']));
    expect(await run([wanted('192.0.2.1', { password: 'new' })])).toEqual([]);
    expect(gobgp.calls.slice(4)).toEqual(['delete 192.0.2.2']);
    expect(owned.addresses).toEqual(new Set(['192.0.2.1']));
  });

  it('never deletes a peer it did not add; adopts an existing one that matches; forget() starts over', async () => {
    const gobgp = fakeGobgp();
    await gobgp.client.addPeer(wanted('192.0.2.9').config);
    await gobgp.client.addPeer(wanted('192.0.2.1').config);
    gobgp.calls.length = 0;
    const owned = new OwnedPeers(new Set(), 'internal', logger);
    const failures = new SyncFailures();
    await owned.reconcile({ client: gobgp.client, wanted: [wanted('192.0.2.1')], existing: gobgp.existing(), failures, deferDeletions: false });
    expect(gobgp.calls).toEqual([]);
    expect(owned.addresses).toEqual(new Set(['192.0.2.1']));
    expect(gobgp.peers.has('192.0.2.9')).toBe(true);
    owned.forget();
    expect(owned.addresses.size).toBe(0);
  });

  it('a failed addition is a failure of its object, and the other peers are still added', async () => {
    const gobgp = fakeGobgp();
    const client = {
      addPeer: (config: PeerConfig) =>
        config.neighborAddress === '192.0.2.1' ? Promise.reject(new Error('refused')) : gobgp.client.addPeer(config),
      deletePeer: gobgp.client.deletePeer,
    } as unknown as GobgpClient;
    const owned = new OwnedPeers(new Set(), 'external', logger);
    const failures = new SyncFailures();
    await owned.reconcile({ client, wanted: [wanted('192.0.2.1'), wanted('192.0.2.2')], existing: new Map(), failures, deferDeletions: false });
    expect(() => failures.throwIfAny()).toThrow(/external-peer\/192\.0\.2\.1.*refused/);
    expect(owned.addresses).toEqual(new Set(['192.0.2.2']));
  });
});
