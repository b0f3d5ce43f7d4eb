// The execution machine: the only place that decides which event may follow which.
// It is pure: no I/O, no timers, no clock. Every time it keeps comes from the events
// themselves (metadata.occurredAt or a deadline carried as data), so folding a stored
// history today gives exactly the state it gave when the events were appended.
import { and, assertEvent, assign, setup, type SnapshotFrom } from 'xstate';
import { acceptedEventTypes, foldWith } from './fold.ts';
import { stepperOf } from './stepper.ts';
import type { ExecutionEvent, ExecutionEventType } from '../schemas/events.ts';
import {
  backToExecutor,
  contextFromRequest,
  contextProblem,
  dataProblem,
  EXECUTOR,
  mayAppend,
  notOwnerReason,
  stateProblem,
  type ExecutionContext,
  type Owner,
  type RequestedEvent,
} from './execution.rules.ts';

export { EXECUTOR, mayAppend, type ExecutionContext, type Owner } from './execution.rules.ts';

/** Recorded in every appended event's metadata, so replay can tell which rules wrote it. */
export const MACHINE_VERSION = '8';
// 2: the executor may time out a run whose recorded start-to-close deadline passed.
// 3: ExecutionCancelRequested: a cancel reaches a worker-held execution without moving the baton.
// 4: SchedulingStarted records the attempt limit (the action's, capped by the submission's own);
//    OwnershipReclaimed may say worker-restarted.
// 5: tags: ExecutionRequested may carry them, and the running action adds more with ExecutionTagged.
// 6: action versions: a request may pin one, a handoff names the version the attempt runs and
//    must be the pin, and the start must name the handoff's version (absent everywhere: version 1).
// 7: the handoff comes straight from Requested and records the attempt limit itself: the executor
//    no longer appends SchedulingStarted, which only ever went into the same append as the handoff
//    (Requested → Scheduling → Scheduled, still folded in older histories). One event fewer per
//    attempt: in the peers harness's drain (20,000 jobs, concurrency 50) 3,446 / 3,527 → 3,971 /
//    4,226 jobs/s on the Postgres queue and 3,653 / 3,700 → 3,939 / 4,073 on JetStream.
// 8: a baton that comes back before its run started because its worker gave it back, was lost,
//    restarted or stopped (OwnershipReleased, or OwnershipReclaimed worker-lost, worker-restarted,
//    drain or manual, from Scheduled) costs no attempt, up to 3 times an execution: it waits for
//    its next handoff at the same attempt, since the action never ran (with a cancel requested
//    the executor decides, as after any return: it ends it Cancelled). Before, a worker lost
//    between the handoff and the start spent an attempt, and with maxAttempts 1 an execution that
//    never ran was Abandoned. A return an older version wrote is still folded as that version
//    folded it (`unstartedKeepsAttempt`).

// ---------------------------------------------------------------------------

/**
 * An action's context update, with the event's time as updatedAt (every transition moves it). One
 * assign per transition rather than a separate `touch`: each assign copies the context and the
 * snapshot, and xstate's steps were ~13% of the hosts' CPU in `baton bench`.
 */
/**
 * What every final state's context says: no dwell limit, and no retry to come (a reclaim or a
 * retryable failure set retryPending; the executor may then end the execution instead).
 */
const ended = { deadline: null, retryPending: false } as const;

/**
 * Unstarted returns an execution may have without spending an attempt: past them each one spends
 * it, as before version 8, so a handoff that brings its worker down before it can start (a process
 * that dies on it, and comes back under its id) cannot go round for ever.
 */
const MAX_UNSTARTED_RETURNS = 3;

/**
 * In Scheduled, the returns the execution has had that kept their attempt. The baton alternates
 * executor ↔ worker, so `owners` there is 2 × the handoffs so far, and every other return began a
 * new attempt (each retry follows one): kept = handoffs − attempt. Read from what the context
 * already holds, so the read model's row, which resumes the fold, needs no column for it.
 */
const unstartedReturnsOf = (context: ExecutionContext) => context.owners.length / 2 - context.attempt;

/**
 * A return of an unstarted handoff that says nothing against the execution: its worker gave it back
 * (draining), was lost or restarted, stopped (drain), or an operator took it back. A handoff whose
 * schedule-to-start deadline passed on a live worker still spends its attempt, so a worker that
 * takes handoffs and never starts them cannot keep an execution going round for ever.
 */
const notTheHandoffsFault = (event: ExecutionEvent) =>
  event.type === 'OwnershipReleased' || (event.type === 'OwnershipReclaimed' && ['worker-lost', 'worker-restarted', 'drain', 'manual'].includes(event.data.reason));

/** Whether the event names a machine version (a whole number) older than `version`: an event without one is the current version's. */
const writtenBefore = (event: ExecutionEvent, version: number) => {
  const v = event.metadata.machineVersion;
  return v !== undefined && /^\d+$/.test(v) && Number(v) < version;
};

const touched = <U extends Partial<ExecutionContext>>(event: ExecutionEvent, update: U) => ({ updatedAt: event.metadata.occurredAt, ...update });

export const executionMachine = setup({
  types: {
    context: {} as ExecutionContext,
    events: {} as ExecutionEvent,
    input: {} as RequestedEvent,
  },
  guards: {
    mayAppend: ({ context, event }) => mayAppend(context, event),
    fits: ({ context, event }) => dataProblem(context, event) === null,
    /** Version 7 hands off straight from Requested; older versions' machines say no (execution-machine-versions.ts). */
    handsOffFromRequested: () => true,
    /**
     * Version 8 hands an unstarted attempt off again. A return an older version wrote spent its
     * attempt (a retry was then decided and stored after it), and is still folded so: every
     * history stored before the upgrade folds as it did. Older versions' machines say no
     * (execution-machine-versions.ts).
     */
    unstartedKeepsAttempt: ({ context, event }) => !writtenBefore(event, 8) && notTheHandoffsFault(event) && unstartedReturnsOf(context) < MAX_UNSTARTED_RETURNS,
    willRetry: ({ context, event }) =>
      event.type === 'ExecutionFailed' && event.data.retryable && context.attempt < context.maxAttempts,
  },
  actions: {
    startScheduling: assign(({ context, event }) => {
      assertEvent(event, 'SchedulingStarted');
      return touched(event, { maxAttempts: event.data.maxAttempts ?? context.maxAttempts });
    }),
    scheduleRetry: assign(({ event }) => {
      assertEvent(event, 'ExecutionRetryScheduled');
      return touched(event, { attempt: event.data.attempt, retryPending: false, retryAt: event.data.retryAt });
    }),
    handOff: assign(({ context, event }) => {
      assertEvent(event, 'ExecutionHandedOff');
      const owner: Owner = `worker:${event.data.workerId}`;
      return touched(event, {
        maxAttempts: event.data.maxAttempts ?? context.maxAttempts,
        owner,
        workerId: event.data.workerId,
        // Kept only when not 1 (what absent means), so a context has one form per version.
        actionVersion: event.data.actionVersion === 1 ? undefined : event.data.actionVersion,
        deadline: event.data.deadline,
        scheduledAt: event.metadata.occurredAt,
        owners: [...context.owners, owner],
      });
    }),
    start: assign(({ event }) => {
      assertEvent(event, 'ExecutionStarted');
      // Progress belongs to a run; a new run must not inherit the last one's.
      return touched(event, {
        startedAt: event.metadata.occurredAt,
        deadline: event.data.deadline ?? null,
        lastProgressAt: undefined,
        lastProgress: undefined,
        stallTimeoutMs: event.data.stallTimeoutMs,
      });
    }),
    progress: assign(({ event }) => {
      assertEvent(event, 'ExecutionProgressed');
      return touched(event, { lastProgressAt: event.metadata.occurredAt, lastProgress: event.data.details });
    }),
    tag: assign(({ context, event }) => {
      assertEvent(event, 'ExecutionTagged');
      return touched(event, { tags: { ...context.tags, ...event.data.tags } });
    }),
    giveBack: assign(({ context, event }) => touched(event, backToExecutor(context))),
    /** Back before the run started: the same attempt is handed off again, unless a cancel request waits for the executor's decision. */
    giveBackUnstarted: assign(({ context, event }) => touched(event, { ...backToExecutor(context), retryPending: context.cancelRequested !== undefined })),
    failForRetry: assign(({ context, event }) => {
      assertEvent(event, 'ExecutionFailed');
      return touched(event, { ...backToExecutor(context), error: event.data.error });
    }),
    complete: assign(({ event }) => {
      assertEvent(event, 'ExecutionCompleted');
      return touched(event, { result: event.data.result, finishedAt: event.metadata.occurredAt, ...ended });
    }),
    fail: assign(({ event }) => {
      assertEvent(event, 'ExecutionFailed');
      return touched(event, { error: event.data.error, finishedAt: event.metadata.occurredAt, ...ended });
    }),
    requestCancel: assign(({ event }) => {
      assertEvent(event, 'ExecutionCancelRequested');
      return touched(event, { cancelRequested: event.data.reason });
    }),
    cancel: assign(({ event }) => {
      assertEvent(event, 'ExecutionCancelled');
      return touched(event, { cancelReason: event.data.reason, finishedAt: event.metadata.occurredAt, ...ended });
    }),
    timeOut: assign(({ event }) => {
      assertEvent(event, 'ExecutionTimedOut');
      return touched(event, { timedOutLimit: event.data.limit, finishedAt: event.metadata.occurredAt, ...ended });
    }),
    abandon: assign(({ event }) => {
      assertEvent(event, 'ExecutionAbandoned');
      return touched(event, { abandonReason: event.data.reason, finishedAt: event.metadata.occurredAt, ...ended });
    }),
  },
}).createMachine({
  id: 'execution',
  initial: 'Requested',
  context: ({ input }) => contextFromRequest(input),
  // Every transition is guarded by the ownership rule; `fits` adds the data checks.
  states: {
    Requested: {
      on: {
        SchedulingStarted: { guard: and(['mayAppend', 'fits']), target: 'Scheduling', actions: 'startScheduling' },
        ExecutionHandedOff: { guard: and(['mayAppend', 'fits', 'handsOffFromRequested']), target: 'Scheduled', actions: 'handOff' },
        ExecutionRetryScheduled: {
          guard: and(['mayAppend', 'fits']),
          target: 'Requested',
          actions: 'scheduleRetry',
        },
        ExecutionCancelled: { guard: 'mayAppend', target: 'Cancelled', actions: 'cancel' },
        ExecutionAbandoned: { guard: 'mayAppend', target: 'Abandoned', actions: 'abandon' },
      },
    },
    // Only histories written before version 7 pass through here (SchedulingStarted, then the handoff in the same append).
    Scheduling: {
      on: {
        ExecutionHandedOff: { guard: and(['mayAppend', 'fits']), target: 'Scheduled', actions: 'handOff' },
        ExecutionCancelled: { guard: 'mayAppend', target: 'Cancelled', actions: 'cancel' },
      },
    },
    Scheduled: {
      on: {
        ExecutionStarted: { guard: and(['mayAppend', 'fits']), target: 'Running', actions: 'start' },
        ExecutionCancelRequested: { guard: and(['mayAppend', 'fits']), actions: 'requestCancel' },
        ExecutionCancelled: { guard: 'mayAppend', target: 'Cancelled', actions: 'cancel' },
        OwnershipReleased: [
          { guard: and(['mayAppend', 'unstartedKeepsAttempt']), target: 'Requested', actions: 'giveBackUnstarted' },
          { guard: 'mayAppend', target: 'Requested', actions: 'giveBack' },
        ],
        OwnershipReclaimed: [
          { guard: and(['mayAppend', 'fits', 'unstartedKeepsAttempt']), target: 'Requested', actions: 'giveBackUnstarted' },
          { guard: and(['mayAppend', 'fits']), target: 'Requested', actions: 'giveBack' },
        ],
      },
    },
    Running: {
      on: {
        ExecutionProgressed: { guard: 'mayAppend', actions: 'progress' },
        ExecutionTagged: { guard: and(['mayAppend', 'fits']), actions: 'tag' },
        ExecutionCompleted: { guard: 'mayAppend', target: 'Completed', actions: 'complete' },
        ExecutionFailed: [
          { guard: and(['mayAppend', 'willRetry']), target: 'Requested', actions: 'failForRetry' },
          { guard: 'mayAppend', target: 'Failed', actions: 'fail' },
        ],
        ExecutionCancelled: { guard: 'mayAppend', target: 'Cancelled', actions: 'cancel' },
        ExecutionCancelRequested: { guard: and(['mayAppend', 'fits']), actions: 'requestCancel' },
        ExecutionTimedOut: { guard: and(['mayAppend', 'fits']), target: 'TimedOut', actions: 'timeOut' },
        OwnershipReleased: { guard: 'mayAppend', target: 'Requested', actions: 'giveBack' },
        OwnershipReclaimed: {
          guard: and(['mayAppend', 'fits', ({ event }) => stateProblem('Running', event) === null]),
          target: 'Requested',
          actions: 'giveBack',
        },
      },
    },
    Completed: { type: 'final' },
    Failed: { type: 'final' },
    Cancelled: { type: 'final' },
    TimedOut: { type: 'final' },
    Abandoned: { type: 'final' },
  },
});

export type ExecutionSnapshot = SnapshotFrom<typeof executionMachine>;
export type ExecutionStatus = ExecutionSnapshot['value'];

// Read from the machine definition once, so the classifier and allowedEventTypes cannot
// drift from the config.
const acceptedTypes = acceptedEventTypes(executionMachine) as Map<ExecutionStatus, readonly string[]>;

/** Every state, in definition order. */
export const executionStatuses: readonly ExecutionStatus[] = [...acceptedTypes.keys()];

/** The states nothing leaves, read from the definition. */
export const finalStatuses: ReadonlySet<string> = new Set(
  Object.entries(executionMachine.root.states)
    .filter(([, node]) => node.type === 'final')
    .map(([status]) => status),
);

export function statusOf(snapshot: ExecutionSnapshot): ExecutionStatus {
  return snapshot.value;
}

export function isFinal(snapshot: ExecutionSnapshot): boolean {
  return snapshot.status === 'done';
}

// Deciding and folding go through one stepper (stepper.ts), never a throwaway actor per step.
/** Any valid ExecutionRequested: what a stepper's inert actor is built from (candidate machines take it too). */
export const SAMPLE_REQUEST: RequestedEvent = {
  type: 'ExecutionRequested',
  data: { action: 'sample.action', input: null, maxAttempts: 1 },
  metadata: { by: EXECUTOR, occurredAt: '2000-01-01T00:00:00.000Z' },
};
const step = stepperOf(executionMachine, SAMPLE_REQUEST);

export function startExecution(requested: ExecutionEvent): ExecutionSnapshot {
  if (requested.type !== 'ExecutionRequested') {
    throw new Error(`an execution starts with ExecutionRequested, not ${requested.type}`);
  }
  return step.initial(requested);
}

export type Rejection = 'AlreadyFinal' | 'NotOwner' | 'InvalidTransition';
export type Decision =
  | { ok: true; snapshot: ExecutionSnapshot }
  | { ok: false; rejection: Rejection; reason: string };

/**
 * Applies `event` if the machine takes it. A refusal is classified, in this order:
 * AlreadyFinal (nothing moves a finished execution); InvalidTransition when the state
 * has no transition for this event type at all (so "ExecutionStarted in Requested" is
 * out of order whoever sends it); NotOwner when the sender may not append; otherwise
 * InvalidTransition naming the data that does not fit (attempt, worker, retry budget).
 */
export function decideExecution(snapshot: ExecutionSnapshot, event: ExecutionEvent): Decision {
  // No `snapshot.can(event)` first: it evaluates the guards that the step evaluates again (a fifth
  // of a decide). A step that takes no transition returns the very snapshot it was given, and every
  // transition here assigns, so a taken one never does.
  const next = step.next(snapshot, event);
  if (next !== snapshot) return { ok: true, snapshot: next };
  return { ok: false, ...classifyRefusal(snapshot, event) };
}

function classifyRefusal(
  snapshot: ExecutionSnapshot,
  event: ExecutionEvent,
): { rejection: Rejection; reason: string } {
  const status = statusOf(snapshot);
  const { context } = snapshot;
  if (isFinal(snapshot)) {
    return { rejection: 'AlreadyFinal', reason: `execution is already ${status}; it accepts no further events` };
  }
  if (event.type === 'ExecutionRequested') {
    return { rejection: 'InvalidTransition', reason: 'ExecutionRequested is only ever the first event of an execution' };
  }
  if (!acceptedTypes.get(status)?.includes(event.type)) {
    return { rejection: 'InvalidTransition', reason: `${event.type} is not allowed in state ${status}` };
  }
  if (!mayAppend(context, event)) {
    return { rejection: 'NotOwner', reason: notOwnerReason(context, event) };
  }
  return {
    rejection: 'InvalidTransition',
    reason: dataProblem(context, event) ?? stateProblem(status, event) ?? `${event.type} is not allowed in state ${status}`,
  };
}

/**
 * A snapshot as JSON for the snapshot store (xstate's persisted form). Restored with
 * restoreExecution only by the machine version that wrote it (the store keeps the version).
 */
export function persistExecution(snapshot: ExecutionSnapshot): unknown {
  return step.persist(snapshot);
}

export function restoreExecution(persisted: unknown): ExecutionSnapshot {
  return step.restore(persisted);
}

/** Folds a stored history (see foldWith); it must start with ExecutionRequested. */
export function foldExecution(events: readonly ExecutionEvent[]): ExecutionSnapshot {
  const [first, ...rest] = events;
  if (first === undefined) throw new Error('cannot fold an empty history: event 0 must be ExecutionRequested');
  if (first.type !== 'ExecutionRequested') {
    throw new Error(`event 0 (${first.type}) refused: a history must start with ExecutionRequested`);
  }
  return foldWith(step, startExecution(first), rest, (snapshot, event) => {
    const decision = decideExecution(snapshot, event);
    return decision.ok ? 'the machine did not take it' : `${decision.rejection}: ${decision.reason}`;
  }, first.type);
}

/**
 * Event types the machine could accept next, each from the party the ownership rule
 * permits (the owner; the executor for OwnershipReclaimed). Context-only conditions are
 * applied (a pending retry blocks SchedulingStarted; ExecutionRetryScheduled needs a
 * pending retry and attempts left). Conditions on the event's own data are not: an
 * ExecutionHandedOff, ExecutionStarted or OwnershipReclaimed must still name the current
 * attempt (and worker), which only the event can tell.
 */
export function allowedEventTypes(snapshot: ExecutionSnapshot): ExecutionEventType[] {
  if (isFinal(snapshot)) return [];
  const types = (acceptedTypes.get(statusOf(snapshot)) ?? []) as readonly ExecutionEventType[];
  return types.filter((type) => contextProblem(snapshot.context, type) === null);
}
