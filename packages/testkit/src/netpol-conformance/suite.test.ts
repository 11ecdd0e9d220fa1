import { runNetpolConformanceSuite } from './suite.js';

// The suite's own wiring (world in beforeAll, reset, sync and baseline after each case, teardown) with no dataplane:
// only the case that needs none can pass, so only that one is selected.
runNetpolConformanceSuite({
  name: 'no enforcer (self-test)',
  startEnforcer: async () => ({ syncNow: async () => ({ ok: true }), stop: async () => undefined }),
  only: ['allows every connection when there is no policy'],
});
