// A host warms its event store's connections before its first execution (EventStore.warmUp,
// src/eventstore/postgres.ts): each warmed connection has the hot path's statements prepared, and
// the warm-up writes nothing and never asks the pool for more connections than it may hold.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresEventStore, WARM_CONNECTIONS, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { newEvent } from '../contract/event-store.contract.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const HOT_STATEMENTS = ['baton_append_exact', 'baton_append_exact_notify', 'baton_append_many', 'baton_scan_committed'];

describe('event store warm-up', () => {
  let db: TestDatabase;
  const opened: { pool: pg.Pool; store: PostgresEventStore }[] = [];
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    for (const { pool, store } of opened) {
      await store.close();
      await pool.end();
    }
    await db?.drop();
  });

  function open(max: number) {
    const pool = new pg.Pool({ connectionString: db.url, max, idleTimeoutMillis: 0 });
    const store = createPostgresEventStore(pool);
    opened.push({ pool, store });
    return { pool, store };
  }

  const counts = async () =>
    (await db.pool.query<{ events: number; streams: number }>('SELECT (SELECT count(*) FROM baton_events)::int AS events, (SELECT count(*) FROM baton_streams)::int AS streams')).rows[0]!;

  it('prepares the hot statements on every connection it warms, and writes nothing', { timeout: 30_000 }, async () => {
    const { pool, store } = open(4);
    await store.append('warm-existing', [newEvent()], { expectedRevision: 'no_stream' });
    const before = await counts();
    await store.warmUp(3);
    expect(await counts()).toEqual(before);
    // The pool's idle connections are the warmed ones (and the one the append used): take them
    // all at once and ask each what its session has prepared.
    expect(pool.idleCount).toBeGreaterThanOrEqual(3);
    const clients = await Promise.all(Array.from({ length: pool.idleCount }, () => pool.connect()));
    try {
      const prepared = await Promise.all(
        clients.map(async (c) => (await c.query<{ name: string }>('SELECT name FROM pg_prepared_statements ORDER BY name')).rows.map((r) => r.name)),
      );
      const warmed = prepared.filter((names) => HOT_STATEMENTS.every((s) => names.includes(s)));
      expect(warmed.length).toBeGreaterThanOrEqual(3);
    } finally {
      for (const c of clients) c.release();
    }
    // The store still appends and reads as before.
    await store.append('warm-existing', [newEvent()], { expectedRevision: 0n });
    expect((await store.readStream('warm-existing')).length).toBe(2);
  });

  it('warms at most as many connections as the pool may hold', { timeout: 30_000 }, async () => {
    const { pool, store } = open(2);
    await store.warmUp(WARM_CONNECTIONS + 4);
    expect(pool.totalCount).toBeLessThanOrEqual(2);
    expect(pool.waitingCount).toBe(0);
  });
});

describe('event store warm-up under a connection limit', () => {
  let db: TestDatabase;
  const role = `baton_warm_${process.pid}`;
  beforeAll(async () => {
    db = await createTestDatabase();
    await db.pool.query(`CREATE ROLE ${role} LOGIN PASSWORD 'warm-up' CONNECTION LIMIT 2`);
    await db.pool.query(`GRANT ALL ON ALL TABLES IN SCHEMA public TO ${role}; GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO ${role}; GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO ${role}`);
  });
  afterAll(async () => {
    await db?.pool.query(`DROP OWNED BY ${role}; DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
    await db?.drop();
  });

  it('gives back every connection it got when another is refused, so the pool can end (a host could not stop)', { timeout: 30_000 }, async () => {
    const url = new URL(db.url);
    url.username = role;
    url.password = 'warm-up';
    const pool = new pg.Pool({ connectionString: url.toString(), max: 4, idleTimeoutMillis: 0 });
    pool.on('error', () => undefined);
    const store = createPostgresEventStore(pool);
    try {
      await expect(store.warmUp(4)).rejects.toThrow(/too many connections for role/);
      expect(pool.totalCount - pool.idleCount).toBe(0); // none checked out
    } finally {
      await store.close();
      // It hung here for good: the connections the warm-up got were never released.
      await Promise.race([pool.end(), new Promise((_, reject) => setTimeout(() => reject(new Error('pool.end() did not finish')), 5_000))]);
    }
  });
});
