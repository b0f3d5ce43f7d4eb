// Waiting in tests for executions to complete, by what the store holds: bounded, polling.
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';

/** Poll until every id has its ExecutionCompleted stored (at most `ms`), calling `sample` on each round. */
export async function untilCompleted(pool: pg.Pool, ids: readonly string[], ms: number, sample?: () => Promise<void>): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    await sample?.();
    const r = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM baton_events WHERE type = 'ExecutionCompleted' AND stream_id = ANY($1::text[])`,
      [ids.map((id) => `${EXECUTION_STREAM_PREFIX}${id}`)],
    );
    if (r.rows[0]!.n === ids.length) return;
    if (Date.now() > deadline) throw new Error(`only ${r.rows[0]!.n} of ${ids.length} executions completed within ${ms} ms`);
    await sleep(20);
  }
}
