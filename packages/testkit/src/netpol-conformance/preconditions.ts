import { labSkipReason } from '../lab/preconditions.js';

export { hasTool } from '../lab/preconditions.js';

/** Why the suite cannot run here (the lab needs root and iproute2), or undefined when it can. */
export const worldSkipReason = (): string | undefined => labSkipReason();
