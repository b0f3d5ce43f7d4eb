// A test database and a Postgres event store on it, for the enclosing describe block (or file):
// created in beforeAll, closed and dropped in afterAll, after `beforeClose` (processes to kill).
import { afterAll, beforeAll } from 'vitest';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createTestDatabase, type TestDatabase, type TestDatabaseOptions } from './test-db.ts';

export interface TestStore {
  readonly db: TestDatabase;
  readonly store: PostgresEventStore;
}

export function useTestStore(o: TestDatabaseOptions & { beforeClose?: () => Promise<void> } = {}): TestStore {
  let db: TestDatabase | undefined;
  let store: PostgresEventStore | undefined;
  beforeAll(async () => {
    db = await createTestDatabase(o);
    store = createPostgresEventStore(db.pool);
  });
  afterAll(async () => {
    await o.beforeClose?.();
    await store?.close();
    await db?.drop();
    db = store = undefined;
  });
  const only = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error('useTestStore(): the database and store exist only inside the tests and hooks of the block that called it');
    return v;
  };
  return {
    get db() {
      return only(db);
    },
    get store() {
      return only(store);
    },
  };
}
