import type { Lab, ProbeRequest } from '@kube-router/testkit';

export interface Expectation {
  from: string;
  to: string;
  port: number;
  family?: 4 | 6;
  protocol?: 'TCP' | 'UDP';
  open: boolean;
}

/** Probes every expectation at once and lists the ones that came out otherwise, so a failure shows the whole matrix. */
export async function mismatches(lab: Lab, expectations: readonly Expectation[]): Promise<string[]> {
  const requests: ProbeRequest[] = expectations.map((e) => ({
    from: e.from,
    to: e.to,
    port: e.port,
    protocol: e.protocol ?? 'TCP',
    family: e.family ?? 4,
  }));
  const results = await lab.probeMany(requests);
  return expectations.flatMap((e, i) => {
    const ok = results[i]?.ok ?? false;
    if (ok === e.open) return [];
    return [`${e.from} -> ${e.to}:${e.port}/${e.protocol ?? 'TCP'} v${e.family ?? 4}: expected ${e.open ? 'open' : 'blocked'}, was ${ok ? 'open' : 'blocked'}`];
  });
}
