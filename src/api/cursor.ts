// Opaque cursors for the executions connection: base64url of the JSON keyset position
// {requestedAt, executionId} of the last row a page returned. Opaque so clients cannot come to
// depend on the ordering columns; strictly checked because they come back from clients.
import { z } from 'zod';
import { dateTimeRangeProblem } from '../input/rules.ts';
import { badInput } from './errors.ts';

export interface ExecutionCursor {
  /** requested_at with the database's microseconds, so a page never skips a row it shares a millisecond with. */
  requestedAt: string;
  executionId: string;
}

const CursorShape = z.strictObject({
  // In years 0001 to 9999, like every date-time argument: Postgres reads "0000-…" as no date at all.
  requestedAt: z.iso.datetime({ precision: 6 }).refine((t) => dateTimeRangeProblem(t) === undefined),
  executionId: z.uuid(),
});

const BASE64URL = /^[A-Za-z0-9_-]+$/;
// A real cursor is ~110 characters; anything much longer is not one of ours.
const MAX_CURSOR_LENGTH = 256;

export function encodeCursor(cursor: ExecutionCursor): string {
  return Buffer.from(JSON.stringify({ requestedAt: cursor.requestedAt, executionId: cursor.executionId })).toString('base64url');
}

/** Throws BAD_USER_INPUT naming `argument` for anything this API did not hand out. */
export function decodeCursor(value: string, argument = 'after'): ExecutionCursor {
  const refuse = () => badInput(argument, 'not a cursor from this API (pass pageInfo.endCursor of the previous page)');
  if (value.length > MAX_CURSOR_LENGTH || !BASE64URL.test(value)) throw refuse();
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
  } catch {
    throw refuse();
  }
  const parsed = CursorShape.safeParse(json);
  if (!parsed.success) throw refuse();
  return parsed.data;
}
