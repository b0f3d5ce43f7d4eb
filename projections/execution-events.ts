// The `execution_events` projection: the timeline of every execution, one row per event.
// The fold is a plain mapping; (execution, revision) is the key, so a replayed event changes nothing.
// With the Postgres event store in the read model's database it is a view of the events table
// (storeView) rather than a copy.
import pg from 'pg';
import { EXECUTION_STREAM_PREFIX, executionIdOfStream } from '../schemas/events.ts';
import type { StoredEvent } from '../src/eventstore/event-store.ts';
import type { BatchMemory, BatchResult, EventSource, Projection } from './projection.ts';
import { insertNewRows, insertRowsIgnoringDuplicates, qualified, relationKind, snakeCase } from './rows.ts';

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
  storeView: timelineOfEvents,
  async apply(client: pg.ClientBase, schema: string, events: readonly StoredEvent[], source?: EventSource, memory?: BatchMemory): Promise<BatchResult> {
    const table = qualified(schema, 'execution_events');
    if (!source) await insertRowsIgnoringDuplicates(client, table, EXECUTION_EVENT_COLUMNS, events.map(executionEventRow).filter((r) => r !== undefined));
    // A view of the events (storeView) has them all already; a table the projector has not yet
    // replaced by the view (src/readmodel/store-views.ts) is copied into from them.
    else if (!(await isView(client, schema, memory))) await copyFromEventsTable(client, table, source, events);
    return { changedExecutions: [], refused: [] };
  },
};

/**
 * Whether the timeline in `schema` is the view, asked once per follow (its memory keeps the
 * answer; a table another process turned into the view meanwhile fails one batch, which ends the
 * follow and its memory, and the next asks again).
 */
async function isView(client: pg.ClientBase, schema: string, memory: BatchMemory | undefined): Promise<boolean> {
  const known = memory?.get(schema) as boolean | undefined;
  if (known !== undefined) return known;
  const view = (await relationKind(client, schema, 'execution_events')) === 'view';
  memory?.set(schema, view);
  return view;
}

/**
 * The timeline rows of a batch, made from the events table in SQL (timelineOfEvents): the events'
 * data and metadata never travel back and forth as JSON. In a 10,000-execution `baton bench` the
 * JSON way sent 26 MB to Postgres (half of all bytes the process sent), which parsed it again.
 */
async function copyFromEventsTable(client: pg.ClientBase, table: string, source: EventSource, events: readonly StoredEvent[]): Promise<void> {
  const positions = events.filter((e) => executionIdOfStream(e.streamId) !== undefined).map((e) => e.globalPosition.toString());
  if (positions.length === 0) return;
  const copy = (onConflict: string) =>
    client.query(
      `INSERT INTO ${table} (${EXECUTION_EVENT_COLUMNS.map((c) => pg.escapeIdentifier(c)).join(', ')})
       SELECT ${EXECUTION_EVENT_COLUMNS.map((c) => `t.${pg.escapeIdentifier(c)}`).join(', ')} FROM unnest($1::bigint[]) AS k(global_position)
         -- One index lookup per event (OFFSET 0 keeps the subquery apart, so the planner cannot make it
         -- a hash join): as a join, whenever a batch was a few percent of the table or of what its
         -- statistics said it held, Postgres read all of baton_events per batch (45 ms at 40,000 events).
         CROSS JOIN LATERAL (SELECT * FROM (${timelineOfEvents(source.eventsTable)}) t WHERE t.global_position = k.global_position OFFSET 0) t
       ${onConflict}`,
      [positions],
    );
  // Events come once (the checkpoint moves in the same transaction), so a plain INSERT; a replayed one falls back.
  await insertNewRows(client, () => copy(''), () => copy('ON CONFLICT DO NOTHING'));
}

/** A metadata field of `e` as text when it is a JSON string, else NULL. */
const text = (field: string) => `CASE WHEN jsonb_typeof(e.metadata->'${field}') = 'string' THEN e.metadata->>'${field}' END`;

/**
 * executionEventRow in SQL: the timeline straight from the events table, when the events share
 * the read model's database. Copying each event into a table of its own (heap, key, WAL) was ~7%
 * of a `baton bench` run's CPU (20,000 executions, four pairs with and without: 3,429–3,733
 * against 3,569–4,043 executions/s). Readers name stream_id as well as execution_id (see
 * src/api/read-model-queries.ts): the view is then read through the store's (stream_id, revision)
 * index, while the table form has its own key.
 */
function timelineOfEvents(eventsTable: string): string {
  return `SELECT e.event_id, substr(e.stream_id, ${EXECUTION_STREAM_PREFIX.length + 1})::uuid AS execution_id, e.stream_id, e.revision, e.global_position, e.type,
       ${text('by')} AS by, e.data, e.metadata,
       -- Milliseconds, as the JSON way has them (a JS Date holds no more).
       date_trunc('milliseconds', (${text('occurredAt')})::timestamptz) AS occurred_at,
       date_trunc('milliseconds', e.recorded_at) AS recorded_at
  FROM ${eventsTable} e
 WHERE e.stream_id LIKE '${EXECUTION_STREAM_PREFIX}%'`;
}
