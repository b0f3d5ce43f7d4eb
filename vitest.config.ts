import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';

const source = (file: string) => fileURLToPath(new URL(file, import.meta.url));

export default defineConfig({
  // The package's own name resolves to the sources in tests (tsconfig.json's `paths` says the same).
  resolve: {
    alias: [
      { find: /^@baton-run\/baton$/, replacement: source('./src/index.ts') },
      { find: /^@baton-run\/baton\/worker$/, replacement: source('./src/embed/worker.ts') },
      { find: /^@baton-run\/baton\/testing$/, replacement: source('./src/testing/index.ts') },
    ],
  },
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
