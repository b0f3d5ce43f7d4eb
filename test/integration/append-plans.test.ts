// appendMany's cost does not depend on history: after many appends while the tables were tiny,
// appending to a few of 50,000 streams reads them (and looks its event ids up) through the
// indexes, not whole tables. As a prepared statement its generic plan, made on those first calls,
// scanned every row of baton_events or baton_streams until the next ANALYZE (222 ms per
// 500-stream batch in `baton bench submit`, 33 ms now). Counts sequential scans (pg_stat), never time.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { newEvent } from '../contract/event-store.contract.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

describe('appendMany plans at a few and at 50,000 streams', () => {
  let db: TestDatabase;
  let pool: pg.Pool;
  let store: PostgresEventStore;
  beforeAll(async () => {
    db = await createTestDatabase();
    // One connection (nothing here subscribes): every append runs on it, and so does the flush of its counters.
    pool = new pg.Pool({ connectionString: db.url, max: 1, idleTimeoutMillis: 0 });
    store = createPostgresEventStore(pool);
  });
  afterAll(async () => {
    await store?.close();
    await pool?.end();
    await db?.drop();
  });

  /** Sequential scans of the events and streams tables so far. */
  const tableScans = async () => {
    // A backend sends its counters at most once a second: make the appending connection send them now.
    await pool.query('SELECT pg_stat_force_next_flush()');
    await db.pool.query('SELECT pg_stat_clear_snapshot()');
    const r = await db.pool.query<{ n: string }>(`SELECT sum(seq_scan) AS n FROM pg_stat_user_tables WHERE relname IN ('baton_events', 'baton_streams')`);
    return Number(r.rows[0]!.n);
  };

  it('reads only the named streams and event ids once the tables are large, whatever ran while they were small', async () => {
    // Many batches of a few streams on the near-empty table: a prepared statement would now hold a generic plan.
    for (let i = 0; i < 12; i++) {
      const results = await store.appendMany(Array.from({ length: 30 }, () => ({ streamId: `plan-${randomUUID()}`, events: [newEvent()], expectedRevision: 'no_stream' as const })));
      expect(results.every((r) => r.ok)).toBe(true);
    }
    const early = Array.from({ length: 4 }, () => `plan-${randomUUID()}`);
    await store.appendMany(early.map((streamId) => ({ streamId, events: [newEvent()], expectedRevision: 'no_stream' as const })));
    // 50,000 streams more with an event each, written directly (no ANALYZE runs in between).
    await db.pool.query(`INSERT INTO baton_streams (stream_id, revision, last_xid) SELECT 'bulk-' || g, 0, pg_current_xact_id() FROM generate_series(1, 50000) g`);
    await db.pool.query(`INSERT INTO baton_events (event_id, stream_id, revision, type, data, metadata) SELECT gen_random_uuid(), 'bulk-' || g, 0, 'Bulk', '{}', '{}' FROM generate_series(1, 50000) g`);
    const before = await tableScans();
    for (let i = 0; i < 5; i++) {
      const results = await store.appendMany(early.map((streamId) => ({ streamId, events: [newEvent()], expectedRevision: BigInt(i) })));
      expect(results.every((r) => r.ok)).toBe(true);
    }
    expect(await tableScans()).toBe(before);
  });
});
