// Bounded waiting for the fault scenarios: the tests' own `until` (test/support/until.ts), checking
// every 100 ms since each check here is a query or a connection, and the runtime's `sleep`.
import { until as untilEvery } from '../support/until.ts';

export { sleep } from '../../src/async/sleep.ts';

/** Poll `probe` until it is true; throws after `ms`, naming `what`. */
export const until = (what: string, probe: () => Promise<boolean> | boolean, ms: number): Promise<void> => untilEvery(what, probe, ms, { everyMs: 100 });
