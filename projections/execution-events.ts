// The `execution_events` projection: the timeline of every execution, one row per event.
// The fold is a plain mapping; (execution, revision) is the key, so a replayed event changes nothing.
import pg from 'pg';
import { EXECUTION_STREAM_PREFIX, executionIdOfStream } from '../schemas/events.ts';
import type { StoredEvent } from '../src/eventstore/event-store.ts';
import type { BatchResult, EventSource, Projection } from './projection.ts';
import { insertNewRows, insertRowsIgnoringDuplicates, qualified, snakeCase } from './rows.ts';

export interface ExecutionEventRow {
  eventId: string;
  executionId: string;
  streamId: string;
  revision: number;
  globalPosition: string;
  type: string;
  by: string | null;
  data: unknown;
  metadata: Record<string, unknown>;
  occurredAt: string | null;
  recordedAt: string;
}

/** The timeline row of a stored execution event; undefined for events of other streams. */
export function executionEventRow(e: StoredEvent): ExecutionEventRow | undefined {
  const executionId = executionIdOfStream(e.streamId);
  if (executionId === undefined) return undefined;
  const by = e.metadata['by'];
  const occurredAt = e.metadata['occurredAt'];
  return {
    eventId: e.eventId,
    executionId,
    streamId: e.streamId,
    revision: Number(e.revision),
    // A string: global positions are bigints and JSON numbers would round past 2^53.
    globalPosition: e.globalPosition.toString(),
    type: e.type,
    by: typeof by === 'string' ? by : null,
    data: e.data,
    metadata: e.metadata,
    occurredAt: typeof occurredAt === 'string' ? new Date(occurredAt).toISOString() : null,
    recordedAt: e.recordedAt.toISOString(),
  };
}

export const EXECUTION_EVENT_COLUMNS = ['eventId', 'executionId', 'streamId', 'revision', 'globalPosition', 'type', 'by', 'data', 'metadata', 'occurredAt', 'recordedAt'].map(snakeCase);

export const executionEventsProjection: Projection = {
  name: 'execution_events',
  // 2: keyed by (execution_id, revision) instead of event_id (execution-events.sql).
  version: 2,
  streamPrefixes: [EXECUTION_STREAM_PREFIX],
  tables: [{ name: 'execution_events', key: ['execution_id', 'revision'] }],
  ddl: new URL('./execution-events.sql', import.meta.url),
  async apply(client: pg.ClientBase, schema: string, events: readonly StoredEvent[], source?: EventSource): Promise<BatchResult> {
    const table = qualified(schema, 'execution_events');
    if (source) await copyFromEventsTable(client, table, source, events);
    else await insertRowsIgnoringDuplicates(client, table, EXECUTION_EVENT_COLUMNS, events.map(executionEventRow).filter((r) => r !== undefined));
    return { changedExecutions: [], refused: [] };
  },
};

/** A metadata field of `e` as text when it is a JSON string, else NULL. */
const text = (field: string) => `CASE WHEN jsonb_typeof(e.metadata->'${field}') = 'string' THEN e.metadata->>'${field}' END`;

/**
 * executionEventRow in SQL, for events that are rows of the same database: the events' data and
 * metadata never travel back and forth as JSON. In a 10,000-execution `baton bench` the JSON way
 * sent 26 MB to Postgres (half of all bytes the process sent), which parsed it again.
 */
async function copyFromEventsTable(client: pg.ClientBase, table: string, source: EventSource, events: readonly StoredEvent[]): Promise<void> {
  const positions: string[] = [];
  const executionIds: string[] = [];
  for (const e of events) {
    const executionId = executionIdOfStream(e.streamId);
    if (executionId === undefined) continue;
    positions.push(e.globalPosition.toString());
    executionIds.push(executionId);
  }
  if (positions.length === 0) return;
  const copy = (onConflict: string) =>
    client.query(
      `INSERT INTO ${table} (${EXECUTION_EVENT_COLUMNS.map((c) => pg.escapeIdentifier(c)).join(', ')})
       SELECT e.event_id, k.execution_id, e.stream_id, e.revision, e.global_position, e.type, ${text('by')},
              e.data, e.metadata,
              -- Milliseconds, as the JSON way has them (a JS Date holds no more).
              date_trunc('milliseconds', (${text('occurredAt')})::timestamptz), date_trunc('milliseconds', e.recorded_at)
         FROM unnest($1::bigint[], $2::uuid[]) AS k(global_position, execution_id)
         -- One index lookup per event (OFFSET 0 keeps the subquery apart, so the planner cannot make it
         -- a hash join): as a join, whenever a batch was a few percent of the table or of what its
         -- statistics said it held, Postgres read all of baton_events per batch (45 ms at 40,000 events).
         CROSS JOIN LATERAL (SELECT * FROM ${source.eventsTable} e WHERE e.global_position = k.global_position OFFSET 0) e
       ${onConflict}`,
      [positions, executionIds],
    );
  // Events come once (the checkpoint moves in the same transaction), so a plain INSERT; a replayed one falls back.
  await insertNewRows(client, () => copy(''), () => copy('ON CONFLICT DO NOTHING'));
}
