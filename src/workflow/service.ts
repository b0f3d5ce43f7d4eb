// Workflows as the CLI and the GraphQL API use them: submit (checked first; a bad definition
// writes nothing), status (folded from the workflow's stream, with each step's execution), and
// cancel (a request the orchestrating executors act on). The orchestrator
// (./orchestrator.ts) does the rest, inside every executor.
//
// Which actions are known: the same registry each caller already loads to check a submission's
// action, i.e. the built-ins plus the module given with `--actions` (`baton api --actions`,
// `baton workflow submit --actions`, `baton dev --actions`), exactly as the API's
// submitExecution checks its action. An action only some worker offers through a module the
// caller did not load is refused: load the same module.
import { namespaceOr } from '../input/namespace.ts';
import { DEFAULT_NAMESPACE, namespaceProblem } from '../input/namespace.ts';
import { z } from 'zod';
import { isDeepStrictEqual } from 'node:util';
import { isFinal, statusOf } from '../../actors/execution.machine.ts';
import { failedSteps, startWorkflow, workflowPlan, type WorkflowStatus } from '../../actors/workflow.machine.ts';
import { workflowStreamId, type StepOutcome } from '../../schemas/workflow-events.ts';
import { WorkflowId, checkWorkflow, type WorkflowDefinition, type WorkflowProblem } from '../../schemas/workflow.ts';
import type { ErrorInfo } from '../../schemas/events.ts';
import { schemaThrew, type ActionRegistry } from '../actions/registry.ts';
import { BatonError, NotFoundError, WrongExpectedRevisionError } from '../errors.ts';
import { JSON_LIMITS, formatPath, jsonProblems } from '../input/rules.ts';
import { zodProblems } from '../input/schemas.ts';
import { START, type EventStore } from '../eventstore/event-store.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';
import { asWorkflowEvent, createWorkflowRuntime, loadWorkflow, workflowEventId, type LoadedWorkflow } from './workflow-stream.ts';
import { workflowKind } from '../runtime/workflow-kind.ts';
import { stateName } from '../runtime/actor-kind.ts';
import { newId } from '../ids.ts';

/** A definition with problems; nothing was written. `problems` name each field path. */
export class InvalidWorkflowError extends BatonError {
  constructor(readonly problems: WorkflowProblem[]) {
    super(`invalid workflow (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n${problems.map((p) => `  ${p.path || '(root)'}: ${p.message}`).join('\n')}`);
  }
}

/** The workflow id is taken by another workflow: another definition, or the same in another namespace (ids are one per store). */
export class WorkflowIdConflictError extends BatonError {
  constructor(readonly workflowId: string, why = 'a different definition') {
    super(`workflow id "${workflowId}" is already used by a workflow with ${why}`);
  }
}

export interface WorkflowServiceDeps {
  store: EventStore;
  runtime: ExecutionRuntime;
  clock?: () => Date;
}

export interface SubmitWorkflowOptions {
  /** A caller-chosen id: submitting the same definition again under it returns the first workflow. */
  id?: string;
  /** Where it and its steps' executions live (checked before: see namespaceProblem); default `default`. */
  namespace?: string;
}

export interface SubmitWorkflowResult {
  workflowId: string;
  /** False when the id found an earlier, identical submission. */
  created: boolean;
  status: WorkflowStatus;
  steps: number;
}

/**
 * Every problem of a definition at once: its fields and graph (checkWorkflow), and each step's
 * input against its action's schema. A step with `inputFrom` has those keys filled from its
 * parents' results when it runs, so its input is checked with them missing: a problem at such a
 * key is not reported (the worker checks the filled input, as it does every execution's).
 */
export function workflowProblems(value: unknown, actions: Pick<ActionRegistry, 'get' | 'names'>): { ok: true; definition: WorkflowDefinition } | { ok: false; problems: WorkflowProblem[] } {
  const checked = checkWorkflow(value, new Set(actions.names()));
  const problems: WorkflowProblem[] = checked.ok ? [] : [...checked.problems];
  const steps = isRecord(value) && Array.isArray(value.steps) ? value.steps : [];
  steps.forEach((step: unknown, i: number) => {
    if (!isRecord(step) || typeof step.action !== 'string') return;
    // Whole numbers JSON cannot hold exactly are refused as a submission's input is (submission.ts):
    // stored, the step would run on a rounded number.
    const inexact = jsonProblems(step.input ?? null, { ...JSON_LIMITS, exactIntegers: true }).filter((p) => p.message.startsWith('is a whole number past'));
    problems.push(...inexact.map((p) => ({ path: [`steps.${i}.input`, ...(p.path.length > 0 ? [formatPath(p.path)] : [])].join('.'), message: p.message })));
    const action = actions.get(step.action);
    // An input that is not storable JSON was refused by checkWorkflow already.
    if (!action || inexact.length > 0 || jsonProblems(step.input ?? null).length > 0) return;
    problems.push(...stepInputProblems(action.input, step.input, isRecord(step.inputFrom) ? Object.keys(step.inputFrom) : [], `steps.${i}.input`));
  });
  return checked.ok && problems.length === 0 ? checked : { ok: false, problems };
}

/** safeParse, or the problem when user code in the schema threw (a refinement, a transform, an async part). */
function safeParseStep(schema: z.ZodType, value: unknown, at: string): ReturnType<z.ZodType['safeParse']> | WorkflowProblem {
  try {
    return schema.safeParse(value);
  } catch (err) {
    return { path: at, message: schemaThrew(err) };
  }
}

function stepInputProblems(schema: z.ZodType, input: unknown, filled: string[], at: string): WorkflowProblem[] {
  if (filled.length === 0) {
    const r = safeParseStep(schema, input ?? null, at);
    if ('path' in r) return [r];
    return r.success ? [] : zodProblems(r.error, schema).map((p) => ({ path: p.path ? `${at}.${p.path}` : at, message: p.message }));
  }
  if (input !== undefined && !isRecord(input)) return [{ path: at, message: 'must be an object when the step has inputFrom (its keys are added to it)' }];
  const r = safeParseStep(schema, input ?? {}, at);
  if ('path' in r) return [r];
  if (r.success) return [];
  const later = new Set(filled);
  return r.error.issues
    .filter((issue) => !later.has(String(issue.path[0])))
    .flatMap((issue) => zodProblems(new z.ZodError([issue]), schema))
    .map((p) => ({ path: p.path ? `${at}.${p.path}` : at, message: p.message }));
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Check the definition, then append WorkflowStarted to a new stream. Any problem throws
 * InvalidWorkflowError listing all of them, and nothing is written. With `id`, the stream
 * must not exist yet, or must hold the same definition (then `created: false`).
 */
export async function submitWorkflow(
  deps: WorkflowServiceDeps & { actions: Pick<ActionRegistry, 'get' | 'names'> },
  value: unknown,
  options: SubmitWorkflowOptions = {},
): Promise<SubmitWorkflowResult> {
  const problems: WorkflowProblem[] = [];
  if (options.id !== undefined) {
    const id = WorkflowId.safeParse(options.id);
    if (!id.success) problems.push(...id.error.issues.map((i) => ({ path: 'id', message: i.message })));
  }
  if (options.namespace !== undefined) {
    const problem = namespaceProblem(options.namespace);
    if (problem) problems.push({ path: 'namespace', message: problem });
  }
  const checked = workflowProblems(value, deps.actions);
  if (!checked.ok) problems.push(...checked.problems);
  if (problems.length > 0 || !checked.ok) throw new InvalidWorkflowError(problems);
  const definition = checked.definition;
  const workflowId = options.id ?? newId();
  // `default` is recorded as no namespace, so a workflow submitted again compares as before namespaces.
  const namespace = options.namespace === undefined || options.namespace === DEFAULT_NAMESPACE ? undefined : options.namespace;
  const started = workflowKind.make({ type: 'WorkflowStarted', data: { definition, ...(namespace !== undefined && { namespace }) }, by: 'executor', correlationId: workflowId }, (deps.clock ?? (() => new Date()))().toISOString());
  const snapshot = startWorkflow(started);
  const eventId = workflowEventId(workflowId, 'started');
  try {
    const r = await deps.store.append(workflowStreamId(workflowId), [{ eventId, type: started.type, data: started.data, metadata: { ...started.metadata, stateAfter: stateName(snapshot) } }], { expectedRevision: 'no_stream' });
    if (!r.idempotentReplay) return { workflowId, created: true, status: snapshot.value, steps: definition.steps.length };
  } catch (err) {
    if (!(err instanceof WrongExpectedRevisionError)) throw err;
  }
  // The id is taken: the same workflow submitted again, or another one.
  const existing = await loadWorkflow(deps.store, workflowId);
  const first = asWorkflowEvent(existing.events[0]!);
  if (first.type !== 'WorkflowStarted' || !isDeepStrictEqual(first.data.definition, definition)) throw new WorkflowIdConflictError(workflowId);
  if (namespaceOr(first.data.namespace) !== namespaceOr(namespace)) {
    throw new WorkflowIdConflictError(workflowId, `the same definition in namespace "${namespaceOr(first.data.namespace)}" (a workflow id is one per store, across namespaces)`);
  }
  return { workflowId, created: false, status: existing.snapshot.value, steps: definition.steps.length };
}

/** How a step stands: its machine status, with why a pending step will never run and how a finished one ended. */
export type StepStatus = 'Pending' | 'Scheduled' | 'Completed' | 'Failed' | 'Cancelled' | 'TimedOut' | 'Abandoned' | 'Skipped';

export interface WorkflowStepView {
  id: string;
  action: string;
  dependsOn: string[];
  status: StepStatus;
  executionId: string | null;
  result?: unknown;
  error?: ErrorInfo;
}

export interface WorkflowView {
  workflowId: string;
  name: string | null;
  /** Where it and its steps' executions live. */
  namespace: string;
  status: WorkflowStatus;
  onFailure: WorkflowDefinition['onFailure'];
  revision: bigint;
  startedAt: string;
  finishedAt: string | null;
  cancelReason: string | null;
  /** Why it failed or was cancelled, from its last event. */
  reason: string | null;
  /** Steps whose execution did not complete (WorkflowFailed's list once it failed; of a cancelled workflow, not those its cancel stopped). */
  failedSteps: string[];
  definition: WorkflowDefinition;
  steps: WorkflowStepView[];
}

const outcomeStatus: Record<StepOutcome, StepStatus> = { Completed: 'Completed', Failed: 'Failed', Cancelled: 'Cancelled', TimedOut: 'TimedOut', Abandoned: 'Abandoned' };

/** The workflow as its stream says, without reading its executions. */
export function describeWorkflow(loaded: LoadedWorkflow): WorkflowView {
  const { snapshot } = loaded;
  const c = snapshot.context;
  const skipped = new Set(snapshot.status === 'done' ? c.definition.steps.map((s) => s.id) : workflowPlan(snapshot).skipped);
  const finishedEvents = new Map<string, { error?: ErrorInfo }>();
  let reason: string | null = null;
  // Steps the workflow's own cancel stopped are not failures of a cancelled workflow; one that
  // failed before the cancel still is.
  let failed: string[] = failedSteps(snapshot).filter((id) => !(snapshot.value === 'Cancelled' || snapshot.value === 'Cancelling') || c.steps[id]!.outcome !== 'Cancelled');
  for (const e of loaded.events.map(asWorkflowEvent)) {
    if (e.type === 'WorkflowStepFinished') finishedEvents.set(e.data.stepId, { ...(e.data.error && { error: e.data.error }) });
    if (e.type === 'WorkflowFailed') [reason, failed] = [e.data.reason, e.data.failedSteps];
    if (e.type === 'WorkflowCancelled') reason = e.data.reason;
  }
  const steps = c.definition.steps.map((step): WorkflowStepView => {
    const s = c.steps[step.id]!;
    const status: StepStatus =
      s.status === 'pending' ? (skipped.has(step.id) ? 'Skipped' : 'Pending') : s.status === 'scheduled' ? 'Scheduled' : outcomeStatus[s.outcome ?? 'Failed'];
    const error = finishedEvents.get(step.id)?.error;
    return {
      id: step.id,
      action: step.action,
      dependsOn: step.dependsOn,
      status,
      executionId: s.executionId ?? null,
      ...(s.result !== undefined && { result: s.result }),
      ...(error && { error }),
    };
  });
  return {
    workflowId: loaded.workflowId,
    name: c.definition.name ?? null,
    namespace: namespaceOr(c.namespace),
    status: snapshot.value,
    onFailure: c.definition.onFailure,
    revision: loaded.revision,
    startedAt: c.startedAt,
    finishedAt: c.finishedAt ?? null,
    cancelReason: c.cancelReason ?? null,
    reason,
    failedSteps: failed,
    definition: c.definition,
    steps,
  };
}

export interface StepExecutionView {
  status: string;
  attempt: number;
  maxAttempts: number;
  workerId: string | null;
  result?: unknown;
  error?: ErrorInfo;
}

export type WorkflowStatusView = Omit<WorkflowView, 'steps'> & { steps: (WorkflowStepView & { execution: StepExecutionView | null })[] };

/** The workflow with each step's execution, folded from the event store (a few at a time). */
export async function workflowStatus(deps: WorkflowServiceDeps, workflowId: string): Promise<WorkflowStatusView> {
  const view = describeWorkflow(await loadWorkflow(deps.store, workflowId));
  const executions = new Map<string, StepExecutionView | null>();
  const ids = view.steps.flatMap((s) => (s.executionId ? [s.executionId] : []));
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(8, ids.length) }, async () => {
      while (next < ids.length) {
        const id = ids[next++]!;
        try {
          const { snapshot } = await deps.runtime.load(id);
          const c = snapshot.context;
          executions.set(id, {
            status: statusOf(snapshot),
            attempt: c.attempt,
            maxAttempts: c.maxAttempts,
            workerId: c.workerId,
            ...(isFinal(snapshot) && c.result !== undefined && { result: c.result }),
            ...(c.error && { error: c.error }),
          });
        } catch (err) {
          if (!(err instanceof NotFoundError)) throw err;
          executions.set(id, null);
        }
      }
    }),
  );
  return { ...view, steps: view.steps.map((s) => ({ ...s, execution: s.executionId ? (executions.get(s.executionId) ?? null) : null })) };
}

export interface CancelWorkflowResult {
  workflowId: string;
  /** cancel-requested: recorded now; already-requested: someone asked before; too-late: it already ended. */
  outcome: 'cancel-requested' | 'already-requested' | 'too-late';
  status: WorkflowStatus;
  message: string;
}

/**
 * Ask for a workflow to be cancelled: appends WorkflowCancelRequested. The orchestrating
 * executor then starts no more steps, cancels the unfinished ones, and ends the workflow as
 * Cancelled once none is in flight.
 */
export async function cancelWorkflow(deps: WorkflowServiceDeps, workflowId: string, reason: string): Promise<CancelWorkflowResult> {
  let settled: CancelWorkflowResult | undefined;
  // Decided on the state each attempt reads: an executor may record a step (or the end) meanwhile.
  const r = await createWorkflowRuntime(deps.store, { ...(deps.clock && { clock: deps.clock }), maxConflictRetries: 10 }).dispatch(workflowId, (s) => {
    const status = s!.value;
    if (s!.status === 'done') settled = { workflowId, outcome: 'too-late', status, message: `workflow ${workflowId} is already ${status}; there is nothing to cancel` };
    else if (status === 'Cancelling') settled = { workflowId, outcome: 'already-requested', status, message: `workflow ${workflowId} is already being cancelled (${s!.context.cancelReason})` };
    else return { type: 'WorkflowCancelRequested', data: { reason }, by: 'executor', correlationId: workflowId };
    return undefined;
  });
  if (!r.appended && settled) return settled;
  const c = r.snapshot.context;
  const running = c.definition.steps.filter((s) => c.steps[s.id]!.status === 'scheduled').length;
  return { workflowId, outcome: 'cancel-requested', status: r.snapshot.value, message: `workflow ${workflowId}: cancellation requested; ${running} running step(s) will be cancelled` };
}


/** The workflow once it has ended (by following its stream, no polling), or undefined after `timeoutMs`. */
export async function waitForWorkflowEnd(store: EventStore, workflowId: string, timeoutMs?: number): Promise<LoadedWorkflow | undefined> {
  const ac = new AbortController();
  const timer = timeoutMs ? setTimeout(() => ac.abort(), timeoutMs) : undefined;
  const streamId = workflowStreamId(workflowId);
  try {
    let current = await loadWorkflow(store, workflowId);
    if (current.snapshot.status === 'done') return current;
    // A caller-given id may be a prefix of another's: look at this stream's events only.
    for await (const event of store.subscribe({ after: START, streamPrefixes: [streamId], signal: ac.signal, order: 'stream' })) {
      if (event.streamId !== streamId || event.revision <= current.revision) continue;
      current = await loadWorkflow(store, workflowId);
      if (current.snapshot.status === 'done') return current;
    }
    return undefined;
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
}
