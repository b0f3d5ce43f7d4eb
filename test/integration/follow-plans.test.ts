// The follow queries' plans do not depend on history: with their plans cached while the table
// was nearly empty (a prepared statement switches to a generic plan after five runs; the stream
// scan's function plans once per connection), they still walk the (transaction_id,
// global_position) index once the table holds 100,000 rows, reading only the entries they return.
// The old separate heldBack statement's cached plan was a sequential scan (8 ms at 100,000 rows
// here). readAll, which goes through the same scan, reads each entry of that index about once in
// a catch-up. Asserts table and index reads, never time (the times are printed for the record).
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { START, type StoredEvent, type SubscriptionOrder } from '../../src/eventstore/event-store.ts';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { newEvent } from '../contract/event-store.contract.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';
import { flushedStat } from '../support/pg-stats.ts';

const ROWS = 100_000;

describe('follow query plans at 0 and 100,000 events', () => {
  let db: TestDatabase;
  let pool: pg.Pool;
  let store: PostgresEventStore;
  beforeAll(async () => {
    db = await createTestDatabase();
    // Two connections: the store's LISTEN holds one, every query runs on the other, so the
    // statements it prepared are the ones EXPLAIN looks at.
    pool = new pg.Pool({ connectionString: db.url, max: 2, idleTimeoutMillis: 0 });
    store = createPostgresEventStore(pool, { groupCommit: false });
  });
  afterAll(async () => {
    await store?.close();
    await pool?.end();
    await db?.drop();
  });

  /** Subscribe and append one event at a time, so the subscription reads once per event. */
  async function warm(order: SubscriptionOrder, prefix: string, reads: number) {
    const ac = new AbortController();
    const seen: StoredEvent[] = [];
    const timer = setTimeout(() => ac.abort(), 20_000);
    const s = `${prefix}-${randomUUID()}`;
    const consumer = (async () => {
      for await (const e of store.subscribe({ after: START, streamPrefixes: [prefix], signal: ac.signal, order })) {
        seen.push(e);
        if (seen.length === reads) return;
      }
    })();
    for (let i = 0; i < reads; i++) {
      await store.append(s, [newEvent()], { expectedRevision: i === 0 ? 'no_stream' : BigInt(i - 1) });
      while (seen.length <= i && !ac.signal.aborted) await new Promise((r) => setTimeout(r, 5));
    }
    await consumer;
    clearTimeout(timer);
    ac.abort();
    expect(seen.length).toBe(reads);
  }

  it('keeps walking the commit-order index, whatever the plans were cached on', { timeout: 120_000 }, async () => {
    await warm('global', 'plansg', 8);
    await warm('stream', 'planss', 8);
    await pool.query(
      `INSERT INTO baton_events (event_id, stream_id, revision, type, data, metadata)
       SELECT gen_random_uuid(), 'history-' || (g / 6), g % 6, 'Something', '{"n":1}', '{}' FROM generate_series(0, $1 - 1) g`,
      [ROWS],
    );
    const client = await pool.connect();
    try {
      // Statistics that know the 100,000 rows make every cached plan be made again (as autovacuum's
      // ANALYZE would), now from those statistics: the stream scan's generic plan was then a
      // sequential scan for its pending transactions (`= ANY` of a list of unknown length).
      await client.query('ANALYZE baton_events');
      const prepared = await client.query<{ name: string; generic_plans: string }>(
        "SELECT name, generic_plans FROM pg_prepared_statements WHERE name IN ('baton_scan_all', 'baton_scan_committed')",
      );
      // Proof that the plans under test were made while the table was small: the global scan's
      // generic plan is cached (prepared statements switch after five runs); the stream scan is a
      // function, which makes its plan on its first run on this connection.
      expect(prepared.rows.map((r) => r.name).sort()).toEqual(['baton_scan_all', 'baton_scan_committed']);
      expect(Number(prepared.rows.find((r) => r.name === 'baton_scan_all')!.generic_plans)).toBeGreaterThan(0);
      const end = (await client.query<{ x: string; p: string }>('SELECT max(transaction_id)::text AS x, max(global_position)::text AS p FROM baton_events')).rows[0]!;
      const reads = async () => ({
        seq: await flushedStat(client, db.pool, `SELECT seq_scan AS n FROM pg_stat_user_tables WHERE relname = 'baton_events'`),
        index: await flushedStat(client, db.pool, `SELECT idx_tup_read AS n FROM pg_stat_user_indexes WHERE indexrelname = 'baton_events_commit_order'`),
      });
      // Each statement as prepared on this connection by pg-follow.ts; at most this many index entries read.
      const scans: [string, string, number][] = [
        // The global scan also reads the newest row (is anything held back after the scan's end?).
        ['global scan (cursor at the end)', `baton_scan_all('${end.x}', ${end.p}, 500, '{plans%}')`, 20],
        ['stream scan (cursor at the end, 2 pending)', `baton_scan_committed('${end.x}', ${end.p}, 500, '{plans%}', '{1,2}', '{}')`, 20],
        ['global scan (from the start)', `baton_scan_all('0', 0, 500, '{plans%}')`, 600],
        ['stream scan (from the start)', `baton_scan_committed('0', 0, 500, '{plans%}', '{}', '{}')`, 600],
      ];
      for (const [what, execute, most] of scans) {
        const before = await reads();
        const t0 = performance.now();
        await client.query(`EXECUTE ${execute}`);
        const ms = performance.now() - t0;
        const after = await reads();
        console.log(`[follow plans, ${ROWS.toLocaleString('en')} rows] ${what}: ${ms.toFixed(2)} ms, ${after.index - before.index} index entries read`);
        // A sequential scan reads the whole table; a bitmap scan, every index entry after the cursor.
        expect(after.seq - before.seq, what).toBe(0);
        expect(after.index - before.index, what).toBeLessThanOrEqual(most);
      }
    } finally {
      client.release();
    }
  });

  it('readAll reads each batch through the index after a bulk append its statistics never saw', { timeout: 120_000 }, async () => {
    // The table analyzed while small, then 60,000 events in transactions of 600 (as a bulk submit
    // or an import writes them), and no ANALYZE since: planned per call, readAll became a bitmap
    // scan of every row after the cursor and a sort, so a catch-up read the table ~n/500 times.
    const fresh = await createTestDatabase();
    // One connection: every read under test runs on it, and its counters are flushed before they are read.
    const freshPool = new pg.Pool({ connectionString: fresh.url, max: 1 });
    const freshStore = createPostgresEventStore(freshPool);
    try {
      await freshPool.query('ALTER TABLE baton_events SET (autovacuum_enabled = false)');
      await freshPool.query('ANALYZE baton_events');
      for (let b = 0; b < 100; b++) {
        await freshPool.query(
          `INSERT INTO baton_events (event_id, stream_id, revision, type, data, metadata)
           SELECT gen_random_uuid(), 'bulk-' || (g / 6), g % 6, 'Something', '{"n":1}', '{}' FROM generate_series($1::int, $2::int) g`,
          [b * 600, b * 600 + 599],
        );
      }
      const indexReads = () => flushedStat(freshPool, fresh.pool, `SELECT idx_tup_read AS n FROM pg_stat_user_indexes WHERE indexrelname = 'baton_events_commit_order'`);
      // Another test file's transaction open on the server would hold readAll back (the horizon).
      await freshStore.settled();
      const before = await indexReads();
      let after = START;
      let read = 0;
      for (;;) {
        const batch = await freshStore.readAll({ after, limit: 500, streamPrefixes: ['bulk-'] });
        if (batch.length === 0) break;
        read += batch.length;
        after = batch[batch.length - 1]!.globalPosition;
      }
      expect(read).toBe(60_000);
      // An index walk reads each entry about once (120 batches); the bitmap scans read ~3.6 million.
      expect(await indexReads()).toBeLessThan(before + 2 * 60_000);
      // A narrow read (a prefix no event has) passes the 60,000 in a few statements, not one per event.
      let statements = 0;
      const counted = new Proxy(freshPool, { get: (pool, key) => (key === 'query' ? (...a: unknown[]) => (statements++, (pool.query as (...x: unknown[]) => unknown)(...a)) : Reflect.get(pool, key)) });
      const narrow = createPostgresEventStore(counted);
      try {
        expect(await narrow.readAll({ after: START, limit: 1, streamPrefixes: ['nothing-'] })).toEqual([]);
        expect(statements).toBeLessThanOrEqual(10);
      } finally {
        await narrow.close();
      }
    } finally {
      await freshStore.close();
      await freshPool.end();
      await fresh.drop();
    }
  });
});
