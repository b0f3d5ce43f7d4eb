// The `execution_events` projection: the timeline of every execution, one row per event.
// The fold is a plain mapping; the event id is the key, so a replayed event changes nothing.
import type pg from 'pg';
import { EXECUTION_STREAM_PREFIX, executionIdOfStream } from '../schemas/events.ts';
import type { StoredEvent } from '../src/eventstore/event-store.ts';
import type { BatchResult, Projection } from './projection.ts';
import { insertRowsIgnoringDuplicates, qualified, snakeCase } from './rows.ts';

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
  version: 1,
  streamPrefixes: [EXECUTION_STREAM_PREFIX],
  tables: [{ name: 'execution_events', key: ['event_id'] }],
  ddl: new URL('./execution-events.sql', import.meta.url),
  async apply(client: pg.ClientBase, schema: string, events: readonly StoredEvent[]): Promise<BatchResult> {
    const rows = events.map(executionEventRow).filter((r) => r !== undefined);
    await insertRowsIgnoringDuplicates(client, qualified(schema, 'execution_events'), EXECUTION_EVENT_COLUMNS, rows);
    return { changedExecutions: [], refused: [] };
  },
};
