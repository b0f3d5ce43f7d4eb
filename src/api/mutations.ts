// Mutations: the only writes the API makes, both through the event-sourced runtime. Input is
// checked against the action's own schema before anything is appended, so a bad submission
// never becomes history.
import { isFinal, statusOf, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { validateInput } from '../actions/registry.ts';
import { RejectedCommandError } from '../errors.ts';
import { intInRange, textArg, uuidArg } from './arguments.ts';
import type { ApiContext } from './context.ts';
import { ApiError, badInput } from './errors.ts';

// The limits ExecutionRequested / ExecutionCancelled put on these fields, checked here so the
// error names the argument rather than the event's field.
const MAX_ATTEMPTS_LIMIT = 1_000;
const MAX_IDEMPOTENCY_KEY_LENGTH = 500;
const MAX_REASON_LENGTH = 1_000;
const DEFAULT_CANCEL_REASON = 'cancelled through the API';

interface SubmitArgs {
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
    throw badInput('action', `unknown action ${JSON.stringify(shown)}; known actions: ${ctx.actions.names().join(', ')}`);
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

/** Why the API cannot cancel this execution now, or undefined when it can. */
function whyNotCancellable(id: string, snapshot: ExecutionSnapshot): ApiError | undefined {
  const status = statusOf(snapshot);
  if (isFinal(snapshot)) return new ApiError('CONFLICT', `execution ${id} is already ${status}; there is nothing to cancel`);
  const { owner, workerId } = snapshot.context;
  if (owner !== 'executor') {
    return new ApiError(
      'CONFLICT',
      `execution ${id} is held by worker ${workerId ?? owner.replace(/^worker:/, '')} in state ${status} and cannot be cancelled from the API yet ` +
        '(only before its handoff to a worker, in Requested or Scheduling)',
    );
  }
  return undefined;
}

async function cancelExecution(_: unknown, a: { id: string; reason?: string | null }, ctx: ApiContext) {
  const id = uuidArg(a.id, 'id');
  const reason = a.reason == null ? DEFAULT_CANCEL_REASON : textArg(a.reason, 'reason', MAX_REASON_LENGTH);
  const loaded = await ctx.runtime.load(id); // NotFoundError → NOT_FOUND
  const refusal = whyNotCancellable(id, loaded.snapshot);
  if (refusal) throw refusal;
  try {
    const r = await ctx.runtime.dispatch(id, { type: 'ExecutionCancelled', by: 'executor', data: { reason } }, { known: loaded });
    ctx.log.info({ executionId: id }, 'execution cancelled');
    return { executionId: id, status: statusOf(r.snapshot) };
  } catch (err) {
    // Handed off or finished between our read and the append: say so in the same words.
    if (err instanceof RejectedCommandError) throw whyNotCancellable(id, (await ctx.runtime.load(id)).snapshot) ?? err;
    throw err;
  }
}

export const mutationResolvers = { submitExecution, cancelExecution };
