// The `workflows` list: every workflow that has step executions in the read model, newest first,
// read from the executions table's workflow index (a workflow has no row of its own there; its
// own stream is folded only for the `workflow` field each summary carries).
import pg from 'pg';
import { z } from 'zod';
import { readModelSchemaOf } from '../db/db-schema.ts';
import { qualified } from '../../projections/rows.ts';
import { dateTimeRangeProblem } from '../input/rules.ts';
import { text } from '../input/schemas.ts';
import { MAX_PAGE_SIZE, intInRange } from './arguments.ts';
import type { ApiContext } from './context.ts';
import { notOurCursor } from './cursor.ts';
import { encodePrefixedCursor, parsePrefixedCursor } from './opaque-cursor.ts';
import { workflow } from './workflows.ts';

const EXECUTIONS = (pool: pg.Pool) => qualified(readModelSchemaOf(pool), 'executions');

export interface WorkflowCursor {
  /** The first step's requested_at with the database's microseconds. */
  startedAt: string;
  workflowId: string;
}

const CursorShape = z.strictObject({
  startedAt: z.iso.datetime({ precision: 6 }).refine((t) => dateTimeRangeProblem(t) === undefined),
  // Text as an event may hold it (no NUL, which Postgres text cannot hold, no lone surrogate).
  workflowId: text().min(1).max(200),
});
const CURSOR_PREFIX = 'workflow:';
const MAX_CURSOR_LENGTH = 512;

export const encodeWorkflowCursor = (c: WorkflowCursor) => encodePrefixedCursor(CURSOR_PREFIX, JSON.stringify({ startedAt: c.startedAt, workflowId: c.workflowId }));

/** Throws BAD_USER_INPUT naming `after` for anything this API did not hand out. */
export function decodeWorkflowCursor(value: string): WorkflowCursor {
  const position = parsePrefixedCursor(CURSOR_PREFIX, value, MAX_CURSOR_LENGTH);
  if (position !== undefined) {
    try {
      const parsed = CursorShape.safeParse(JSON.parse(position));
      if (parsed.success) return parsed.data;
    } catch {
      // not JSON: refused below
    }
  }
  throw notOurCursor('workflow');
}

export interface WorkflowSummaryRow {
  workflowId: string;
  startedAt: string;
  lastStepAt: string;
  executions: number;
  running: number;
  completed: number;
  failed: number;
  cancelled: number;
}

/** Keyset-paged on (first step's requested_at DESC, workflow_id DESC); one row more to learn whether a page follows. */
export async function listWorkflowSummaries(pool: pg.Pool, first: number, after?: WorkflowCursor): Promise<{ rows: { row: WorkflowSummaryRow; cursor: WorkflowCursor }[]; hasNextPage: boolean }> {
  const values: unknown[] = [first + 1];
  if (after) values.push(after.startedAt, after.workflowId);
  const r = await pool.query(
    `SELECT workflow_id, min(requested_at) AS started_at, max(requested_at) AS last_step_at,
            to_char(min(requested_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS cursor_started_at,
            count(*)::int AS executions,
            count(*) FILTER (WHERE status IN ('Requested', 'Scheduling', 'Scheduled', 'Running'))::int AS running,
            count(*) FILTER (WHERE status = 'Completed')::int AS completed,
            count(*) FILTER (WHERE status IN ('Failed', 'TimedOut', 'Abandoned'))::int AS failed,
            count(*) FILTER (WHERE status = 'Cancelled')::int AS cancelled
       FROM ${EXECUTIONS(pool)}
      WHERE workflow_id IS NOT NULL
      GROUP BY workflow_id
      ${after ? 'HAVING (min(requested_at), workflow_id) < ($2::timestamptz, $3::text)' : ''}
      ORDER BY min(requested_at) DESC, workflow_id DESC
      LIMIT $1`,
    values,
  );
  const rows = r.rows.slice(0, first).map((db) => ({
    row: {
      workflowId: db.workflow_id as string,
      startedAt: (db.started_at as Date).toISOString(),
      lastStepAt: (db.last_step_at as Date).toISOString(),
      executions: db.executions as number,
      running: db.running as number,
      completed: db.completed as number,
      failed: db.failed as number,
      cancelled: db.cancelled as number,
    },
    cursor: { startedAt: db.cursor_started_at as string, workflowId: db.workflow_id as string },
  }));
  return { rows, hasNextPage: r.rows.length > first };
}

async function workflows(_: unknown, a: { first: number; after?: string | null }, ctx: ApiContext) {
  const first = intInRange(a.first, 'first', 1, MAX_PAGE_SIZE);
  const after = a.after == null ? undefined : decodeWorkflowCursor(a.after);
  const page = await listWorkflowSummaries(ctx.pool, first, after);
  const edges = page.rows.map(({ row, cursor }) => ({ cursor: encodeWorkflowCursor(cursor), node: row }));
  return { edges, pageInfo: { hasNextPage: page.hasNextPage, endCursor: edges.at(-1)?.cursor ?? null } };
}

export const workflowListResolvers = {
  Query: { workflows },
  WorkflowSummary: {
    id: (row: WorkflowSummaryRow) => row.workflowId,
    workflow: (row: WorkflowSummaryRow, _a: unknown, ctx: ApiContext) => workflow(undefined, { id: row.workflowId }, ctx),
  },
};
