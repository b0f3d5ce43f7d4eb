// The executions connection's cursors: base64url of the JSON keyset position {requestedAt,
// executionId} of the last row a page returned. The encoding alone, with no GraphQL in it, so
// `baton list` pages with the same cursors without loading the API (cursor.ts wraps it for the API).
import { z } from 'zod';
import { dateTimeRangeProblem } from '../input/rules.ts';

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

/** The position a cursor names, or undefined for anything encodeCursor did not make. */
export function parseCursor(value: string): ExecutionCursor | undefined {
  if (value.length > MAX_CURSOR_LENGTH || !BASE64URL.test(value)) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  const parsed = CursorShape.safeParse(json);
  return parsed.success ? parsed.data : undefined;
}
