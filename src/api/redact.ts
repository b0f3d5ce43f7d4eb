// Stack traces are for the unscoped admin. A failed action's ErrorInfo (`{ message, type, stack }`)
// reaches the API in Execution.error, ExecutionFailed's event data, the
// history's contexts and workflow steps (subscriptions too, through the same fields); its stack
// names the server's files. Those are the only places it is redacted: a user's own values (inputs,
// results, progress, definitions) come back as stored, a `stack` key of theirs included.
import type { Role } from './auth.ts';

/**
 * Where a JSON field may hold Baton's ErrorInfo: `error`, the value is one (Execution.error, a
 * workflow step's error); `error-key`, the value's own `error` key is one (an event's data, a
 * folded context); absent, it holds none.
 */
export type ErrorPlace = 'error' | 'error-key';

/** Who sees stacks and the server's lists of known names: the admin token not limited to namespaces (or no tokens). */
export const seesServerDetails = (viewer: { role: Role; namespaces?: readonly string[] | undefined }): boolean =>
  viewer.role === 'admin' && viewer.namespaces === undefined;

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

function withoutOwnStack(value: unknown): unknown {
  if (!isObject(value) || !('stack' in value)) return value;
  const { stack: _stack, ...rest } = value;
  return rest;
}

/** The value without the stack of the ErrorInfo at `place`; copies only what changes. */
export function withoutStack(value: unknown, place: ErrorPlace): unknown {
  if (place === 'error') return withoutOwnStack(value);
  if (!isObject(value) || !isObject(value['error'])) return value;
  const error = withoutOwnStack(value['error']);
  return error === value['error'] ? value : { ...value, error };
}
