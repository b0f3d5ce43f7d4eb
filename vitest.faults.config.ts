// The fault-injection suite (`npm run test:faults`): real Baton processes against a private
// Postgres and nats-server that the scenarios kill and restart. One file at a time, one fork:
// the scenarios take the whole 2-core machine, and they own servers on their own ports.
//
// test/faults/pending-executor-features.test.ts holds scenarios that wait for executor features
// (schedule-to-start reclaim, dead-worker detection); it is left out until they land. Run it on
// its own with `npx vitest run --config vitest.faults.config.ts --mode pending`.
import { configDefaults, defineConfig } from 'vitest/config';

const PENDING = 'test/faults/pending-executor-features.test.ts';

export default defineConfig(({ mode }) => ({
  test: {
    include: mode === 'pending' ? [PENDING] : ['test/faults/**/*.test.ts'],
    exclude: mode === 'pending' ? [...configDefaults.exclude] : [PENDING, ...configDefaults.exclude],
    pool: 'forks',
    maxWorkers: 1,
    fileParallelism: false,
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/setup.ts'],
    // Every scenario sets its own bound; these are the backstops.
    testTimeout: 180_000,
    hookTimeout: 180_000,
    teardownTimeout: 60_000,
  },
}));
