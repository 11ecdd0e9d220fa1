import { accessSync, constants } from 'node:fs';
import { labSkipReason } from '../lab/preconditions.js';
import { FRR_BGPD } from './frr.js';

/** Why BIRD (`bird`) or FRR (`frr`) routers cannot run here (root, iproute2 and the daemon are needed), or undefined. */
export function bgpRoutersSkipReason(kind: 'bird' | 'frr'): string | undefined {
  if (kind === 'bird') return labSkipReason('bird', 'birdc');
  const lab = labSkipReason('vtysh');
  if (lab) return lab;
  try {
    accessSync(FRR_BGPD, constants.X_OK);
    return undefined;
  } catch {
    return `missing ${FRR_BGPD} (Debian package frr)`;
  }
}
