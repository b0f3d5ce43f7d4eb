// A read model that checks itself: re-fold a sample of recently changed executions from their
// streams and compare with their rows. Any difference is drift (a skipped or doubled event, a
// bug in a fold, a hand edit), counted on /metrics and logged with the execution id.
import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';
import { readModelSchemaOf } from '../db/db-schema.ts';
import { executionRowFromDb } from '../../projections/executions.projection.ts';
import { foldExecutionStream } from '../../projections/executions.ts';
import { executionStreamId } from '../../schemas/events.ts';
import type { EventStore } from '../eventstore/event-store.ts';

export interface DriftSample {
  checked: number;
  drifted: { executionId: string; fields: string[] }[];
}

export async function sampleExecutionDrift(o: { pool: pg.Pool; store: EventStore; sampleSize: number }): Promise<DriftSample> {
  const r = await o.pool.query(
    `SELECT * FROM ${pg.escapeIdentifier(readModelSchemaOf(o.pool))}.executions ORDER BY updated_at DESC LIMIT $1`,
    [o.sampleSize],
  );
  const drifted: DriftSample['drifted'] = [];
  for (const dbRow of r.rows) {
    const row = executionRowFromDb(dbRow);
    // Only up to the row's revision: the stream may have moved on since the row was read.
    const events = await o.store.readStream(executionStreamId(row.executionId), { limit: row.revision + 1 });
    const refolded = foldExecutionStream(events);
    const fields = refolded
      ? (Object.keys(row) as (keyof typeof row)[]).filter((k) => !isDeepStrictEqual(row[k], refolded[k]))
      : ['(stream has no events)'];
    if (fields.length > 0) drifted.push({ executionId: row.executionId, fields });
  }
  return { checked: r.rows.length, drifted };
}
