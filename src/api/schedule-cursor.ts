// The schedules list's cursors (GraphQL `schedules` and `baton schedule list`): the id of the
// last schedule of a page, opaque (opaque-cursor.ts). The read model pages after that schedule's
// row, so a cursor whose schedule it lacks would give an empty page: that is refused instead.
// No GraphQL in it, so the CLI uses it without loading the API.
import type pg from 'pg';
import { WORKFLOW_ID_MAX_LENGTH, workflowIdProblem } from '../../schemas/workflow-id.ts';
import { findSchedule, listSchedules, type ScheduleListOptions } from '../schedule/schedule-queries.ts';
import { encodePrefixedCursor, parsePrefixedCursor } from './opaque-cursor.ts';

const CURSOR_PREFIX = 'schedule:';
// Base64 of the prefix and the longest schedule id.
const MAX_CURSOR_LENGTH = Math.ceil(((CURSOR_PREFIX.length + WORKFLOW_ID_MAX_LENGTH) * 4) / 3);

export const encodeScheduleCursor = (scheduleId: string): string => encodePrefixedCursor(CURSOR_PREFIX, scheduleId);

/** The schedule id a cursor carries, or undefined for anything encodeScheduleCursor did not make. */
export function parseScheduleCursor(value: string): string | undefined {
  const id = parsePrefixedCursor(CURSOR_PREFIX, value, MAX_CURSOR_LENGTH);
  // Schedule ids follow the workflow id rule (schemas/schedule-events.ts).
  return id !== undefined && workflowIdProblem(id) === undefined ? id : undefined;
}

export type SchedulePage = Awaited<ReturnType<typeof listSchedules>>;

/** listSchedules, or `unknownAfter` when `after` names a schedule the read model does not have. */
export async function listSchedulesAfter(pool: pg.Pool, o: ScheduleListOptions, now: Date): Promise<SchedulePage | 'unknownAfter'> {
  const page = await listSchedules(pool, o, now);
  // A missing schedule always gives an empty page, so only an empty page needs the look-up.
  if (o.after !== undefined && page.schedules.length === 0 && !(await findSchedule(pool, o.after, now))) return 'unknownAfter';
  return page;
}
