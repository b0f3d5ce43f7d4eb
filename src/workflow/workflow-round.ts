// One round of orchestrating one workflow: what its machine's plan asks for now, done.
//
//   record finished steps   WorkflowStepFinished {outcome, result | error} for each step whose
//                           execution ended (known from the execution's final snapshot).
//   cancel                  cancelExecution on each step execution still running (fail-fast
//                           after a failure, or a cancel request), and on executions of steps
//                           that will never be recorded.
//   schedule a ready step   submit its execution with idempotency key `workflow:<id>:<step>`
//                           (so its id is derived from the key), THEN record
//                           WorkflowStepScheduled. A crash in between leaves an execution in
//                           Requested; the successor plans the same step, its submit finds that
//                           execution (same key, same request), and records it: never a second one.
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
import { DuplicateEventIdError, IdempotencyKeyConflictError } from '../errors.ts';
import type { Command } from '../runtime/actor-kind.ts';
import { cancelExecution } from '../runtime/cancel.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';
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
    const end = d.outcomeKnown(s.executionId!) ?? outcomeOf((await d.executions.load(s.executionId!)).snapshot);
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

  if (plan.schedule.length > 0) return record(d, w, base, await mapLimit(plan.schedule, d.parallelism, (step) => submitStep(d, w, snapshot, step)));
  if (plan.end) return record(d, w, base, [endCommand(w, snapshot, plan.end)]);
  return false;
}

/** Append at the revision the plan was made on. A lost race (a refusal, or another executor's copy of the event) means: plan again. */
async function record(d: RoundDeps, w: FollowedWorkflow, base: { snapshot: WorkflowSnapshot; revision: bigint | undefined }, commands: WorkflowCommand[]): Promise<boolean> {
  try {
    const r = await d.workflows.dispatch(w.id, commands, { known: base });
    if (r.appended) d.onRecorded(w, r.snapshot, commands);
    else d.onConflict(); // stored by another executor: the next round reads what it wrote
  } catch (err) {
    if (!(err instanceof WorkflowTransitionError || err instanceof DuplicateEventIdError)) throw err;
    d.onConflict();
    d.log.debug({ workflowId: w.id, err: err.message }, 'another executor moved the workflow on; re-planning');
  }
  return true;
}

async function submitStep(d: RoundDeps, w: FollowedWorkflow, snapshot: WorkflowSnapshot, step: WorkflowStep): Promise<WorkflowCommand> {
  const c = snapshot.context;
  const results = new Map(Object.entries(c.steps).flatMap(([id, s]) => (s.status === 'completed' ? [[id, s.result] as const] : [])));
  const parent = step.dependsOn[0];
  const parentId = parent === undefined ? undefined : c.steps[parent]?.executionId;
  const { input, missing } = stepInput(step, results);
  const request = {
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
  let executionId: string;
  try {
    // A path the parent's result lacks is most likely a misspelt ref or a changed action: the step's
    // execution is recorded, ended at once saying which, so the workflow fails naming it rather
    // than running the step on an input with a hole in it.
    executionId = (missing.length === 0 ? await d.executions.submit(request) : await d.executions.submitAbandoned(request, missingPathsReason(missing))).executionId;
  } catch (err) {
    // Only the default maxAttempts can differ (an executor with another BATON_MAX_ATTEMPTS
    // submitted it first): the key names this workflow's step, so it is this step's execution.
    if (!(err instanceof IdempotencyKeyConflictError)) throw err;
    d.log.warn({ workflowId: w.id, stepId: step.id, executionId: err.executionId, err: err.message }, 'step execution exists with a different request; using it');
    executionId = err.executionId;
  }
  w.executions.set(executionId, step.id);
  return command(w, 'WorkflowStepScheduled', { stepId: step.id, executionId }, `${step.id}/scheduled`);
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
