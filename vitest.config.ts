import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/faults/**', ...configDefaults.exclude], // npm run test:faults (vitest.faults.config.ts)
    // Child processes, not threads: pg pools, NATS connections and embedded servers are
    // per-process resources, and a crashing file cannot take its neighbours with it.
    pool: 'forks',
    maxWorkers: 2, // the machines are 2-core; Postgres needs CPU too
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    teardownTimeout: 30_000,
  },
});
