// Bringing the read model up to date in tests. readAll holds an event back while any older
// write transaction anywhere on the server is open (another test file's, say), so one
// catch-up may stop short: repeat until every projection has applied every event it follows.
// Counted, never compared by position: commit order is not numeric order of global positions.
import type pg from 'pg';
import { projections } from '../../projections/index.ts';
import type { EventStore } from '../../src/eventstore/event-store.ts';
import { catchUpReadModel } from '../../src/readmodel/group-follow.ts';

/** Projections whose checkpoint has applied fewer events than the store holds for them. */
async function projectionsBehind(pool: pg.Pool): Promise<string[]> {
  const behind: string[] = [];
  for (const p of projections) {
    const r = await pool.query<{ behind: boolean }>(
      // Events retention removed were applied too: they count (baton_archived_streams).
      `SELECT (SELECT count(*) FROM baton_events WHERE stream_id LIKE ANY ($2::text[]))
              + (SELECT coalesce(sum(events), 0) FROM baton_archived_streams WHERE stream_id LIKE ANY ($2::text[]))
              > (SELECT events_applied FROM baton_projection_checkpoints WHERE projection = $1) AS behind`,
      [p.name, p.streamPrefixes.map((prefix) => `${prefix}%`)],
    );
    if (r.rows[0]!.behind) behind.push(p.name);
  }
  return behind;
}

/** Catch up until every projection has applied all the events stored so far (bounded: 10 s). */
export async function catchUpFully(pool: pg.Pool, store: EventStore): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    await catchUpReadModel({ pool, store });
    const behind = await projectionsBehind(pool);
    if (behind.length === 0) return;
    if (Date.now() > deadline) throw new Error(`projections still behind the store after 10 s: ${behind.join(', ')}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
