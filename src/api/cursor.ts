// Opaque cursors for the executions connection (execution-cursor.ts): opaque so clients cannot
// come to depend on the ordering columns; strictly checked because they come back from clients.
import { badInput } from './errors.ts';
import { parseCursor, type ExecutionCursor } from './execution-cursor.ts';

export { encodeCursor, type ExecutionCursor } from './execution-cursor.ts';

/** Throws BAD_USER_INPUT naming `argument` for anything this API did not hand out. */
export function decodeCursor(value: string, argument = 'after'): ExecutionCursor {
  const cursor = parseCursor(value);
  if (!cursor) throw badInput(argument, 'not a cursor from this API (pass pageInfo.endCursor of the previous page)');
  return cursor;
}
