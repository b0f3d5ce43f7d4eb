// Workflows over GraphQL: the `workflow` query folds the workflow's stream from the event store
// (bounded: MAX_WORKFLOW_EVENTS; no projection), each step's `execution` comes from the read
// model through the request's DataLoader; `submitWorkflow` checks the definition against the
// API's action registry (the one submitExecution uses) before anything is written, and
// `cancelWorkflow` records a cancel request for the orchestrating executors.
import type { EventStore } from '../eventstore/event-store.ts';
import { NotFoundError } from '../errors.ts';
import { WorkflowId } from '../../schemas/workflow.ts';
import { InvalidWorkflowError, cancelWorkflow as cancel, describeWorkflow, submitWorkflow as submit, type WorkflowStepView } from '../workflow/service.ts';
import { loadWorkflow } from '../workflow/workflow-stream.ts';
import { workflowStreamId } from '../../schemas/workflow-events.ts';
import { ArchivedError } from '../retention/archived-history.ts';
import { archivedStream } from '../retention/store-side.ts';
import { textArg } from './arguments.ts';
import type { ApiContext } from './context.ts';
import { ApiError, badInput } from './errors.ts';
import { jsonField } from './response-budget.ts';

const MAX_REASON_LENGTH = 1_000;
const DEFAULT_CANCEL_REASON = 'cancelled through the API';

function storeOf(ctx: ApiContext): EventStore {
  if (!ctx.store) throw new ApiError('NOT_CONFIGURED', 'workflows are read from the event store, and this API server was started without one');
  return ctx.store;
}

function workflowIdArg(value: string, name: string): string {
  const r = WorkflowId.safeParse(value);
  if (!r.success) throw badInput(name, `must be a workflow id: ${r.error.issues[0]!.message}`);
  return value;
}

export async function workflow(_: unknown, a: { id: string }, ctx: ApiContext) {
  const id = workflowIdArg(a.id, 'id');
  try {
    return describeWorkflow(await loadWorkflow(storeOf(ctx), id));
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw err;
    // Archived by retention with its steps: say so, rather than "no such workflow".
    const archived = await archivedStream(ctx.pool, workflowStreamId(id));
    if (archived) throw new ArchivedError('workflow', id, archived);
    return null;
  }
}

async function submitWorkflow(_: unknown, a: { definition: unknown; id?: string | null; namespace?: string | null }, ctx: ApiContext) {
  const deps = { store: storeOf(ctx), runtime: ctx.runtime, actions: ctx.actions };
  try {
    const r = await submit(deps, a.definition, { ...(a.id != null && { id: a.id }), ...(a.namespace != null && { namespace: a.namespace }) });
    ctx.log.info({ workflowId: r.workflowId, steps: r.steps, created: r.created }, 'workflow submitted');
    return r;
  } catch (err) {
    // Each problem by its path inside the argument it came from (`id`, `namespace`, or `definition.steps.2.action`).
    if (err instanceof InvalidWorkflowError) {
      const problems = err.problems.map((p) => ({ path: p.path === 'id' || p.path === 'namespace' ? p.path : `definition${p.path ? `.${p.path}` : ''}`, message: p.message }));
      throw new ApiError('BAD_USER_INPUT', `invalid workflow (${problems.length} problem${problems.length === 1 ? '' : 's'}): ${problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`, problems[0]!.path.split('.')[0], { problems });
    }
    throw err;
  }
}

async function cancelWorkflow(_: unknown, a: { id: string; reason?: string | null }, ctx: ApiContext) {
  const id = workflowIdArg(a.id, 'id');
  const reason = a.reason == null ? DEFAULT_CANCEL_REASON : textArg(a.reason, 'reason', MAX_REASON_LENGTH);
  const r = await cancel({ store: storeOf(ctx), runtime: ctx.runtime }, id, reason); // NotFoundError → NOT_FOUND
  if (r.outcome === 'too-late') throw new ApiError('CONFLICT', r.message);
  ctx.log.info({ workflowId: id, outcome: r.outcome }, r.message);
  return { ...r, outcome: r.outcome.toUpperCase().replace('-', '_') };
}

export const workflowResolvers = {
  Query: { workflow },
  Mutation: { submitWorkflow, cancelWorkflow },
  Workflow: {
    id: (w: { workflowId: string }) => w.workflowId,
    definition: jsonField((w: { definition: unknown }) => w.definition),
  },
  WorkflowStep: {
    result: jsonField((s: WorkflowStepView) => s.result),
    error: jsonField((s: WorkflowStepView) => s.error, 'error'),
    /** The read model's row: it may lag the workflow's events by a moment (null until projected). */
    execution: (s: WorkflowStepView, _a: unknown, ctx: ApiContext) => (s.executionId ? ctx.loaders.execution.load(s.executionId) : null),
  },
};
