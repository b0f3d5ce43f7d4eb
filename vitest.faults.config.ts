// The fault-injection suite (`npm run test:faults`): real Baton processes against a private
// Postgres and nats-server that the scenarios kill and restart. One file at a time, one fork:
// the scenarios take the whole 2-core machine, and they own servers on their own ports.
import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    exclude: [...configDefaults.exclude],
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
});
