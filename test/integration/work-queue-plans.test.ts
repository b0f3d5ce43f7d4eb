// The Postgres work queue's claim, ack and release read the rows they name through the primary key,
// whatever plan the statements got while the queue was nearly empty. The queue churns (every message
// is inserted, updated by its claim and deleted by its ack) and only vacuum clears the dead rows, so a
// scan of the table costs what the queue has ever carried: in a 60,000-execution `baton bench` the
// ack's generic plan was a hash join over a seq scan, 223 µs per message against 9 at 20,000.
// Counts sequential scans (pg_stat), never time. Also: claims, acks and publishes do not wait for
// their WAL flush, and a publish wakes the consumers of other processes itself.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLAIM_SQL, DELETE_SQL, PUBLISH_SQL, RELEASE_SQL } from '../../src/transport/postgres/queue-sql.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';
import { flushedStat } from '../support/pg-stats.ts';

describe('work queue statements as the queue churns', () => {
  let db: TestDatabase;
  let client: pg.Client;
  beforeAll(async () => {
    db = await createTestDatabase();
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
  });
  afterAll(async () => {
    await client?.end();
    await db?.drop();
  });

  // Named as consume.ts names them: after five runs Postgres may keep one generic plan per connection.
  const publish = (ids: string[], worker: string) =>
    client.query({ name: 'publish', text: PUBLISH_SQL, values: [ids, ids.map(() => worker), ids.map(() => 'node'), JSON.stringify(ids.map(() => ({}))), 'baton_work_test', 'publisher-1'] });
  const claim = async (worker: string, limit: number) =>
    (await client.query<{ message_id: string | null; delivery_count: number | null }>({ name: 'claim', text: CLAIM_SQL, values: [worker, limit, 5, 30_000] })).rows.filter((r) => r.message_id !== null);
  const ack = (rows: { message_id: string | null; delivery_count: number | null }[]) =>
    client.query({ name: 'ack', text: DELETE_SQL, values: [rows.map((r) => r.message_id), rows.map((r) => r.delivery_count)] });
  const release = (rows: { message_id: string | null; delivery_count: number | null }[]) =>
    client.query({ name: 'release', text: RELEASE_SQL, values: [rows.map((r) => r.message_id), rows.map((r) => r.delivery_count)] });
  const seqScans = () => flushedStat(client, db.pool, `SELECT seq_scan AS n FROM pg_stat_user_tables WHERE schemaname = 'public' AND relname = 'baton_work_queue'`);

  it('claims, acks and releases by key once the queue has carried many messages', async () => {
    // Many rounds on a small queue (a few pages, as under a light load): each statement has run often
    // enough for a generic plan, and on a table this small a seq scan looks cheapest.
    await client.query(`INSERT INTO baton_work_queue (message_id, worker_id, runtime, payload) SELECT gen_random_uuid(), 'busy', 'node', '{}' FROM generate_series(1, 300)`);
    for (let round = 0; round < 12; round++) {
      await publish([randomUUID(), randomUUID()], 'w');
      const claimed = await claim('w', 2);
      expect(claimed).toHaveLength(2);
      if (round % 2) await ack(claimed);
      else {
        await release(claimed);
        await ack(await claim('w', 2));
      }
    }
    // 50,000 messages carried since (dead rows now), and 5,000 waiting for other workers.
    await client.query(`INSERT INTO baton_work_queue (message_id, worker_id, runtime, payload) SELECT gen_random_uuid(), 'other', 'node', '{}' FROM generate_series(1, 50000)`);
    await client.query(`DELETE FROM baton_work_queue`);
    await client.query(`INSERT INTO baton_work_queue (message_id, worker_id, runtime, payload) SELECT gen_random_uuid(), 'other-' || (g % 50), 'node', '{}' FROM generate_series(1, 5000) g`);
    const before = await seqScans();
    for (let round = 0; round < 4; round++) {
      await publish([randomUUID(), randomUUID()], 'w');
      const claimed = await claim('w', 2);
      expect(claimed).toHaveLength(2);
      await release(claimed);
      const again = await claim('w', 2);
      expect(again).toHaveLength(2);
      await ack(again);
    }
    expect(await seqScans()).toBe(before);
    expect((await client.query(`SELECT count(*)::int AS n FROM baton_work_queue WHERE worker_id = 'w'`)).rows[0].n).toBe(0);
  });

  it('claims, acks and publishes commit without waiting for their WAL flush; a publish notifies', async () => {
    // Losing a claim or an ack to a crash only redelivers (the event store fences the second
    // delivery); a lost publish is published again by the executor, whose handoff was flushed
    // before it. Each statement runs in a transaction here, so the setting it leaves for its
    // commit can be read before rolling back.
    const commitMode = async (statement: () => Promise<unknown>) => {
      await client.query('BEGIN');
      try {
        await statement();
        return (await client.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]!.synchronous_commit;
      } finally {
        await client.query('ROLLBACK');
      }
    };
    // Whatever the server's default (the tests' embedded Postgres runs with it off).
    await client.query('SET synchronous_commit = on');
    const ids = [randomUUID(), randomUUID()];
    expect(await commitMode(() => publish(ids, 'durability'))).toBe('off');
    const listener = new pg.Client({ connectionString: db.url });
    await listener.connect();
    try {
      await listener.query('LISTEN baton_work_test');
      const heard = new Promise<string | undefined>((resolve) => listener.once('notification', (n) => resolve(n.payload)));
      await publish(ids, 'durability');
      expect(await heard).toBe('publisher-1');
    } finally {
      await listener.end();
    }
    expect(await commitMode(async () => expect(await claim('durability', 2)).toHaveLength(2))).toBe('off');
    const claimed = await claim('durability', 2); // the claim above was rolled back
    expect(claimed).toHaveLength(2);
    expect(await commitMode(() => ack(claimed))).toBe('off');
    await ack(claimed);
    // Only for their own transactions: the connection's next statement waits for its flush again.
    expect((await client.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]!.synchronous_commit).toBe('on');
    expect((await client.query(`SELECT count(*)::int AS n FROM baton_work_queue WHERE worker_id = 'durability'`)).rows[0].n).toBe(0);
  });
});
