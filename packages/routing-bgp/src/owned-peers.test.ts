import { SyncFailures } from '@kube-router/controller';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { ApiPeer, GobgpClient, PeerConfig } from './gobgp-api.js';
import { forEachAtMost, OwnedPeers, PEER_CALLS_AT_ONCE, PeerTable, type WantedPeer } from './peer-sync.js';

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
    new PeerTable(
      [...peers.values()].map(
        (p): ApiPeer => ({
          conf: { neighborAddress: p.neighborAddress, peerAsn: p.peerAsn },
          transport: { remotePort: p.remotePort },
          timers: { config: { holdTime: p.holdTimeSeconds } },
          afiSafis: p.families.map((afi) => ({ config: { family: { afi, safi: 'SAFI_UNICAST' }, enabled: true } })),
        }),
      ),
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

  it('a failed addition is a failure of its object, every one is reported, and the other peers are still added', async () => {
    const gobgp = fakeGobgp();
    // Two refusals, the second one late: with calls in flight together, neither may be lost.
    const refused = new Map([['192.0.2.1', 0], ['192.0.2.3', 20]]);
    const client = {
      addPeer: async (config: PeerConfig) => {
        const delayMs = refused.get(config.neighborAddress);
        if (delayMs === undefined) return gobgp.client.addPeer(config);
        await new Promise((resolve) => setTimeout(resolve, delayMs));
        throw new Error('refused');
      },
      deletePeer: gobgp.client.deletePeer,
    } as unknown as GobgpClient;
    const owned = new OwnedPeers(new Set(), 'external', logger);
    const failures = new SyncFailures();
    const existing = new PeerTable([]);
    await owned.reconcile({ client, wanted: [wanted('192.0.2.1'), wanted('192.0.2.2'), wanted('192.0.2.3')], existing, failures, deferDeletions: false });
    expect(() => failures.throwIfAny()).toThrow(/external-peer\/192\.0\.2\.1.*refused/s);
    expect(() => failures.throwIfAny()).toThrow(/external-peer\/192\.0\.2\.3.*refused/s);
    expect(owned.addresses).toEqual(new Set(['192.0.2.2']));
    // The sync's table holds what gobgpd accepted, no more: the policies after this stage name only that peer.
    expect([...existing.addresses]).toEqual(['192.0.2.2']);
  });

  it(`changes up to ${PEER_CALLS_AT_ONCE} peers at once, each peer's own calls in order, and records every change in the sync's table`, async () => {
    const gobgp = fakeGobgp();
    const owned = new OwnedPeers(new Set(), 'internal', logger);
    const addresses = Array.from({ length: 30 }, (_, i) => `192.0.2.${i + 1}`);
    const run = async (peers: WantedPeer[]) => {
      const failures = new SyncFailures();
      const existing = gobgp.existing();
      await owned.reconcile({ client: slow(gobgp.client), wanted: peers, existing, failures, deferDeletions: false });
      failures.throwIfAny();
      return existing;
    };
    // Every call takes a few milliseconds, as gobgpd's do: the calls in flight at once are counted.
    let inFlight = 0;
    let most = 0;
    const slow = (client: GobgpClient) =>
      ({
        addPeer: (config: PeerConfig) => held(() => client.addPeer(config)),
        deletePeer: (address: string) => held(() => client.deletePeer(address)),
      }) as unknown as GobgpClient;
    const held = async (call: () => Promise<unknown>) => {
      most = Math.max(most, ++inFlight);
      await new Promise((resolve) => setTimeout(resolve, 2));
      inFlight--;
      return call();
    };
    const first = await run(addresses.map((address) => wanted(address)));
    expect(most).toBe(PEER_CALLS_AT_ONCE);
    expect([...gobgp.peers.keys()].sort()).toEqual([...addresses].sort());
    expect(first.addresses.sort()).toEqual([...addresses].sort());
    // A changed password re-adds every peer (delete, then add, for each), and the peers no longer wanted go.
    gobgp.calls.length = 0;
    most = 0;
    const kept = addresses.slice(0, 20);
    const second = await run(kept.map((address) => wanted(address, { password: 'new' })));
    expect(most).toBe(PEER_CALLS_AT_ONCE);
    for (const address of kept) {
      expect(gobgp.calls.filter((call) => call.endsWith(` ${address}`))).toEqual([`delete ${address}`, `add ${address}`]);
      expect(second.get(address)?.conf?.authPassword).toBe('new');
    }
    expect(gobgp.calls.filter((call) => call.startsWith('delete ')).length).toBe(30);
    expect([...gobgp.peers.keys()].sort()).toEqual([...kept].sort());
    expect(second.addresses.sort()).toEqual([...kept].sort());
    expect(owned.addresses).toEqual(new Set(kept));
  });

  it('stops starting steps once one throws, and throws only after those in flight have ended', async () => {
    let started = 0;
    let inFlight = 0;
    const step = async (item: number) => {
      started++;
      inFlight++;
      await new Promise((resolve) => setTimeout(resolve, 5));
      inFlight--;
      if (item === 3) throw new Error('step 3 failed');
    };
    await expect(forEachAtMost(4, Array.from({ length: 20 }, (_, index) => index), step)).rejects.toThrow('step 3 failed');
    expect(inFlight).toBe(0);
    expect(started).toBeLessThan(20);
  });
});
