// `actionTimeline`: one action's finished executions in equal time slices, with the run-time
// percentiles of each slice, for the console's small charts. Computed by Postgres from the read
// model's executions of that action (its index), so nothing but the slices leaves the database.
import type pg from 'pg';
import { readModelSchemaOf } from '../db/db-schema.ts';
import { qualified } from '../../projections/rows.ts';
import { intInRange, textArg } from './arguments.ts';
import type { ApiContext } from './context.ts';
import { badInput } from './errors.ts';

const EXECUTIONS = (pool: pg.Pool) => qualified(readModelSchemaOf(pool), 'executions');
export const MAX_TIMELINE_BUCKETS = 200;
export const MAX_TIMELINE_WINDOW_MS = 31 * 24 * 3_600_000;

export interface ActionTimeBucket {
  start: string;
  end: string;
  finished: number;
  completed: number;
  failed: number;
  p50Ms: number | null;
  p95Ms: number | null;
}

/** `buckets` equal slices of [since, until), every slice present (empty ones with zeros). */
export async function readActionTimeline(pool: pg.Pool, action: string, since: Date, until: Date, buckets: number): Promise<ActionTimeBucket[]> {
  const r = await pool.query(
    `SELECT width_bucket(extract(epoch FROM finished_at), extract(epoch FROM $2::timestamptz), extract(epoch FROM $3::timestamptz), $4::int) AS bucket,
            count(*)::int AS finished,
            count(*) FILTER (WHERE status = 'Completed')::int AS completed,
            count(*) FILTER (WHERE status IN ('Failed', 'TimedOut', 'Abandoned'))::int AS failed,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY run_ms) FILTER (WHERE status = 'Completed' AND run_ms IS NOT NULL) AS p50,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY run_ms) FILTER (WHERE status = 'Completed' AND run_ms IS NOT NULL) AS p95
       FROM ${EXECUTIONS(pool)}
      WHERE action = $1 AND finished_at >= $2::timestamptz AND finished_at < $3::timestamptz
      GROUP BY 1`,
    [action, since.toISOString(), until.toISOString(), buckets],
  );
  const found = new Map(r.rows.map((row) => [row.bucket as number, row]));
  const width = (until.getTime() - since.getTime()) / buckets;
  return Array.from({ length: buckets }, (_, i) => {
    const row = found.get(i + 1);
    const round = (v: unknown) => (v === null || v === undefined ? null : Math.round(Number(v) * 10) / 10);
    return {
      start: new Date(since.getTime() + i * width).toISOString(),
      end: new Date(since.getTime() + (i + 1) * width).toISOString(),
      finished: row?.finished ?? 0,
      completed: row?.completed ?? 0,
      failed: row?.failed ?? 0,
      p50Ms: round(row?.p50),
      p95Ms: round(row?.p95),
    };
  });
}

async function actionTimeline(_: unknown, a: { action: string; since: string; until?: string | null; buckets: number }, ctx: ApiContext) {
  const action = textArg(a.action, 'action', 500);
  const buckets = intInRange(a.buckets, 'buckets', 1, MAX_TIMELINE_BUCKETS);
  const since = new Date(a.since);
  const until = a.until == null ? new Date() : new Date(a.until);
  if (until.getTime() <= since.getTime()) throw badInput(a.until == null ? 'since' : 'until', `the window must not be empty: until (${until.toISOString()}) must be after since (${since.toISOString()})`);
  if (until.getTime() - since.getTime() > MAX_TIMELINE_WINDOW_MS) throw badInput('since', 'the window (since to until) must be at most 31 days');
  return readActionTimeline(ctx.pool, action, since, until, buckets);
}

export const actionTimelineResolvers = { Query: { actionTimeline } };
