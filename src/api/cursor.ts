// Opaque cursors for the executions connection (execution-cursor.ts): opaque so clients cannot
// come to depend on the ordering columns; strictly checked because they come back from clients.
// notOurCursor is every list's refusal of a cursor it did not hand out.
import { badInput, type ApiError } from './errors.ts';
import { parseCursor, type ExecutionCursor } from './execution-cursor.ts';

export { encodeCursor, type ExecutionCursor } from './execution-cursor.ts';

/** BAD_USER_INPUT naming `argument`: `after: not a workflow cursor from this API (…)`. */
export function notOurCursor(kind?: 'workflow' | 'dead-letter' | 'schedule', argument = 'after'): ApiError {
  return badInput(argument, `not a ${kind ? `${kind} ` : ''}cursor from this API (pass pageInfo.endCursor of the previous page)`);
}

/** Throws BAD_USER_INPUT naming `argument` for anything this API did not hand out. */
export function decodeCursor(value: string, argument = 'after'): ExecutionCursor {
  const cursor = parseCursor(value);
  if (!cursor) throw notOurCursor(undefined, argument);
  return cursor;
}
