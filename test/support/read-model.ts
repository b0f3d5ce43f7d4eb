// Bringing the read model up to date in tests. readAll holds an event back while any older
// write transaction anywhere on the server is open (another test file's, say), so one
// catch-up may stop short: repeat until every projection has applied all `events` appended.
import type pg from 'pg';
import type { EventStore } from '../../src/eventstore/event-store.ts';
import { catchUpReadModel } from '../../src/readmodel/projector.ts';

/** Catch up until the timeline holds `events` execution events (bounded: 10 s). */
export async function catchUpUntil(pool: pg.Pool, store: EventStore, events: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    await catchUpReadModel({ pool, store });
    const r = await pool.query<{ n: string }>('SELECT count(*) AS n FROM baton_read.execution_events');
    const have = Number(r.rows[0]!.n);
    if (have >= events) return;
    if (Date.now() > deadline) throw new Error(`read model has ${have} of ${events} events after 10 s`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** How many execution events the store holds (what catchUpUntil should wait for). */
export async function countExecutionEvents(pool: pg.Pool): Promise<number> {
  const r = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM baton_events WHERE stream_id LIKE 'execution-%'`);
  return Number(r.rows[0]!.n);
}
