// Schedules from the read model (baton_read.schedules, projections/schedules.ts), newest first,
// for `baton schedule list` and the GraphQL `schedules` query. Each row resumes the schedule
// machine (its status and context), so the views are the machine's, next fire times included.
import type pg from 'pg';
import { readModelSchemaOf } from '../db/db-schema.ts';
import { qualified } from '../../projections/rows.ts';
import { scheduleRowFromDb, snapshotFromScheduleRow } from '../../projections/schedules.ts';
import { describeSchedule, type ScheduleView } from './service.ts';

const SCHEDULES = (pool: pg.Pool) => qualified(readModelSchemaOf(pool), 'schedules');

export interface ScheduleListOptions {
  status?: 'Active' | 'Paused' | 'Deleted';
  /** Include deleted schedules (when no status is asked for). Default false. */
  includeDeleted?: boolean;
  first: number;
  /** The id of the last schedule of the previous page. */
  after?: string;
}

export async function listSchedules(pool: pg.Pool, o: ScheduleListOptions, now: Date): Promise<{ schedules: ScheduleView[]; hasNextPage: boolean }> {
  const where: string[] = [];
  const params: unknown[] = [o.first + 1];
  if (o.status) where.push(`status = $${params.push(o.status)}`);
  else if (!o.includeDeleted) where.push(`status <> 'Deleted'`);
  if (o.after !== undefined) where.push(`(created_at, schedule_id) < (SELECT created_at, schedule_id FROM ${SCHEDULES(pool)} WHERE schedule_id = $${params.push(o.after)})`);
  const r = await pool.query(
    `SELECT * FROM ${SCHEDULES(pool)} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at DESC, schedule_id DESC LIMIT $1`,
    params,
  );
  const rows = r.rows.map((row) => scheduleRowFromDb(row));
  return {
    hasNextPage: rows.length > o.first,
    schedules: rows.slice(0, o.first).map((row) => describeSchedule(row.scheduleId, snapshotFromScheduleRow(row), BigInt(row.revision), now)),
  };
}

/** One schedule from the read model, or undefined when it has none (yet). */
export async function findSchedule(pool: pg.Pool, scheduleId: string, now: Date): Promise<ScheduleView | undefined> {
  const r = await pool.query(`SELECT * FROM ${SCHEDULES(pool)} WHERE schedule_id = $1`, [scheduleId]);
  if (r.rows.length === 0) return undefined;
  const row = scheduleRowFromDb(r.rows[0]);
  return describeSchedule(row.scheduleId, snapshotFromScheduleRow(row), BigInt(row.revision), now);
}
