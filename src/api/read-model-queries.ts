// The API's reads of the read model (schema baton_read) and of worker liveness. Every value is a
// bound parameter; the only SQL assembled at run time is a choice among fixed fragments.
// Batch readers take many ids at once: the per-request DataLoaders (loaders.ts) call them.
import pg from 'pg';
import { readModelSchemaOf } from '../db/db-schema.ts';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';
import { EXECUTION_EVENT_COLUMNS } from '../../projections/execution-events.ts';
import { EXECUTION_COLUMNS, actionStatsFromDb, executionRowFromDb } from '../../projections/executions.projection.ts';
import { STALLED_SQL, type ExecutionRow } from '../../projections/executions.ts';
import { percentile, type ActionStatsRow } from '../../projections/action-stats.ts';
import { qualified, fromColumns } from '../../projections/rows.ts';
import { workerRowFromDb, type WorkerRow } from '../../projections/workers.ts';
import type { ExecutionCursor } from './cursor.ts';

const EXECUTIONS = (pool: pg.Pool) => qualified(readModelSchemaOf(pool), 'executions');
const EXECUTION_EVENTS = (pool: pg.Pool) => qualified(readModelSchemaOf(pool), 'execution_events');
/**
 * One execution's timeline rows, by both its keys: the table form is read by execution_id (its
 * key), the view of the events table (projections/execution-events.ts) by stream_id (the store's
 * index), and each key names the same rows. OFFSET 0 where it is used keeps a lookup per key.
 */
const TIMELINE_OF = (id: string) => `execution_id = ${id} AND stream_id = '${EXECUTION_STREAM_PREFIX}' || ${id}::text`;
const WORKERS = (pool: pg.Pool) => qualified(readModelSchemaOf(pool), 'workers');
const ACTION_STATS = (pool: pg.Pool) => qualified(readModelSchemaOf(pool), 'action_stats');
// Unqualified like the liveness store's own queries: it lives wherever the migrations put it.
const LIVENESS = 'baton_worker_liveness';

/** Statuses in which a worker holds an execution. */
export const HELD_STATUSES = ['Scheduled', 'Running'] as const;

// JSON columns whose size only an action or its caller decides: read capped (see cappedColumns).
const EXECUTION_LARGE_COLUMNS = ['input', 'result', 'error', 'last_progress'] as const;
const EVENT_LARGE_COLUMNS = ['data', 'metadata'] as const;
export type ExecutionValueColumn = (typeof EXECUTION_LARGE_COLUMNS)[number];
export type EventValueColumn = (typeof EVENT_LARGE_COLUMNS)[number];

/**
 * An execution row as the API reads it: each large JSON value with its size in bytes (as
 * Postgres writes it out, about its size as compact JSON; null for SQL NULL), and the value
 * itself null when it is larger than the cap the query was given.
 */
export type CappedExecutionRow = ExecutionRow & { inputBytes: number | null; resultBytes: number | null; errorBytes: number | null; lastProgressBytes: number | null };

/**
 * The select list of `columns` in which each of `large` is read only up to `$cap` bytes (else
 * null) and comes with `<column>_bytes`. Large values stay in Postgres until someone asks for
 * one: a page of 100 executions with 100 MB results reads 100 sizes into Node, not 10 GB.
 */
function cappedColumns(columns: readonly string[], large: readonly string[], cap: string): string {
  return columns
    .map((c) => {
      const column = pg.escapeIdentifier(c);
      if (!large.includes(c)) return column;
      const size = `octet_length(${column}::text)`;
      return `CASE WHEN ${size} <= ${cap} THEN ${column} END AS ${column}, ${size} AS ${pg.escapeIdentifier(`${c}_bytes`)}`;
    })
    .join(', ');
}
const EXECUTION_SELECT = (cap: string) => cappedColumns(EXECUTION_COLUMNS, EXECUTION_LARGE_COLUMNS, cap);

export async function findExecutions(pool: pg.Pool, ids: readonly string[], valueCap: number): Promise<CappedExecutionRow[]> {
  if (ids.length === 0) return [];
  const r = await pool.query(`SELECT ${EXECUTION_SELECT('$2')} FROM ${EXECUTIONS(pool)} WHERE execution_id = ANY($1::uuid[])`, [ids, valueCap]);
  return r.rows.map((row) => executionRowFromDb(row) as CappedExecutionRow);
}

/** One large JSON value of each execution (or event, `executionId:revision`), whole: key → value. */
export async function findWholeValues(
  pool: pg.Pool,
  of: { table: 'executions'; column: ExecutionValueColumn } | { table: 'events'; column: EventValueColumn },
  keys: readonly string[],
): Promise<Map<string, unknown>> {
  if (keys.length === 0) return new Map();
  const column = pg.escapeIdentifier(of.column);
  if (of.table === 'executions') {
    const r = await pool.query(`SELECT execution_id::text AS key, ${column} AS value FROM ${EXECUTIONS(pool)} WHERE execution_id = ANY($1::uuid[])`, [keys]);
    return new Map(r.rows.map((row) => [row.key as string, row.value]));
  }
  const pairs = keys.map((k) => k.split(':'));
  const r = await pool.query(
    `SELECT x.id::text || ':' || x.revision AS key, e.value
       FROM unnest($1::uuid[], $2::bigint[]) AS x(id, revision)
       CROSS JOIN LATERAL (
         SELECT ${column} AS value FROM ${EXECUTION_EVENTS(pool)}
          WHERE ${TIMELINE_OF('x.id')} AND revision = x.revision OFFSET 0
       ) e`,
    [pairs.map((p) => p[0]), pairs.map((p) => p[1])],
  );
  return new Map(r.rows.map((row) => [row.key as string, row.value]));
}

export interface ExecutionFilter {
  status?: string | null;
  action?: string | null;
  workerId?: string | null;
  /** ISO times, already validated. */
  since?: string | null;
  until?: string | null;
  stalled?: boolean | null;
  workflowId?: string | null;
  namespace?: string | null;
  /** Only these namespaces (a namespace-scoped token's): not a GraphQL argument, the server sets it. */
  inNamespaces?: readonly string[] | null;
  /** Every one of these tags (already checked): `tags @> filter`, served by the executions_tags index. */
  tags?: Record<string, string> | null;
}

export interface ExecutionPage {
  rows: { row: CappedExecutionRow; cursor: ExecutionCursor }[];
  hasNextPage: boolean;
}

// Column → comparison, in a fixed order; only their $n placeholders vary.
const FILTERS: { key: keyof ExecutionFilter; sql: (n: number) => string }[] = [
  { key: 'status', sql: (n) => `status = $${n}` },
  { key: 'action', sql: (n) => `action = $${n}` },
  { key: 'workerId', sql: (n) => `worker_id = $${n}` },
  { key: 'since', sql: (n) => `requested_at >= $${n}::timestamptz` },
  { key: 'until', sql: (n) => `requested_at < $${n}::timestamptz` },
  { key: 'stalled', sql: (n) => `coalesce(${STALLED_SQL}, false) = $${n}::boolean` },
  { key: 'workflowId', sql: (n) => `workflow_id = $${n}` },
  { key: 'namespace', sql: (n) => `namespace = $${n}` },
  { key: 'inNamespaces', sql: (n) => `namespace = ANY($${n}::text[])` },
  // Only tagged executions are in the executions_tags index (executions.sql), so the predicate says
  // so: a non-empty filter can only match a non-empty tags object (an empty one is no filter).
  { key: 'tags', sql: (n) => `tags @> $${n}::jsonb AND tags <> '{}'::jsonb` },
];

/**
 * Newest first, keyset-paginated on (requested_at DESC, execution_id DESC) — the order of the
 * executions_requested/_status/_action/_worker indexes — so page 1,000 costs what page 1 does.
 * Reads one row more than asked to learn whether another page follows.
 */
export async function listExecutions(pool: pg.Pool, o: { filter: ExecutionFilter; first: number; after?: ExecutionCursor; valueCap: number }): Promise<ExecutionPage> {
  const where: string[] = [];
  const values: unknown[] = [];
  for (const f of FILTERS) {
    const value = o.filter[f.key];
    if (value === undefined || value === null) continue;
    if (f.key === 'tags' && Object.keys(value).length === 0) continue;
    values.push(f.key === 'tags' ? JSON.stringify(value) : value);
    where.push(f.sql(values.length));
  }
  if (o.after) {
    values.push(o.after.requestedAt, o.after.executionId);
    where.push(`(requested_at, execution_id) < ($${values.length - 1}::timestamptz, $${values.length}::uuid)`);
  }
  values.push(o.first + 1, o.valueCap);
  const r = await pool.query(
    `SELECT ${EXECUTION_SELECT(`$${values.length}`)}, to_char(requested_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS cursor_requested_at
       FROM ${EXECUTIONS(pool)}
      ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
      ORDER BY requested_at DESC, execution_id DESC
      LIMIT $${values.length - 1}`,
    values,
  );
  const rows = r.rows.slice(0, o.first).map(({ cursor_requested_at, ...db }) => {
    const row = executionRowFromDb(db) as CappedExecutionRow;
    return { row, cursor: { requestedAt: cursor_requested_at as string, executionId: row.executionId } };
  });
  return { rows, hasNextPage: r.rows.length > o.first };
}

export interface EventRow {
  eventId: string;
  executionId: string;
  streamId: string;
  revision: number;
  /** Null for an event read from an archive file, which keeps no store positions. */
  globalPosition: number | null;
  type: string;
  by: string | null;
  /** Null when larger than the query's cap (see dataBytes). */
  data: unknown;
  /** Null when not measured (an archive file's event): the response budget measures the value. */
  dataBytes: number | null;
  metadata: unknown;
  metadataBytes: number | null;
  occurredAt: string | null;
  recordedAt: string;
}

/**
 * Each execution's events from `fromRevision` in stream order, at most `limit` each and `total`
 * in all (one index range scan per execution); data and metadata capped at `valueCap` bytes.
 */
export async function listEvents(
  pool: pg.Pool,
  executionIds: readonly string[],
  o: { fromRevision: number; limit: number; total: number; valueCap: number },
): Promise<Map<string, EventRow[]>> {
  const byExecution = new Map<string, EventRow[]>(executionIds.map((id) => [id, []]));
  if (executionIds.length === 0) return byExecution;
  const r = await pool.query(
    `SELECT ${cappedColumns(EXECUTION_EVENT_COLUMNS, EVENT_LARGE_COLUMNS, '$5')} FROM unnest($1::uuid[]) AS x(id)
       CROSS JOIN LATERAL (
         SELECT * FROM ${EXECUTION_EVENTS(pool)}
          WHERE ${TIMELINE_OF('x.id')} AND revision >= $2
          ORDER BY revision LIMIT $3
       ) e
      ORDER BY e.execution_id, e.revision
      LIMIT $4`,
    [executionIds, o.fromRevision, o.limit, o.total, o.valueCap],
  );
  for (const db of r.rows) {
    const row = fromColumns<EventRow>(db, ['revision', 'global_position']);
    byExecution.get(row.executionId)?.push(row);
  }
  return byExecution;
}

/** worker id → its last heartbeat (ISO), for the workers that have a liveness row. */
export async function findHeartbeats(pool: pg.Pool, workerIds: readonly string[]): Promise<Map<string, string>> {
  if (workerIds.length === 0) return new Map();
  const r = await pool.query<{ worker_id: string; heartbeat_at: Date }>(
    `SELECT worker_id, heartbeat_at FROM ${LIVENESS} WHERE worker_id = ANY($1::text[])`,
    [workerIds],
  );
  return new Map(r.rows.map((row) => [row.worker_id, row.heartbeat_at.toISOString()]));
}

export interface WorkerView extends WorkerRow {
  inFlight: number;
  lastHeartbeatAt: string | null;
  /** By the database's clock, like `alive`: a browser's clock may be off. */
  heartbeatAgeMs: number | null;
  alive: boolean;
}

/**
 * Every projected worker with its liveness and in-flight count, in one statement. Alive is
 * judged by the database's clock, like the executor's own choice of candidates.
 */
export async function listWorkers(pool: pg.Pool, staleAfterMs: number): Promise<WorkerView[]> {
  const r = await pool.query(
    `SELECT w.*, l.heartbeat_at AS live_heartbeat_at,
            floor(extract(epoch FROM now() - l.heartbeat_at) * 1000)::float8 AS live_heartbeat_age_ms,
            COALESCE(l.heartbeat_at > now() - $1::float8 * interval '1 millisecond', false) AS live_alive,
            COALESCE(f.in_flight, 0)::int AS live_in_flight
       FROM ${WORKERS(pool)} w
       LEFT JOIN ${LIVENESS} l ON l.worker_id = w.worker_id
       LEFT JOIN (SELECT worker_id, count(*) AS in_flight FROM ${EXECUTIONS(pool)}
                   WHERE status = ANY($2::text[]) AND worker_id IS NOT NULL GROUP BY worker_id) f
              ON f.worker_id = w.worker_id
      ORDER BY w.worker_id COLLATE "C"`,
    [staleAfterMs, HELD_STATUSES],
  );
  return r.rows.map(({ live_heartbeat_at, live_heartbeat_age_ms, live_alive, live_in_flight, ...db }) => ({
    ...workerRowFromDb(db),
    inFlight: live_in_flight as number,
    lastHeartbeatAt: live_heartbeat_at ? (live_heartbeat_at as Date).toISOString() : null,
    heartbeatAgeMs: live_heartbeat_age_ms === null ? null : Math.max(0, live_heartbeat_age_ms as number),
    alive: live_alive as boolean,
  }));
}

export interface ActionStatsView extends Omit<ActionStatsRow, 'durationHistogram'> {
  p50Ms: number | null;
  p95Ms: number | null;
  /** From the policy the latest worker to start offering the action advertised (as the executor takes it). */
  concurrencyLimit: number | null;
  concurrencyKey: string | null;
  slotsHeld: number;
}

/** Statuses in which an execution holds its action's concurrency slot (the executor's HOLDS_SLOT). */
export const SLOT_STATUSES = ['Scheduling', 'Scheduled', 'Running'] as const;

export async function listActionStats(pool: pg.Pool, action?: string | null): Promise<ActionStatsView[]> {
  // The workers table holds each worker's latest WorkerStarted with its global position, so
  // the latest one offering the action is one short scan of a table with a row per worker.
  const r = await pool.query(
    `SELECT s.*, p.concurrency AS policy_concurrency, coalesce(h.held, 0)::float8 AS slots_held
       FROM ${ACTION_STATS(pool)} s
       LEFT JOIN (SELECT action, count(*) AS held FROM ${EXECUTIONS(pool)} WHERE status = ANY($${action ? 2 : 1}::text[]) GROUP BY action) h
              ON h.action = s.action
       LEFT JOIN LATERAL (
         SELECT w.policies -> s.action -> 'concurrency' AS concurrency FROM ${WORKERS(pool)} w
          WHERE s.action = ANY(w.actions) AND w.started_position IS NOT NULL
          ORDER BY w.started_position DESC LIMIT 1
       ) p ON true
      ${action ? 'WHERE s.action = $1' : 'ORDER BY s.action COLLATE "C"'}`,
    action ? [action, SLOT_STATUSES] : [SLOT_STATUSES],
  );
  return r.rows.map(({ policy_concurrency, slots_held, ...db }) => {
    const { durationHistogram, ...counters } = actionStatsFromDb(db);
    const concurrency = policy_concurrency as { limit?: number; key?: string } | null;
    return {
      ...counters,
      p50Ms: percentile(durationHistogram, 0.5),
      p95Ms: percentile(durationHistogram, 0.95),
      concurrencyLimit: concurrency?.limit ?? null,
      concurrencyKey: concurrency?.key ?? null,
      slotsHeld: slots_held as number,
    };
  });
}
