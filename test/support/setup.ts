// Runs in every test file before its own code (vitest setupFiles). Registered first, this
// afterAll runs last (vitest runs "after" hooks in reverse), after the file's own cleanup.
import { afterAll } from 'vitest';
import { assertAllTestDatabasesDropped } from './test-db.ts';

afterAll(async () => {
  await assertAllTestDatabasesDropped();
});
