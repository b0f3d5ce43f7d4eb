// Retention's reads and records in Postgres: which executions and workflows the read model says
// finished before the cutoff (candidates only: each is checked again against its stream), whether
// every projection has applied a stream's last event, and the table of archived streams.
import type pg from 'pg';
import { finalStatuses } from '../../actors/execution.machine.ts';
import { projections, READ_MODEL_SCHEMA } from '../../projections/index.ts';
import { qualified } from '../../projections/rows.ts';

const FINAL = [...finalStatuses];
const executions = qualified(READ_MODEL_SCHEMA, 'executions');

export interface ExecutionCandidate {
  executionId: string;
  finishedAt: Date;
}

/** Finished executions outside any workflow, finished before `cutoff`, oldest first, after `after`. */
export async function executionCandidates(pool: pg.Pool, cutoff: Date, limit: number, after?: ExecutionCandidate): Promise<ExecutionCandidate[]> {
  const r = await pool.query<{ execution_id: string; finished_at: Date }>(
    `SELECT execution_id, finished_at FROM ${executions}
     WHERE status = ANY($1::text[]) AND workflow_id IS NULL AND finished_at < $2
       AND ($4::timestamptz IS NULL OR (finished_at, execution_id) > ($4, $5::uuid))
     ORDER BY finished_at, execution_id LIMIT $3`,
    [FINAL, cutoff, limit, after?.finishedAt ?? null, after?.executionId ?? null],
  );
  return r.rows.map((row) => ({ executionId: row.execution_id, finishedAt: row.finished_at }));
}

/** Workflows whose every step the read model knows is final, the last finished before `cutoff`, by id after `after`. */
export async function workflowCandidates(pool: pg.Pool, cutoff: Date, limit: number, after?: string): Promise<string[]> {
  const r = await pool.query<{ workflow_id: string }>(
    `SELECT workflow_id FROM ${executions} WHERE workflow_id IS NOT NULL AND ($4::text IS NULL OR workflow_id > $4)
     GROUP BY workflow_id HAVING bool_and(status = ANY($1::text[])) AND max(finished_at) < $2
     ORDER BY workflow_id LIMIT $3`,
    [FINAL, cutoff, limit, after ?? null],
  );
  return r.rows.map((row) => row.workflow_id);
}

export async function countCandidates(pool: pg.Pool, cutoff: Date): Promise<number> {
  const r = await pool.query<{ n: string }>(
    `SELECT (SELECT count(*) FROM ${executions} WHERE status = ANY($1::text[]) AND workflow_id IS NULL AND finished_at < $2)
          + (SELECT count(*) FROM (SELECT 1 FROM ${executions} WHERE workflow_id IS NOT NULL GROUP BY workflow_id
               HAVING bool_and(status = ANY($1::text[])) AND max(finished_at) < $2) w) AS n`,
    [FINAL, cutoff],
  );
  return Number(r.rows[0]!.n);
}

/** The step executions the read model knows for a workflow. */
export async function workflowExecutionIds(pool: pg.Pool, workflowId: string): Promise<string[]> {
  const r = await pool.query<{ execution_id: string }>(`SELECT execution_id FROM ${executions} WHERE workflow_id = $1`, [workflowId]);
  return r.rows.map((row) => row.execution_id);
}

/**
 * The projections that have not yet applied the event at `position` (none: the read model has
 * everything these streams added, so retention can take it back out exactly). Postgres delivers
 * in (transaction id, position) order (src/eventstore/postgres.ts), so that is the comparison;
 * EventStoreDB's positions are its log's, in delivery order themselves.
 */
export async function projectionsBehind(pool: pg.Pool, position: bigint, postgresStore: boolean): Promise<string[]> {
  const names = projections.filter((p) => p.streamPrefixes.some((prefix) => 'execution-'.startsWith(prefix))).map((p) => p.name);
  if (!postgresStore) {
    const r = await pool.query<{ projection: string }>('SELECT projection FROM baton_projection_checkpoints WHERE projection = ANY($1::text[]) AND position < $2', [names, position.toString()]);
    return r.rows.map((row) => row.projection);
  }
  const r = await pool.query<{ projection: string }>(
    `WITH e AS (SELECT transaction_id, global_position FROM baton_events WHERE global_position = $2)
     SELECT p.projection FROM baton_projection_checkpoints p
     WHERE p.projection = ANY($1::text[]) AND NOT EXISTS (
       SELECT 1 FROM e, (SELECT transaction_id, global_position FROM baton_events WHERE global_position = p.position
                         UNION ALL SELECT transaction_id, global_position FROM baton_removed_positions WHERE global_position = p.position) c
       WHERE (e.transaction_id, e.global_position) <= (c.transaction_id, c.global_position))`,
    [names, position.toString()],
  );
  return r.rows.map((row) => row.projection);
}

export interface ArchivedStream {
  streamId: string;
  events: number;
  lastEventAt: Date;
  archivedAt: Date;
  archive: string;
}

export async function recordArchived(client: pg.ClientBase, rows: readonly Omit<ArchivedStream, 'archivedAt'>[], pendingDelete: boolean): Promise<void> {
  if (rows.length === 0) return;
  await client.query(
    `INSERT INTO baton_archived_streams (stream_id, events, last_event_at, archive, pending_delete)
     SELECT * FROM unnest($1::text[], $2::bigint[], $3::timestamptz[], $4::text[]) AS r, (SELECT $5::boolean) p
     ON CONFLICT (stream_id) DO UPDATE SET events = excluded.events, last_event_at = excluded.last_event_at,
       archive = excluded.archive, archived_at = now(), pending_delete = excluded.pending_delete`,
    [rows.map((r) => r.streamId), rows.map((r) => r.events), rows.map((r) => r.lastEventAt), rows.map((r) => r.archive), pendingDelete],
  );
}

export async function archivedStream(pool: pg.Pool, streamId: string): Promise<ArchivedStream | undefined> {
  const r = await pool.query<{ stream_id: string; events: string; last_event_at: Date; archived_at: Date; archive: string }>(
    'SELECT stream_id, events, last_event_at, archived_at, archive FROM baton_archived_streams WHERE stream_id = $1',
    [streamId],
  );
  const row = r.rows[0];
  return row && { streamId: row.stream_id, events: Number(row.events), lastEventAt: row.last_event_at, archivedAt: row.archived_at, archive: row.archive };
}

/** Streams recorded as archived whose deletion is still to do, with the events each had when archived. */
export async function pendingDeletes(pool: pg.Pool, limit: number): Promise<{ streamId: string; events: number }[]> {
  const r = await pool.query<{ stream_id: string; events: string }>('SELECT stream_id, events FROM baton_archived_streams WHERE pending_delete ORDER BY stream_id LIMIT $1', [limit]);
  return r.rows.map((row) => ({ streamId: row.stream_id, events: Number(row.events) }));
}

export async function deleteDone(pool: pg.Pool, streamIds: readonly string[]): Promise<void> {
  await pool.query('UPDATE baton_archived_streams SET pending_delete = false WHERE stream_id = ANY($1::text[])', [[...streamIds]]);
}

/**
 * Every stream retention archived, by id: for readers of a store whose deleted streams stay in
 * readAll (EventStoreDB until a scavenge), which must pass over them as Postgres readers never see them.
 */
export async function archivedStreamIds(pool: pg.Pool): Promise<Set<string>> {
  const r = await pool.query<{ stream_id: string }>('SELECT stream_id FROM baton_archived_streams');
  return new Set(r.rows.map((row) => row.stream_id));
}
