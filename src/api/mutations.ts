// Mutations: the only writes the API makes, all through the event-sourced runtime. A submission
// is checked by the one submission check every front door uses, so a bad one never becomes history.
import { statusOf } from '../../actors/execution.machine.ts';
import { cancelExecution as cancel } from '../runtime/cancel.ts';
import { submitExecution as submit } from '../runtime/submission.ts';
import { withTraceParent } from '../observability/tracing.ts';
import { textArg, uuidArg } from './arguments.ts';
import type { ApiContext } from './context.ts';
import { ApiError, knownFor } from './errors.ts';
import { inScope } from './namespace-tokens.ts';
import { DEFAULT_NAMESPACE } from '../input/namespace.ts';
import { NotFoundError } from '../errors.ts';

const MAX_REASON_LENGTH = 1_000;
const DEFAULT_CANCEL_REASON = 'cancelled through the API';

export interface SubmitArgs {
  action: string;
  input?: unknown;
  idempotencyKey?: string | null;
  maxAttempts?: number | null;
  priority?: number | null;
  namespace?: string | null;
}

/** Checked (src/runtime/submission.ts) before anything is appended: the same checks as `baton submit`. */
async function submitExecution(_: unknown, a: SubmitArgs, ctx: ApiContext) {
  const namespace = a.namespace ?? DEFAULT_NAMESPACE;
  if (!inScope(ctx.namespaces, namespace)) throw new ApiError('FORBIDDEN', `namespace: this token may only submit to ${ctx.namespaces!.join(', ')}, not "${namespace}"`, 'namespace');
  const r = await knownFor(ctx.role, () =>
    // A caller's `traceparent` header: the submit span joins its trace (src/observability/tracing.ts).
    withTraceParent(ctx.trace, () =>
      submit(ctx, {
        action: a.action,
        input: a.input ?? null,
        ...(a.idempotencyKey != null && { idempotencyKey: a.idempotencyKey }),
        ...(a.maxAttempts != null && { maxAttempts: a.maxAttempts }),
        ...(a.priority != null && { priority: a.priority }),
        ...(a.namespace != null && { namespace: a.namespace }),
      }),
    ),
  );
  ctx.log.info({ executionId: r.executionId, action: a.action, created: r.created }, 'execution submitted');
  return { executionId: r.executionId, created: r.created, status: statusOf(r.snapshot) };
}

/**
 * Works in every state: cancelled at once while the executor holds it, a cancel request to the
 * worker once one does (the result says which). A finished execution is a CONFLICT naming its state.
 */
async function cancelExecution(_: unknown, a: { id: string; reason?: string | null }, ctx: ApiContext) {
  const id = uuidArg(a.id, 'id');
  const reason = a.reason == null ? DEFAULT_CANCEL_REASON : textArg(a.reason, 'reason', MAX_REASON_LENGTH);
  if (ctx.namespaces !== undefined) {
    // Another namespace's execution is not found, exactly as a missing one is.
    const loaded = await ctx.runtime.load(id); // NotFoundError → NOT_FOUND
    if (!inScope(ctx.namespaces, loaded.snapshot.context.namespace)) throw new NotFoundError('execution', id);
  }
  const r = await cancel(ctx.runtime, id, reason); // NotFoundError → NOT_FOUND
  if (r.outcome === 'too-late') throw new ApiError('CONFLICT', r.message);
  ctx.log.info({ executionId: id, outcome: r.outcome }, r.message);
  return { executionId: id, status: r.status, outcome: r.outcome.toUpperCase().replace('-', '_'), message: r.message };
}

export const mutationResolvers = { submitExecution, cancelExecution };
