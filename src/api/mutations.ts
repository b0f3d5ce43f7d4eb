// Mutations: the only writes the API makes, all through the event-sourced runtime. Input is
// checked against the action's own schema before anything is appended, so a bad submission
// never becomes history.
import { statusOf } from '../../actors/execution.machine.ts';
import { validateInput } from '../actions/registry.ts';
import { cancelExecution as cancel } from '../runtime/cancel.ts';
import { intInRange, textArg, uuidArg } from './arguments.ts';
import type { ApiContext } from './context.ts';
import { ApiError, badInput } from './errors.ts';

// The limits ExecutionRequested / ExecutionCancelled put on these fields, checked here so the
// error names the argument rather than the event's field.
const MAX_ATTEMPTS_LIMIT = 1_000;
const MAX_IDEMPOTENCY_KEY_LENGTH = 500;
const MAX_REASON_LENGTH = 1_000;
const DEFAULT_CANCEL_REASON = 'cancelled through the API';

export interface SubmitArgs {
  action: string;
  input?: unknown;
  idempotencyKey?: string | null;
  maxAttempts?: number | null;
  priority?: number | null;
}

async function submitExecution(_: unknown, a: SubmitArgs, ctx: ApiContext) {
  const action = ctx.actions.get(a.action);
  if (!action) {
    const shown = a.action.length > 100 ? `${a.action.slice(0, 100)}…` : a.action;
    // The list of what this server runs is for admins (the token that may submit, or no tokens at all).
    const known = ctx.role === 'admin' ? `; known actions: ${ctx.actions.names().join(', ')}` : '';
    throw badInput('action', `unknown action ${JSON.stringify(shown)}${known}`);
  }
  const input = a.input ?? null;
  validateInput(action, input); // InvalidActionInputError names each field: `input.ms: …`
  const r = await ctx.runtime.submit({
    action: action.name,
    input,
    ...(a.idempotencyKey != null && { idempotencyKey: textArg(a.idempotencyKey, 'idempotencyKey', MAX_IDEMPOTENCY_KEY_LENGTH) }),
    ...(a.maxAttempts != null && { maxAttempts: intInRange(a.maxAttempts, 'maxAttempts', 1, MAX_ATTEMPTS_LIMIT) }),
    ...(a.priority != null && { priority: a.priority }),
  });
  ctx.log.info({ executionId: r.executionId, action: action.name, created: r.created }, 'execution submitted');
  return { executionId: r.executionId, created: r.created, status: statusOf(r.snapshot) };
}

/**
 * Works in every state: cancelled at once while the executor holds it, a cancel request to the
 * worker once one does (the result says which). A finished execution is a CONFLICT naming its state.
 */
async function cancelExecution(_: unknown, a: { id: string; reason?: string | null }, ctx: ApiContext) {
  const id = uuidArg(a.id, 'id');
  const reason = a.reason == null ? DEFAULT_CANCEL_REASON : textArg(a.reason, 'reason', MAX_REASON_LENGTH);
  const r = await cancel(ctx.runtime, id, reason); // NotFoundError → NOT_FOUND
  if (r.outcome === 'too-late') throw new ApiError('CONFLICT', r.message);
  ctx.log.info({ executionId: id, outcome: r.outcome }, r.message);
  return { executionId: id, status: r.status, outcome: r.outcome.toUpperCase().replace('-', '_'), message: r.message };
}

export const mutationResolvers = { submitExecution, cancelExecution };
