// The workflow machine: which orchestration event may follow which, for one workflow's stream.
// Pure like the execution machine: no I/O, no clock. `workflowPlan` reads a snapshot and says
// what the orchestrating executor should do next (schedule ready steps, cancel running ones,
// end the workflow); the executor appends the matching events, so a successor executor reading
// the same stream reaches the same plan.
import { assertEvent, assign, setup, type SnapshotFrom } from 'xstate';
import { stepperOf } from './stepper.ts';
import type { WorkflowEvent, WorkflowEventOf, StepOutcome } from '../schemas/workflow-events.ts';
import type { WorkflowDefinition, WorkflowStep } from '../schemas/workflow.ts';

export const WORKFLOW_MACHINE_VERSION = '2';
// 2: a workflow whose every step completed ends Completed also after a cancel request (the last
//    step finished before the cancel reached it), as an execution that finishes first stays
//    finished. Every version-1 history folds the same (it never holds that transition).
//    A version-1 build cannot fold a version-2 history that holds it: upgrades are not rolling.

export type StepStatus = 'pending' | 'scheduled' | 'completed' | 'failed';

export interface StepState {
  status: StepStatus;
  executionId?: string;
  outcome?: StepOutcome;
  result?: unknown;
}

export interface WorkflowContext {
  definition: WorkflowDefinition;
  steps: Record<string, StepState>;
  cancelReason?: string;
  startedAt: string;
  finishedAt?: string;
  /** Where it and its steps' executions live, when it was started in a namespace other than `default`. */
  namespace?: string;
}

type StartedEvent = WorkflowEventOf<'WorkflowStarted'>;

const stepOf = (c: WorkflowContext, id: string): WorkflowStep | undefined => c.definition.steps.find((s) => s.id === id);
const statusOf = (c: WorkflowContext, id: string): StepStatus | undefined => c.steps[id]?.status;
const anyFailed = (c: WorkflowContext) => Object.values(c.steps).some((s) => s.status === 'failed');
const inFlight = (c: WorkflowContext) => Object.entries(c.steps).filter(([, s]) => s.status === 'scheduled').map(([id]) => id);

/** A pending step whose parents all completed. */
export function isReady(c: WorkflowContext, step: WorkflowStep): boolean {
  return statusOf(c, step.id) === 'pending' && step.dependsOn.every((p) => statusOf(c, p) === 'completed');
}

/** A pending step that can never run: some ancestor failed. */
export function isBlocked(c: WorkflowContext, step: WorkflowStep, seen = new Set<string>()): boolean {
  if (seen.has(step.id)) return false;
  seen.add(step.id);
  return step.dependsOn.some((p) => {
    if (statusOf(c, p) === 'failed') return true;
    const parent = stepOf(c, p);
    return parent !== undefined && statusOf(c, p) === 'pending' && isBlocked(c, parent, seen);
  });
}

/** May new steps start? Not while cancelling, nor after a failure under fail-fast. */
const mayStartSteps = (c: WorkflowContext, cancelling: boolean) => !cancelling && !(c.definition.onFailure === 'fail-fast' && anyFailed(c));

export const workflowMachine = setup({
  types: {
    context: {} as WorkflowContext,
    events: {} as WorkflowEvent,
    input: {} as StartedEvent,
  },
  guards: {
    stepReady: ({ context, event }) => {
      assertEvent(event, 'WorkflowStepScheduled');
      const step = stepOf(context, event.data.stepId);
      return step !== undefined && isReady(context, step) && mayStartSteps(context, false);
    },
    stepScheduled: ({ context, event }) => {
      assertEvent(event, 'WorkflowStepFinished');
      const s = context.steps[event.data.stepId];
      return s?.status === 'scheduled' && s.executionId === event.data.executionId;
    },
    allCompleted: ({ context }) => Object.values(context.steps).every((s) => s.status === 'completed'),
    failedAndSettled: ({ context }) => anyFailed(context) && inFlight(context).length === 0 && !context.definition.steps.some((s) => isReady(context, s) && mayStartSteps(context, false)),
    settled: ({ context }) => inFlight(context).length === 0,
  },
  actions: {
    schedule: assign(({ context, event }) => {
      assertEvent(event, 'WorkflowStepScheduled');
      return { steps: { ...context.steps, [event.data.stepId]: { status: 'scheduled' as const, executionId: event.data.executionId } } };
    }),
    finish: assign(({ context, event }) => {
      assertEvent(event, 'WorkflowStepFinished');
      const { stepId, executionId, outcome, result } = event.data;
      const status: StepStatus = outcome === 'Completed' ? 'completed' : 'failed';
      return { steps: { ...context.steps, [stepId]: { status, executionId, outcome, ...(result !== undefined && { result }) } } };
    }),
    requestCancel: assign(({ event }) => {
      assertEvent(event, 'WorkflowCancelRequested');
      return { cancelReason: event.data.reason };
    }),
    end: assign(({ event }) => ({ finishedAt: event.metadata.occurredAt })),
  },
}).createMachine({
  id: 'workflow',
  initial: 'Running',
  context: ({ input }) => ({
    definition: input.data.definition,
    steps: Object.fromEntries(input.data.definition.steps.map((s) => [s.id, { status: 'pending' as const }])),
    startedAt: input.metadata.occurredAt,
    ...(input.data.namespace !== undefined && { namespace: input.data.namespace }),
  }),
  states: {
    Running: {
      on: {
        WorkflowStepScheduled: { guard: 'stepReady', actions: 'schedule' },
        WorkflowStepFinished: { guard: 'stepScheduled', actions: 'finish' },
        WorkflowCancelRequested: { target: 'Cancelling', actions: 'requestCancel' },
        WorkflowCompleted: { guard: 'allCompleted', target: 'Completed', actions: 'end' },
        WorkflowFailed: { guard: 'failedAndSettled', target: 'Failed', actions: 'end' },
      },
    },
    // No new steps; the running ones are being cancelled. Ends once none is left in flight:
    // Cancelled, or Completed when every step completed anyway (version 2).
    Cancelling: {
      on: {
        WorkflowStepFinished: { guard: 'stepScheduled', actions: 'finish' },
        WorkflowCompleted: { guard: 'allCompleted', target: 'Completed', actions: 'end' },
        WorkflowCancelled: { guard: 'settled', target: 'Cancelled', actions: 'end' },
      },
    },
    Completed: { type: 'final' },
    Failed: { type: 'final' },
    Cancelled: { type: 'final' },
  },
});

export type WorkflowSnapshot = SnapshotFrom<typeof workflowMachine>;
export type WorkflowStatus = WorkflowSnapshot['value'];

// Deciding and folding go through one stepper (stepper.ts), never a throwaway actor per step.
const SAMPLE_START: WorkflowEventOf<'WorkflowStarted'> = {
  type: 'WorkflowStarted',
  data: { definition: { onFailure: 'fail-fast', steps: [{ id: 'sample', action: 'sample.action', dependsOn: [] }] } },
  metadata: { by: 'executor', occurredAt: '2000-01-01T00:00:00.000Z' },
};
const step = stepperOf(workflowMachine, SAMPLE_START);

export function startWorkflow(started: WorkflowEvent): WorkflowSnapshot {
  if (started.type !== 'WorkflowStarted') throw new Error(`a workflow starts with WorkflowStarted, not ${started.type}`);
  return step.initial(started);
}

export type WorkflowDecision = { ok: true; snapshot: WorkflowSnapshot } | { ok: false; reason: string };

export function decideWorkflow(snapshot: WorkflowSnapshot, event: WorkflowEvent): WorkflowDecision {
  if (snapshot.can(event)) return { ok: true, snapshot: step.next(snapshot, event) };
  if (snapshot.status === 'done') return { ok: false, reason: `workflow is already ${snapshot.value}` };
  return { ok: false, reason: `${event.type} does not fit workflow state ${snapshot.value}${'stepId' in event.data ? ` (step ${event.data.stepId} is ${snapshot.context.steps[event.data.stepId]?.status ?? 'unknown'})` : ''}` };
}

/** Fold a stored workflow stream; throws naming the first event that does not fit. */
export function foldWorkflow(events: readonly WorkflowEvent[]): WorkflowSnapshot {
  const [first, ...rest] = events;
  if (!first) throw new Error('cannot fold an empty workflow history');
  let snapshot = startWorkflow(first);
  rest.forEach((event, i) => {
    const d = decideWorkflow(snapshot, event);
    if (!d.ok) throw new Error(`workflow event ${i + 1} (${event.type}) refused: ${d.reason}`);
    snapshot = d.snapshot;
  });
  return snapshot;
}

export interface WorkflowPlan {
  /** Steps to start now, in definition order. */
  schedule: WorkflowStep[];
  /** Executions of running steps to cancel (fail-fast after a failure, or a cancel request). */
  cancel: { stepId: string; executionId: string }[];
  /** The event that ends the workflow, once it may. */
  end?: WorkflowEventOf<'WorkflowCompleted' | 'WorkflowFailed' | 'WorkflowCancelled'>['type'];
  /** Steps that will never run because an ancestor failed (continue policy) or the workflow stops. */
  skipped: string[];
}

/** What the orchestrator should do next for this workflow. Pure: the same snapshot, the same plan. */
export function workflowPlan(snapshot: WorkflowSnapshot): WorkflowPlan {
  const c = snapshot.context;
  const empty: WorkflowPlan = { schedule: [], cancel: [], skipped: [] };
  if (snapshot.status === 'done') return empty;
  const cancelling = snapshot.value === 'Cancelling';
  const starting = mayStartSteps(c, cancelling);
  const running = inFlight(c).map((stepId) => ({ stepId, executionId: c.steps[stepId]!.executionId! }));
  const pending = c.definition.steps.filter((s) => statusOf(c, s.id) === 'pending');
  const schedule = starting ? pending.filter((s) => isReady(c, s)) : [];
  const skipped = pending.filter((s) => !starting || isBlocked(c, s)).map((s) => s.id);
  const cancel = cancelling || !starting ? running : [];
  let end: WorkflowPlan['end'];
  if (cancelling) end = Object.values(c.steps).every((s) => s.status === 'completed') ? 'WorkflowCompleted' : running.length === 0 ? 'WorkflowCancelled' : undefined;
  else if (Object.values(c.steps).every((s) => s.status === 'completed')) end = 'WorkflowCompleted';
  else if (anyFailed(c) && running.length === 0 && schedule.length === 0) end = 'WorkflowFailed';
  return { schedule, cancel, skipped, ...(end && { end }) };
}

/** Ids of the steps that failed, for WorkflowFailed. */
export const failedSteps = (snapshot: WorkflowSnapshot) => Object.entries(snapshot.context.steps).filter(([, s]) => s.status === 'failed').map(([id]) => id);
