// baton_streams pages keep room for the next versions of their rows
// (migrations/0006_streams_fillfactor.sql): every append updates its stream's row, and a new
// version that fits on the old one's page is a HOT update, with no new entry in baton_streams_pkey.
// Measured in a 20,000-execution `baton bench` on a quiet server: 64% of those updates HOT with
// full pages, 97% with half-full ones.
//
// The HOT share itself is not asserted here: Postgres prunes a page's dead versions only once no
// snapshot on the server can see them, so under a busy parallel test run it fell to ~50% even with
// the room (CI, 2026-11-25). What the migration decides, and what is asserted, is the room: stream
// rows as appends create them take twice the pages that a table filled to the brim takes.
import pg from 'pg';
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { useTestDatabase } from '../support/test-db.ts';

const db = useTestDatabase();

const pagesOf = async (client: pg.PoolClient, table: string): Promise<number> => {
  const r = await client.query<{ pages: string }>(
    `SELECT count(DISTINCT (ctid::text::point)[0]) AS pages FROM ${client.escapeIdentifier(table)}`,
  );
  return Number(r.rows[0]!.pages);
};

describe('baton_streams rows under appends', () => {
  it('leave half of each page free for the versions that later appends write', { timeout: 60_000 }, async () => {
    const pool = new pg.Pool({ connectionString: db().url, max: 1 });
    const store = createPostgresEventStore(pool, { groupCommit: false });
    const client = await db().pool.connect();
    try {
      const streams = Array.from({ length: 600 }, () => `room-${randomUUID()}`);
      const event = () => ({ eventId: randomUUID(), type: 'Probe', data: {}, metadata: {} });
      const outcomes = await store.appendMany(
        streams.map((streamId) => ({ streamId, events: [event()], expectedRevision: 'no_stream' as const })),
      );
      expect(outcomes.every((o) => o.ok)).toBe(true);

      // The same rows in a twin table at Postgres's default fillfactor (100).
      await client.query('CREATE TEMP TABLE streams_full_pages (LIKE baton_streams)');
      await client.query('INSERT INTO streams_full_pages SELECT * FROM baton_streams');
      const full = await pagesOf(client, 'streams_full_pages');
      const ours = await pagesOf(client, 'baton_streams');
      expect(full).toBeGreaterThanOrEqual(3); // enough pages for the ratio to mean something
      expect(ours / full).toBeGreaterThan(1.8);
    } finally {
      client.release();
      await store.close();
      await pool.end();
    }
  });
});
