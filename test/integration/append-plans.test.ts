// appendMany's cost does not depend on history: after many appends while the tables were tiny,
// appending to a few of 50,000 streams reads them (and looks its event ids up) through the
// indexes, not whole tables. As a prepared statement its generic plan, made on those first calls,
// scanned every row of baton_events or baton_streams until the next ANALYZE (222 ms per
// 500-stream batch in `baton bench submit`, 33 ms now). A call finds each of its streams once (not
// once per stream of the call), and batches that queue behind one another see each other's writes.
// The same for the projector's copy of a batch of events into execution_events. Counts scans,
// probes and statements (pg_stat, a counting pool), never time.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { executionEventsProjection } from '../../projections/execution-events.ts';
import { loadExecutionRows } from '../../projections/executions.projection.ts';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';
import { newEvent } from '../contract/event-store.contract.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';
import { flushedStat } from '../support/pg-stats.ts';

describe('hot-path statements read through indexes as history grows (appendMany, the timeline copy)', () => {
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

  /** Sequential scans so far of the named tables (`schema.table`). */
  // Every query that touches the tables under test runs on the tests' one connection, the setup's too.
  const seqScans = (...tables: string[]) =>
    flushedStat(pool, db.pool, `SELECT coalesce(sum(seq_scan), 0) AS n FROM pg_stat_user_tables WHERE schemaname || '.' || relname = ANY($1::text[])`, [tables]);
  const tableScans = () => seqScans('public.baton_events', 'public.baton_streams');
  /** Index entries read so far from the event store's tables: a plan can read a whole index too. */
  const indexReads = () =>
    flushedStat(pool, db.pool, `SELECT coalesce(sum(idx_tup_read), 0) AS n FROM pg_stat_user_indexes WHERE schemaname = 'public' AND relname IN ('baton_events', 'baton_streams')`);

  it('reads only the named streams and event ids once the tables are large, whatever ran while they were small', async () => {
    // Many batches of a few streams on the near-empty table: a prepared statement would now hold a generic plan.
    for (let i = 0; i < 12; i++) {
      const results = await store.appendMany(Array.from({ length: 30 }, () => ({ streamId: `plan-${randomUUID()}`, events: [newEvent()], expectedRevision: 'no_stream' as const })));
      expect(results.every((r) => r.ok)).toBe(true);
    }
    const early = Array.from({ length: 4 }, () => `plan-${randomUUID()}`);
    await store.appendMany(early.map((streamId) => ({ streamId, events: [newEvent()], expectedRevision: 'no_stream' as const })));
    // 50,000 streams more with an event each, written directly (no ANALYZE runs in between).
    await pool.query(`INSERT INTO baton_streams (stream_id, revision, last_xid) SELECT 'bulk-' || g, 0, pg_current_xact_id() FROM generate_series(1, 50000) g`);
    await pool.query(`INSERT INTO baton_events (event_id, stream_id, revision, type, data, metadata) SELECT gen_random_uuid(), 'bulk-' || g, 0, 'Bulk', '{}', '{}' FROM generate_series(1, 50000) g`);
    const before = await tableScans();
    const readBefore = await indexReads();
    for (let i = 0; i < 5; i++) {
      const results = await store.appendMany(early.map((streamId) => ({ streamId, events: [newEvent()], expectedRevision: BigInt(i) })));
      expect(results.every((r) => r.ok)).toBe(true);
    }
    expect(await tableScans()).toBe(before);
    // 5 calls of 4 streams and 4 events: a few lookups each, not a pass over the 50,000 (a plan
    // made on the small tables read all of baton_events_event_id_key on every call).
    expect(await indexReads()).toBeLessThan(readBefore + 500);
  });

  it('finds each stream of a call once: probes of baton_streams grow with the streams, not their square', async () => {
    const streams = Array.from({ length: 40 }, () => `probe-${randomUUID()}`);
    const created = await store.appendMany(streams.map((streamId) => ({ streamId, events: [newEvent()], expectedRevision: 'no_stream' as const })));
    expect(created.every((r) => r.ok)).toBe(true);
    const probes = () => flushedStat(pool, db.pool, `SELECT idx_scan AS n FROM pg_stat_user_indexes WHERE indexrelname = 'baton_streams_pkey'`);
    const before = await probes();
    const moved = await store.appendMany(streams.map((streamId) => ({ streamId, events: [newEvent()], expectedRevision: 0n })));
    expect(moved.every((r) => r.ok)).toBe(true);
    const made = (await probes()) - before;
    console.log(`[append plans] 40 streams in one call: ${made} probes of baton_streams_pkey`);
    // Locking the 40 rows looks each up once (40 probes). The update used to find each row again by
    // key, with the call's whole list of ids as a second condition: 860 probes, about n²/2.
    expect(made).toBeLessThanOrEqual(2 * streams.length);
  });

  it('batches that wait for one another see what the other wrote: none of their requests is retried alone', { timeout: 60_000 }, async () => {
    // 8 callers at once, each appending to 12 of the same 30 streams (3 rounds, 10 times over).
    // Taken inside the appending statement, the advisory locks left its snapshot older than the
    // batches it waited for: streams they created looked absent, and ~0.5% of requests went
    // back one by one (each its own statement and commit).
    const shared = new pg.Pool({ connectionString: db.url, max: 10 });
    let alone = 0;
    const counted = new Proxy(shared, {
      get: (p, key) =>
        key === 'query'
          ? (...args: unknown[]) => {
              const name = (args[0] as { name?: string } | undefined)?.name;
              if (name?.startsWith('baton_append_') && name !== 'baton_append_many') alone++;
              return (p.query as (...a: unknown[]) => unknown)(...args);
            }
          : Reflect.get(p, key),
    });
    const racing = createPostgresEventStore(counted, { groupCommit: false });
    let requests = 0;
    try {
      for (let rep = 0; rep < 10; rep++) {
        const streams = Array.from({ length: 30 }, () => `race-${randomUUID()}`);
        const calls = Array.from({ length: 8 }, async (_, caller) => {
          for (let round = 0; round < 3; round++) {
            const mine = [...new Set(Array.from({ length: 12 }, (_, k) => streams[(caller * 7 + round * 5 + k * 2) % 30]!))];
            requests += mine.length;
            // The first round creates what no one has yet ('any'), so batches also wait on creations.
            const out = await racing.appendMany(mine.map((streamId) => ({ streamId, events: [newEvent()], expectedRevision: 'any' as const })));
            expect(out.every((o) => o.ok)).toBe(true);
          }
        });
        await Promise.all(calls);
      }
    } finally {
      await racing.close();
      await shared.end();
    }
    console.log(`[append plans] ${alone} of ${requests} requests of overlapping batches retried alone`);
    expect(alone).toBe(0);
  });

  it('copies a batch of execution events into the timeline by index lookups, whatever the statistics say', async () => {
    // An events table analyzed at 1,000 rows that has since grown to 51,000 (autovacuum's ANALYZE lags
    // growth): a join on the batch's positions read all of it per batch (a hash join over a seq scan:
    // 45 ms per batch at 40,000 events in `baton bench`, growing with history).
    const events = 'plan_events';
    await pool.query(`CREATE TABLE ${events} (LIKE baton_events INCLUDING ALL) WITH (autovacuum_enabled = false)`);
    const fill = (from: number, to: number) =>
      pool.query(`INSERT INTO ${events} (global_position, event_id, stream_id, revision, type, data, metadata, transaction_id) OVERRIDING SYSTEM VALUE
                     SELECT g, gen_random_uuid(), 'execution-' || gen_random_uuid(), 0, 'ExecutionSubmitted', '{}', '{}', pg_current_xact_id() FROM generate_series($1::int, $2::int) g`, [from, to]);
    await fill(1, 1000);
    await pool.query(`ANALYZE ${events}`);
    await fill(1001, 51000);
    const batch = (await pool.query<{ global_position: string; stream_id: string }>(`SELECT global_position, stream_id FROM ${events} WHERE global_position > 49000`)).rows;
    expect(batch).toHaveLength(2000);
    const scans = () => seqScans(`public.${events}`);
    const before = await scans();
    const client = await pool.connect();
    try {
      const stored = batch.map((r) => ({ globalPosition: BigInt(r.global_position), streamId: r.stream_id }) as StoredEvent);
      await client.query('BEGIN'); // as the projector applies: inside its transaction
      await executionEventsProjection.apply(client, 'baton_read', stored, { eventsTable: events });
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect(await scans()).toBe(before);
    expect((await pool.query('SELECT count(*)::int AS n FROM baton_read.execution_events')).rows[0].n).toBe(2000);
  });

  it('loads the executions a projector batch folds by index lookups, whatever the statistics say', async () => {
    // A batch of 2,500 executions out of 5,000: reading the whole table looks cheaper to the planner than
    // 2,500 lookups (it counts each as a random read), so every batch read it all (in `baton bench`,
    // batches of ~200 read tables of up to ~40,000 rows).
    const fill = (n: number) =>
      pool.query(`INSERT INTO baton_read.executions (execution_id, revision, status, action, owner, attempt, max_attempts, retry_pending, requested_at, updated_at, owners)
                     SELECT gen_random_uuid(), 4, 'Completed', 'core.noop', 'executor', 1, 3, false, now(), now(), '{}' FROM generate_series(1, $1::int)`, [n]);
    await fill(5000);
    await pool.query('ANALYZE baton_read.executions');
    const ids = (await pool.query<{ id: string }>('SELECT execution_id AS id FROM baton_read.executions ORDER BY random() LIMIT 2500')).rows.map((r) => r.id);
    const scans = () => seqScans('baton_read.executions');
    const before = await scans();
    const client = await pool.connect();
    try {
      const rows = await loadExecutionRows(client, 'baton_read', [...ids, randomUUID()]);
      expect([...rows.keys()].sort()).toEqual([...ids].sort());
    } finally {
      client.release();
    }
    expect(await scans()).toBe(before);
  });
});
