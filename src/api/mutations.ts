// Mutations: the only writes the API makes, all through the event-sourced runtime. A submission
// is checked by the one submission check every front door uses, so a bad one never becomes history.
import { statusOf } from '../../actors/execution.machine.ts';
import { cancelExecution as cancel } from '../runtime/cancel.ts';
import { BatonError, IdempotencyKeyConflictError } from '../errors.ts';
import { apiItemNames, itemFailure, submitExecution as submit, submitExecutions as submitMany, type Submission } from '../runtime/submission.ts';
import { withTraceParent } from '../observability/tracing.ts';
import { textArg, uuidArg } from './arguments.ts';
import { eventStoreOf, type ApiContext } from './context.ts';
import { workflowStreamId } from '../../schemas/workflow-events.ts';
import { ApiError, badInput, knownFor } from './errors.ts';
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
  actionVersion?: number | null;
  tags?: unknown;
  namespace?: string | null;
}

/** GraphQL's nulls as absent fields: the submission check takes only what was given. */
const asSubmission = (a: SubmitArgs): Submission => ({
  action: a.action,
  input: a.input ?? null,
  ...(a.idempotencyKey != null && { idempotencyKey: a.idempotencyKey }),
  ...(a.maxAttempts != null && { maxAttempts: a.maxAttempts }),
  ...(a.priority != null && { priority: a.priority }),
  ...(a.tags != null && { tags: a.tags as Record<string, string> }),
  ...(a.namespace != null && { namespace: a.namespace }),
  ...(a.actionVersion != null && { actionVersion: a.actionVersion }),
});

/** A token limited to namespaces may submit only into them (`argument` names where the namespace was given). */
function checkNamespaceScope(ctx: ApiContext, namespace: string | null | undefined, argument: string): void {
  const ns = namespace ?? DEFAULT_NAMESPACE;
  if (!inScope(ctx.namespaces, ns)) throw new ApiError('FORBIDDEN', `${argument}: this token may only submit to ${ctx.namespaces!.join(', ')}, not "${ns}"`, argument);
}

/** Checked (src/runtime/submission.ts) before anything is appended: the same checks as `baton submit`. */
async function submitExecution(_: unknown, a: SubmitArgs, ctx: ApiContext) {
  checkNamespaceScope(ctx, a.namespace, 'namespace');
  // A caller's `traceparent` header: the submit span joins its trace (src/observability/tracing.ts).
  const r = await knownFor(ctx, () => withTraceParent(ctx.trace, () => submit(ctx, asSubmission(a))));
  ctx.log.info({ executionId: r.executionId, action: a.action, created: r.created }, 'execution submitted');
  return { executionId: r.executionId, created: r.created, status: statusOf(r.snapshot) };
}

const INPUTS_NAMES = apiItemNames('inputs');

/**
 * Many submissions, one appendMany: all checked first (any problem refuses the call, naming
 * `inputs.<i>.<field>`), then each with its own result. Bounded by BATON_API_MAX_SUBMIT_BATCH.
 */
async function submitExecutions(_: unknown, a: { inputs: SubmitArgs[] }, ctx: ApiContext) {
  if (a.inputs.length > ctx.maxSubmitBatch) {
    throw badInput('inputs', `at most ${ctx.maxSubmitBatch} submissions in one call (BATON_API_MAX_SUBMIT_BATCH); got ${a.inputs.length}: split them into several calls`);
  }
  a.inputs.forEach((input, i) => checkNamespaceScope(ctx, input.namespace, `inputs.${i}.namespace`));
  const outcomes = await knownFor(ctx, () => withTraceParent(ctx.trace, () => submitMany(ctx, a.inputs.map(asSubmission), INPUTS_NAMES, (i) => `inputs.${i}`)));
  const failed = outcomes.filter((o) => !o.ok);
  // Nothing stored for an unexpected reason (the database is gone): an error, as for one submission.
  if (failed.length > 0 && failed.length === outcomes.length && failed.every((o) => !(o.error instanceof BatonError))) throw failed[0]!.error;
  const results = outcomes.map((o, index) => {
    if (o.ok) return { index, executionId: o.result.executionId, created: o.result.created, status: statusOf(o.result.snapshot), error: null };
    // Each item has its own outcome: the others were stored, and their ids must reach the caller.
    const failure = itemFailure(o.error, { detail: false });
    if (failure.code === 'STORE_FAILED') ctx.log.error({ err: o.error, index, executionId: o.executionId }, 'submitExecutions: an input could not be stored');
    const executionId = o.error instanceof IdempotencyKeyConflictError ? o.error.executionId : o.executionId;
    return { index, executionId, created: false, status: null, error: failure };
  });
  const created = results.filter((r) => r.created).length;
  const refused = results.filter((r) => r.error !== null).length;
  ctx.log.info({ inputs: a.inputs.length, created, refused }, 'executions submitted');
  return { results, created, existing: results.length - created - refused, refused };
}

/**
 * Works in every state: cancelled at once while the executor holds it, a cancel request to the
 * worker once one does (the result says which). A finished execution is a CONFLICT naming its
 * state, as the event store has it (`extensions.outcome` TOO_LATE and `status`): the typed client
 * answers it as `too-late` from these, not from the read model, which may not show the end yet.
 * (The schema's CancelOutcome has no TOO_LATE, so this stays an error for existing callers.)
 */
async function cancelExecution(_: unknown, a: { id: string; reason?: string | null }, ctx: ApiContext) {
  const id = uuidArg(a.id, 'id');
  const reason = a.reason == null ? DEFAULT_CANCEL_REASON : textArg(a.reason, 'reason', MAX_REASON_LENGTH);
  if (ctx.namespaces !== undefined) {
    // Another namespace's execution is not found, exactly as a missing one is.
    const loaded = await ctx.runtime.load(id); // NotFoundError → NOT_FOUND
    if (!inScope(ctx.namespaces, loaded.snapshot.context.namespace)) throw new NotFoundError('execution', id);
  }
  const r = await cancel(ctx.runtime, id, reason).catch(async (err: unknown) => {
    // NotFoundError → NOT_FOUND; for a workflow's id (`baton cancel` takes either), saying what to use instead.
    if (err instanceof NotFoundError && ctx.namespaces === undefined && (await eventStoreOf(ctx).readStream(workflowStreamId(id), { limit: 1 })).length > 0) {
      throw new ApiError('NOT_FOUND', `no execution ${id}: that is a workflow's id; cancel it with cancelWorkflow(id: "${id}")`);
    }
    throw err;
  });
  if (r.outcome === 'too-late') throw new ApiError('CONFLICT', r.message, undefined, { outcome: 'TOO_LATE', status: r.status });
  ctx.log.info({ executionId: id, outcome: r.outcome }, r.message);
  return { executionId: id, status: r.status, outcome: r.outcome.toUpperCase().replace('-', '_'), message: r.message };
}

export const mutationResolvers = { submitExecution, submitExecutions, cancelExecution };
