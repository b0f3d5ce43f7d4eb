// What a fired tick starts, and how it is started exactly once. The target's id is derived from
// (schedule, tick time): an execution's from its idempotency key `schedule:<id>@<tick>`, a
// workflow's as a uuid v5 of the same. The tick is recorded on the schedule's stream first
// (compare-and-swap, schedule-host.ts); starting its target afterwards is idempotent, so
// whoever sees a recorded tick whose target is missing (the executor that recorded it was
// killed in between) starts it, and a second start finds the first.
import { v5 as uuidv5 } from 'uuid';
import { isFinal } from '../../actors/execution.machine.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { workflowStreamId } from '../../schemas/workflow-events.ts';
import type { FiredTarget, ScheduleSpec } from '../../schemas/schedule-events.ts';
import { IdempotencyKeyConflictError, NotFoundError } from '../errors.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { cancelExecution } from '../runtime/cancel.ts';
import { executionIdForKey, type ExecutionRuntime } from '../runtime/execution-runtime.ts';
import { cancelWorkflow, submitWorkflow, WorkflowIdConflictError } from '../workflow/service.ts';
import type { WorkflowRuntime } from '../workflow/workflow-stream.ts';

/** Namespace of scheduled workflow ids (uuid v5). Never change it: a tick's workflow is found again by it. */
const SCHEDULED_WORKFLOW_NAMESPACE = 'b7d3e2a1-6c4f-4e8b-9a05-2f1d7c3e9b48';

/** A tick as its target is named by: its time, and whether it was a manual trigger. */
export interface TickRef {
  tickAt: string;
  manual: boolean;
}

/** The idempotency key of the execution a tick starts: `schedule:<id>@<tick>` (`@manual:<time>` for a manual one). */
export const tickKey = (scheduleId: string, tick: TickRef) => `schedule:${scheduleId}@${tick.manual ? 'manual:' : ''}${tick.tickAt}`;

/** The target a tick of `spec` starts, by id. */
export function targetOf(scheduleId: string, spec: ScheduleSpec, tick: TickRef): FiredTarget {
  return spec.target.kind === 'action'
    ? { kind: 'action', id: executionIdForKey(tickKey(scheduleId, tick), spec.namespace) }
    : { kind: 'workflow', id: uuidv5(tickKey(scheduleId, tick), SCHEDULED_WORKFLOW_NAMESPACE) };
}

/** The stream a target's history is kept in. */
export const targetStreamId = (target: FiredTarget): string => (target.kind === 'action' ? executionStreamId(target.id) : workflowStreamId(target.id));

export interface TargetDeps {
  store: EventStore;
  executions: ExecutionRuntime;
  workflows: WorkflowRuntime;
}

/**
 * Start the target of a recorded tick; false when it existed already. The spec was checked when
 * the schedule was created or updated (its action known, its input fitting), so it is not
 * checked against an action registry again here: the executors have none.
 */
export async function startTarget(deps: TargetDeps, scheduleId: string, spec: ScheduleSpec, tick: TickRef & { target: FiredTarget }): Promise<boolean> {
  const t = spec.target;
  try {
    if (t.kind === 'action') {
      const r = await deps.executions.submit({
        action: t.action,
        input: t.input,
        idempotencyKey: tickKey(scheduleId, tick),
        correlationId: scheduleId,
        ...(t.maxAttempts !== undefined && { maxAttempts: t.maxAttempts }),
        ...(t.priority !== undefined && { priority: t.priority }),
        ...(spec.namespace !== undefined && { namespace: spec.namespace }),
      });
      return r.created;
    }
    const actions = [...new Set(t.definition.steps.map((s) => s.action))];
    const r = await submitWorkflow({ store: deps.store, runtime: deps.executions, actions: { names: () => actions, get: () => undefined } }, t.definition, { id: tick.target.id, ...(spec.namespace !== undefined && { namespace: spec.namespace }) });
    return r.created;
  } catch (err) {
    // Started earlier from the spec as it was then (the schedule was updated since).
    if (err instanceof IdempotencyKeyConflictError || err instanceof WorkflowIdConflictError) return false;
    throw err;
  }
}

/** Has the target finished? A missing one counts as finished (nothing runs). */
export async function targetFinished(deps: TargetDeps, target: FiredTarget): Promise<boolean> {
  try {
    if (target.kind === 'action') return isFinal((await deps.executions.load(target.id)).snapshot);
    return (await deps.workflows.load(target.id)).snapshot.status === 'done';
  } catch (err) {
    if (err instanceof NotFoundError) return true;
    throw err;
  }
}

/** Cancel an earlier tick's target (overlap policy cancel-previous); harmless when it already ended. */
export async function cancelTarget(deps: TargetDeps, target: FiredTarget, reason: string): Promise<void> {
  try {
    if (target.kind === 'action') await cancelExecution(deps.executions, target.id, reason);
    else await cancelWorkflow({ store: deps.store, runtime: deps.executions }, target.id, reason);
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw err;
  }
}
