// A read model that checks itself: re-fold a sample of recently changed executions from their
// streams and compare with their rows. Any difference is drift (a skipped or doubled event, a
// bug in a fold, a hand edit), counted on /metrics and logged with the execution id.
import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';
import { readModelSchemaOf } from '../db/db-schema.ts';
import { executionRowFromDb } from '../../projections/executions.projection.ts';
import { foldExecutionStream } from '../../projections/executions.ts';
import { qualified, selectRowsByKeys } from '../../projections/rows.ts';
import { executionStreamId } from '../../schemas/events.ts';
import type { EventStore } from '../eventstore/event-store.ts';

export interface DriftSample {
  checked: number;
  drifted: { executionId: string; fields: string[] }[];
}

/**
 * The executions a projector changed last, newest last, at most `size`: what its drift check
 * samples. Kept in the projector rather than read back by `updated_at`, whose index cost every
 * write of every row a B-tree entry (version 8 of the executions projection dropped it).
 */
export class RecentlyChanged {
  readonly #ids = new Set<string>();
  constructor(private readonly size: number) {}

  add(ids: readonly string[]): void {
    for (const id of ids) {
      this.#ids.delete(id); // re-inserted: the Set's order is the order last changed
      this.#ids.add(id);
    }
    for (const id of this.#ids) {
      if (this.#ids.size <= this.size) break;
      this.#ids.delete(id);
    }
  }

  newest(n: number): string[] {
    return [...this.#ids].slice(-n);
  }
}

/**
 * Re-fold `recent` executions (the ids a projector changed last), or, without any, the newest
 * `sampleSize` requested (the executions_requested index), and compare each with its row.
 */
export async function sampleExecutionDrift(o: { pool: pg.Pool; store: EventStore; sampleSize: number; recent?: readonly string[] }): Promise<DriftSample> {
  const table = qualified(readModelSchemaOf(o.pool), 'executions');
  const recent = o.recent?.slice(-o.sampleSize) ?? [];
  const rows =
    recent.length > 0
      ? await selectRowsByKeys(o.pool, table, 'execution_id', 'uuid', recent)
      : (await o.pool.query(`SELECT * FROM ${table} ORDER BY requested_at DESC, execution_id DESC LIMIT $1`, [o.sampleSize])).rows;
  const drifted: DriftSample['drifted'] = [];
  for (const dbRow of rows) {
    const row = executionRowFromDb(dbRow);
    // Only up to the row's revision: the stream may have moved on since the row was read.
    const events = await o.store.readStream(executionStreamId(row.executionId), { limit: row.revision + 1 });
    const refolded = foldExecutionStream(events);
    const fields = refolded
      ? (Object.keys(row) as (keyof typeof row)[]).filter((k) => !isDeepStrictEqual(row[k], refolded[k]))
      : ['(stream has no events)'];
    if (fields.length > 0) drifted.push({ executionId: row.executionId, fields });
  }
  return { checked: rows.length, drifted };
}
