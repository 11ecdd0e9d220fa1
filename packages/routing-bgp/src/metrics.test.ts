import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createRoutingMetrics, reportPeerInfo } from './metrics.js';

describe('reportPeerInfo', () => {
  it('one series per peer gobgpd has now, typed by gobgpd or (before the session is up) by the mesh', async () => {
    const { peerInfo } = createRoutingMetrics(new Registry());
    reportPeerInfo(peerInfo, [{ conf: { neighborAddress: '10.0.0.9', peerAsn: 64_512 } }], () => true);
    reportPeerInfo(
      peerInfo,
      [
        { conf: { neighborAddress: '10.0.0.2', peerAsn: 64_512 }, state: { sessionState: 'SESSION_STATE_ESTABLISHED', type: 'PEER_TYPE_INTERNAL' } },
        { conf: { neighborAddress: '10.0.0.3', peerAsn: 64_512 } },
        { conf: { neighborAddress: '192.0.2.1', peerAsn: 65_001 }, state: { sessionState: 'SESSION_STATE_ACTIVE' } },
      ],
      (address) => address === '10.0.0.3',
    );
    const series = (await peerInfo.get()).values.map((v) => v.labels);
    expect(series).toEqual([
      { address: '10.0.0.2', type: 'internal', asn: '64512', state: 'established' },
      { address: '10.0.0.3', type: 'internal', asn: '64512', state: 'unknown' },
      { address: '192.0.2.1', type: 'unknown', asn: '65001', state: 'active' },
    ]);
  });
});
