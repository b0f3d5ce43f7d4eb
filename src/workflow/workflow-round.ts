// One round of orchestrating one workflow: what its machine's plan asks for now, done.
//
//   record finished steps   WorkflowStepFinished {outcome, result | error} for each step whose
//                           execution ended (known from the execution's final snapshot).
//   cancel                  cancelExecution on each step execution still running (fail-fast
//                           after a failure, or a cancel request), and on executions of steps
//                           that will never be recorded.
//   schedule a ready step   record WorkflowStepScheduled naming the execution id its idempotency
//                           key `workflow:<id>:<step>` derives, THEN submit that execution. So a
//                           step's execution exists only once the workflow says so: submitted
//                           first, one whose record then lost to a cancel request was handed off
//                           and ran, an execution the workflow never mentioned (QA). A crash in
//                           between leaves a scheduled step with no execution yet: the next round
//                           submits it (same key, same request: never a second one). An execution
//                           submitted before its record (by builds before 2026-12-01) is found the
//                           same way when its step is recorded.
//   end                     WorkflowCompleted / WorkflowFailed / WorkflowCancelled.
//
// Every append is decided through the workflow machine at the revision the plan was made on,
// with an event id derived from its meaning (workflow-stream.ts), so when several executors
// orchestrate at once the loser of a race re-plans, and an event appended twice is stored once.
// A step's parentId is the execution id of its FIRST parent (dependsOn[0]): an execution has one
// parentId, and the first parent is stable across executors and replays.
import type { Logger } from 'pino';
import { isFinal, statusOf, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { failedSteps, workflowPlan, type WorkflowSnapshot } from '../../actors/workflow.machine.ts';
import type { ErrorInfo } from '../../schemas/events.ts';
import type { StepOutcome, WorkflowEvent } from '../../schemas/workflow-events.ts';
import { stepInput, type MissingResultPath, type WorkflowStep } from '../../schemas/workflow.ts';
import { mapLimit } from '../async/map-limit.ts';
import { DuplicateEventIdError, IdempotencyKeyConflictError, NotFoundError } from '../errors.ts';
import type { Command } from '../runtime/actor-kind.ts';
import { cancelExecution } from '../runtime/cancel.ts';
import { executionIdForKey, type ExecutionRuntime, type SubmitRequest } from '../runtime/execution-runtime.ts';
import { WorkflowTransitionError, workflowEventId, type WorkflowRuntime } from './workflow-stream.ts';

/** The idempotency key of a step's execution: its id is derived from it. */
export const stepExecutionKey = (workflowId: string, stepId: string) => `workflow:${workflowId}:${stepId}`;

/** The step of a `workflow:<id>:<step>` key (step ids have no ':'), or undefined. */
export function stepOfKey(key: unknown, workflowId: string): string | undefined {
  const prefix = `workflow:${workflowId}:`;
  return typeof key === 'string' && key.startsWith(prefix) ? key.slice(prefix.length) : undefined;
}

export interface Outcome {
  outcome: StepOutcome;
  result?: unknown;
  error?: ErrorInfo;
}

/** How a final execution ended, as a step outcome; undefined while it runs. */
export function outcomeOf(snapshot: ExecutionSnapshot): Outcome | undefined {
  if (!isFinal(snapshot)) return undefined;
  const c = snapshot.context;
  const status = statusOf(snapshot) as StepOutcome;
  const errorOf = (message: string | undefined, type?: string): ErrorInfo => ({ message: message ?? status, ...(type && { type }) });
  switch (status) {
    case 'Completed':
      return { outcome: status, result: c.result ?? null };
    case 'Failed':
      return { outcome: status, error: errorOf(c.error?.message, c.error?.type) };
    case 'Cancelled':
      return { outcome: status, error: errorOf(c.cancelReason) };
    case 'TimedOut':
      return { outcome: status, error: errorOf(`timed out (${c.timedOutLimit ?? 'limit'})`) };
    default:
      return { outcome: status, error: errorOf(c.abandonReason) };
  }
}

/** What the orchestrator keeps about one workflow it follows, besides its snapshot. */
export interface FollowedWorkflow {
  id: string;
  /** Every execution of this workflow seen, recorded or not: execution id → step id. */
  executions: Map<string, string>;
  /** Error messages of finished steps, for WorkflowFailed's reason. */
  errors: Map<string, string>;
  /** Executions this process already asked to cancel. */
  cancelAsked: Set<string>;
}

export interface RoundDeps {
  workflows: WorkflowRuntime;
  executions: ExecutionRuntime;
  log: Logger;
  parallelism: number;
  /** How each step execution ended, when this process saw it end. */
  outcomeKnown(executionId: string): Outcome | undefined;
  onRecorded(w: FollowedWorkflow, snapshot: WorkflowSnapshot, commands: readonly Command<WorkflowEvent>[]): void;
  onConflict(): void;
}

type WorkflowCommand = Command<WorkflowEvent> & { eventId: string };

const command = <T extends WorkflowEvent['type']>(w: FollowedWorkflow, type: T, data: Extract<WorkflowEvent, { type: T }>['data'], what: string): WorkflowCommand =>
  ({ type, data, by: 'executor', correlationId: w.id, eventId: workflowEventId(w.id, what) }) as WorkflowCommand;

/** One round: record finished steps, cancel, schedule, or end. True when something was appended (or must be planned again). */
export async function advance(d: RoundDeps, w: FollowedWorkflow): Promise<boolean | 'ended'> {
  const base = await d.workflows.load(w.id);
  const snapshot = base.snapshot;
  const c = snapshot.context;
  if (snapshot.status === 'done') {
    await cancel(d, w, orphans(w, snapshot, new Set(c.definition.steps.map((s) => s.id))), `workflow ${w.id} ended ${snapshot.value}; this step will not run`);
    return 'ended';
  }

  const finished: WorkflowCommand[] = [];
  for (const step of c.definition.steps) {
    const s = c.steps[step.id]!;
    if (s.status !== 'scheduled') continue;
    const end = d.outcomeKnown(s.executionId!) ?? outcomeOf(await loadOrSubmit(d, w, snapshot, step, s.executionId!));
    if (!end) continue;
    const data = { stepId: step.id, executionId: s.executionId!, outcome: end.outcome, ...(end.result !== undefined && { result: end.result as never }), ...(end.error && { error: end.error }) };
    finished.push(command(w, 'WorkflowStepFinished', data, `${step.id}/finished`));
  }
  if (finished.length > 0) return record(d, w, base, finished);

  const plan = workflowPlan(snapshot);
  if (plan.cancel.length > 0) {
    const reason =
      snapshot.value === 'Cancelling'
        ? `workflow ${w.id} cancelled: ${c.cancelReason}`
        : `workflow ${w.id} stops (fail-fast) after step(s) ${failedSteps(snapshot).join(', ')} did not complete`;
    await cancel(d, w, plan.cancel.map((x) => x.executionId), reason);
  }
  await cancel(d, w, orphans(w, snapshot, new Set(plan.skipped)), `workflow ${w.id} will not run this step`);

  if (plan.schedule.length > 0) {
    const steps = plan.schedule.map((step) => stepSubmission(w, snapshot, step));
    if (await record(d, w, base, steps.map((x) => x.command))) await mapLimit(steps, d.parallelism, (x) => submit(d, w, x));
    return true;
  }
  if (plan.end) return record(d, w, base, [endCommand(w, snapshot, plan.end)]);
  return false;
}

/**
 * Append at the revision the plan was made on; true when this call appended. A lost race (a
 * refusal, or another executor's copy of the event) means: plan again. advance() returns true
 * either way (something moved, or must be planned again).
 */
async function record(d: RoundDeps, w: FollowedWorkflow, base: { snapshot: WorkflowSnapshot; revision: bigint | undefined }, commands: WorkflowCommand[]): Promise<boolean> {
  try {
    const r = await d.workflows.dispatch(w.id, commands, { known: base });
    if (r.appended) d.onRecorded(w, r.snapshot, commands);
    else d.onConflict(); // stored by another executor: the next round reads what it wrote
    return r.appended;
  } catch (err) {
    if (!(err instanceof WorkflowTransitionError || err instanceof DuplicateEventIdError)) throw err;
    d.onConflict();
    d.log.debug({ workflowId: w.id, err: err.message }, 'another executor moved the workflow on; re-planning');
    return false;
  }
}

/** A ready step's execution request, and the WorkflowStepScheduled that names its (key-derived) id. */
interface StepSubmission {
  stepId: string;
  executionId: string;
  request: SubmitRequest;
  missing: MissingResultPath[];
  command: WorkflowCommand;
}

function stepSubmission(w: FollowedWorkflow, snapshot: WorkflowSnapshot, step: WorkflowStep): StepSubmission {
  const c = snapshot.context;
  const results = new Map(Object.entries(c.steps).flatMap(([id, s]) => (s.status === 'completed' ? [[id, s.result] as const] : [])));
  const parent = step.dependsOn[0];
  const parentId = parent === undefined ? undefined : c.steps[parent]?.executionId;
  const { input, missing } = stepInput(step, results);
  const request: SubmitRequest = {
    action: step.action,
    input,
    idempotencyKey: stepExecutionKey(w.id, step.id),
    workflowId: w.id,
    correlationId: w.id,
    ...(step.maxAttempts !== undefined && { maxAttempts: step.maxAttempts }),
    ...(step.priority !== undefined && { priority: step.priority }),
    ...(parentId !== undefined && { parentId }),
    ...(c.namespace !== undefined && { namespace: c.namespace }),
  };
  const executionId = executionIdForKey(request.idempotencyKey!, request.namespace);
  return { stepId: step.id, executionId, request, missing, command: command(w, 'WorkflowStepScheduled', { stepId: step.id, executionId }, `${step.id}/scheduled`) };
}

/** Submit a recorded step's execution (again: its key finds one already stored). */
async function submit(d: RoundDeps, w: FollowedWorkflow, x: StepSubmission): Promise<ExecutionSnapshot> {
  w.executions.set(x.executionId, x.stepId);
  try {
    // A path the parent's result lacks is most likely a misspelt ref or a changed action: the step's
    // execution is recorded, ended at once saying which, so the workflow fails naming it rather
    // than running the step on an input with a hole in it.
    return (x.missing.length === 0 ? await d.executions.submit(x.request) : await d.executions.submitAbandoned(x.request, missingPathsReason(x.missing))).snapshot;
  } catch (err) {
    // Only the default maxAttempts can differ (an executor with another BATON_MAX_ATTEMPTS
    // submitted it first): the key names this workflow's step, so it is this step's execution.
    if (!(err instanceof IdempotencyKeyConflictError)) throw err;
    d.log.warn({ workflowId: w.id, stepId: x.stepId, executionId: err.executionId, err: err.message }, 'step execution exists with a different request; using it');
    return (await d.executions.load(err.executionId)).snapshot;
  }
}

/** A scheduled step's execution; submitted now when a round stopped between recording and submitting it. */
async function loadOrSubmit(d: RoundDeps, w: FollowedWorkflow, snapshot: WorkflowSnapshot, step: WorkflowStep, executionId: string): Promise<ExecutionSnapshot> {
  try {
    return (await d.executions.load(executionId)).snapshot;
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw err;
    d.log.info({ workflowId: w.id, stepId: step.id, executionId }, 'step recorded as scheduled without its execution (a round stopped in between): submitting it');
    return submit(d, w, stepSubmission(w, snapshot, step));
  }
}

/** Why a step's execution was abandoned before it ran: each inputFrom path its parent's result does not hold. */
export function missingPathsReason(missing: readonly MissingResultPath[]): string {
  const each = missing.map((m) => `inputFrom.${m.key}: "${m.ref}" is not in the result (it holds ${m.found}, but not the rest)`);
  return `not run: its input could not be made from its parents' results: ${each.join('; ')}`.slice(0, 2_000);
}

async function cancel(d: RoundDeps, w: FollowedWorkflow, executionIds: readonly string[], reason: string): Promise<void> {
  const todo = executionIds.filter((id) => !w.cancelAsked.has(id) && d.outcomeKnown(id) === undefined);
  await mapLimit(todo, d.parallelism, async (executionId) => {
    w.cancelAsked.add(executionId);
    try {
      const r = await cancelExecution(d.executions, executionId, reason);
      d.log.debug({ workflowId: w.id, executionId, outcome: r.outcome }, 'step execution cancel');
    } catch (err) {
      w.cancelAsked.delete(executionId); // try again next time
      throw err;
    }
  });
}

/** Executions of steps that will not be recorded (submitted, then the workflow moved on without them): cancel them. */
function orphans(w: FollowedWorkflow, snapshot: WorkflowSnapshot, notRunning: ReadonlySet<string>): string[] {
  const steps = snapshot.context.steps;
  return [...w.executions].filter(([, stepId]) => notRunning.has(stepId) && steps[stepId]?.status === 'pending').map(([id]) => id);
}

function endCommand(w: FollowedWorkflow, snapshot: WorkflowSnapshot, type: 'WorkflowCompleted' | 'WorkflowFailed' | 'WorkflowCancelled'): WorkflowCommand {
  const c = snapshot.context;
  if (type === 'WorkflowCompleted') return command(w, type, {}, 'end');
  if (type === 'WorkflowCancelled') return command(w, type, { reason: c.cancelReason ?? 'cancelled' }, 'end');
  // Steps cancelled because another failed (fail-fast) are not the cause: name the ones that failed.
  const notCompleted = Object.entries(c.steps).filter(([, s]) => s.status === 'failed');
  const causes = notCompleted.filter(([, s]) => s.outcome !== 'Cancelled');
  const named = (causes.length > 0 ? causes : notCompleted).map(([id]) => id);
  const describe = (id: string) => `${id} (${c.steps[id]!.outcome}${w.errors.has(id) ? `: ${w.errors.get(id)}` : ''})`;
  const cancelled = causes.length > 0 ? notCompleted.filter(([, s]) => s.outcome === 'Cancelled').map(([id]) => id) : [];
  const reason = `step${named.length === 1 ? '' : 's'} ${named.map(describe).join(', ')} did not complete${cancelled.length ? `; cancelled: ${cancelled.join(', ')}` : ''}`;
  return command(w, type, { reason: reason.slice(0, 2_000), failedSteps: named }, 'end');
}
