// The execution machine: the only place that decides which event may follow which.
// It is pure: no I/O, no timers, no clock. Every time it keeps comes from the events
// themselves (metadata.occurredAt or a deadline carried as data), so folding a stored
// history today gives exactly the state it gave when the events were appended.
import { and, assertEvent, assign, setup, type SnapshotFrom } from 'xstate';
import { acceptedEventTypes, foldWith } from './fold.ts';
import { stepperOf } from './stepper.ts';
import { TAG_LIMITS } from '../src/input/tags.ts';
import {
  WorkerRef,
  type ErrorInfo,
  type ExecutionEvent,
  type ExecutionEventOf,
  type ExecutionEventType,
} from '../schemas/events.ts';

/** Recorded in every appended event's metadata, so replay can tell which rules wrote it. */
export const MACHINE_VERSION = '6';
// 2: the executor may time out a run whose recorded start-to-close deadline passed.
// 3: ExecutionCancelRequested: a cancel reaches a worker-held execution without moving the baton.
// 4: SchedulingStarted records the attempt limit (the action's, capped by the submission's own);
//    OwnershipReclaimed may say worker-restarted.
// 5: tags: ExecutionRequested may carry them, and the running action adds more with ExecutionTagged.
// 6: action versions: a request may pin one, a handoff names the version the attempt runs and
//    must be the pin, and the start must name the handoff's version (absent everywhere: version 1).

export const EXECUTOR = 'executor' as const;
export type Owner = typeof EXECUTOR | `worker:${string}`;

type RequestedEvent = ExecutionEventOf<'ExecutionRequested'>;
type Json = RequestedEvent['data']['input'];
type TimeoutLimit = ExecutionEventOf<'ExecutionTimedOut'>['data']['limit'];

export interface ExecutionContext {
  action: string;
  input: Json;
  /** Who may append the next lifecycle event (see `mayAppend`). */
  owner: Owner;
  /** The worker holding (or, after a final state, last holding) the baton; null while the executor owns. */
  workerId: string | null;
  /** 1-based; a new attempt starts only with ExecutionRetryScheduled. */
  attempt: number;
  /**
   * The attempt limit as known now: the request's (the submission's own, or the submitter's
   * default), then whatever each SchedulingStarted recorded (the action's, capped by the
   * submission's own).
   */
  maxAttempts: number;
  /** The limit the submission itself named, if it named one: a recorded limit may not exceed it. */
  submittedMaxAttempts?: number;
  idempotencyKey?: string;
  priority?: number;
  parentId?: string;
  workflowId?: string;
  /** The action version the submission pinned: every handoff must name it. */
  pinnedVersion?: number;
  /** The version the current (or last) attempt was handed off to run, when the handoff named one other than 1 (absent: version 1). */
  actionVersion?: number;
  /** The submitter's tags merged with those the running action added (ExecutionTagged); absent when none. */
  tags?: Record<string, string>;
  result: Json | undefined;
  /** The last error an attempt reported. */
  error: ErrorInfo | undefined;
  /**
   * Back in Requested after a worker gave the baton back (failure, release, reclaim): the
   * executor must decide (ExecutionRetryScheduled or ExecutionAbandoned) before scheduling.
   */
  retryPending: boolean;
  retryAt?: string;
  /** The dwell deadline of the current state: schedule-to-start in Scheduled, start-to-close in Running. */
  deadline: string | null;
  lastProgressAt?: string;
  lastProgress?: Json;
  /** The current run is stalled once it goes this long without progress (see ExecutionStarted). */
  stallTimeoutMs?: number;
  requestedAt: string;
  scheduledAt?: string;
  startedAt?: string;
  finishedAt?: string;
  /** occurredAt of the last accepted event. */
  updatedAt: string;
  /** Every owner in order, without consecutive repeats: the baton's route. */
  owners: Owner[];
  cancelReason?: string;
  /** The reason of an ExecutionCancelRequested: set once, the execution may only end as Cancelled (or finish first). */
  cancelRequested?: string;
  timedOutLimit?: TimeoutLimit;
  abandonReason?: string;
}

// ---------------------------------------------------------------------------
// Rules shared by the guards, the refusal classifier and allowedEventTypes, so the three
// can never disagree.

/**
 * The ownership rule, the one place it is written. Only the owner may append, with two
 * exceptions, both because the worker may be dead and cannot be asked: the executor may
 * reclaim from a worker, and it may time out a run whose recorded start-to-close deadline
 * passed (dataProblem checks it names that deadline). Whether there is anything to reclaim
 * or time out is a state question, not an ownership one. A cancel request is not a move: the
 * executor records it while a worker holds the baton, and the owner acts on it.
 */
export function mayAppend(context: ExecutionContext, event: ExecutionEvent): boolean {
  if (event.type === 'OwnershipReclaimed' || event.type === 'ExecutionCancelRequested') return event.metadata.by === EXECUTOR;
  if (event.type === 'ExecutionTimedOut' && event.metadata.by === EXECUTOR) return true;
  return event.metadata.by === context.owner;
}

function notOwnerReason(context: ExecutionContext, event: ExecutionEvent): string {
  if (event.type === 'OwnershipReclaimed') {
    return `only the executor may reclaim ownership, not ${event.metadata.by}`;
  }
  if (event.type === 'ExecutionCancelRequested') {
    return `only the executor records a cancel request, not ${event.metadata.by}`;
  }
  return `${event.metadata.by} is not the owner (owner is ${context.owner})`;
}

/** Conditions on context only, so allowedEventTypes can apply them without an event. */
function contextProblem(context: ExecutionContext, type: ExecutionEventType): string | null {
  switch (type) {
    case 'SchedulingStarted':
      return context.retryPending
        ? 'a retry decision is pending: ExecutionRetryScheduled or ExecutionAbandoned must come first'
        : null;
    case 'ExecutionRetryScheduled':
      if (!context.retryPending) return 'ExecutionRetryScheduled needs a pending retry, and none is pending';
      if (context.cancelRequested !== undefined) return `a cancel was requested (${context.cancelRequested}): ExecutionCancelled must come next, not a retry`;
      return context.attempt >= context.maxAttempts
        ? `the next attempt (${context.attempt + 1}) exceeds maxAttempts ${context.maxAttempts}`
        : null;
    case 'ExecutionStarted':
      return context.cancelRequested !== undefined
        ? `a cancel was requested before the run started (${context.cancelRequested}): the owner must append ExecutionCancelled`
        : null;
    case 'ExecutionCancelRequested':
      return context.cancelRequested !== undefined ? `a cancel was already requested (${context.cancelRequested})` : null;
    default:
      return null;
  }
}

/** Everything besides state and ownership that can make an event not fit; null when it fits. */
function dataProblem(context: ExecutionContext, event: ExecutionEvent): string | null {
  const problem = contextProblem(context, event.type);
  if (problem !== null) return problem;
  switch (event.type) {
    case 'SchedulingStarted': {
      const limit = event.data.maxAttempts;
      if (limit === undefined) return null;
      if (context.submittedMaxAttempts !== undefined && limit > context.submittedMaxAttempts) {
        return `SchedulingStarted maxAttempts ${limit} exceeds the submission's own limit ${context.submittedMaxAttempts}: an action's limit may lower a submission's, never raise it`;
      }
      return limit < context.attempt ? `SchedulingStarted maxAttempts ${limit} is below the current attempt ${context.attempt}` : null;
    }
    case 'ExecutionHandedOff': {
      const { attempt, workerId } = event.data;
      if (attempt !== context.attempt) {
        return `ExecutionHandedOff attempt ${attempt} does not match current attempt ${context.attempt}`;
      }
      const version = versionOf(event.data.actionVersion);
      if (context.pinnedVersion !== undefined && version !== context.pinnedVersion) {
        return `ExecutionHandedOff names action version ${version} but the execution is pinned to version ${context.pinnedVersion}`;
      }
      // A worker whose ref no event could carry could never move the execution on.
      if (!WorkerRef.safeParse(`worker:${workerId}`).success) {
        return `ExecutionHandedOff workerId "${workerId}" does not make a valid worker ref`;
      }
      return null;
    }
    case 'ExecutionTagged': {
      const merged = Object.keys({ ...context.tags, ...event.data.tags }).length;
      return merged <= TAG_LIMITS.maxTags ? null : `ExecutionTagged would give the execution ${merged} tags; at most ${TAG_LIMITS.maxTags}`;
    }
    case 'ExecutionStarted': {
      if (event.data.attempt !== context.attempt) {
        return `ExecutionStarted attempt ${event.data.attempt} does not match current attempt ${context.attempt}`;
      }
      const runs = versionOf(event.data.actionVersion);
      const handed = versionOf(context.actionVersion);
      return runs === handed ? null : `ExecutionStarted runs action version ${runs} but attempt ${context.attempt} was handed off for version ${handed}`;
    }
    case 'OwnershipReclaimed': {
      const { workerId, attempt } = event.data;
      if (workerId !== context.workerId) {
        return `OwnershipReclaimed names worker ${workerId} but ${context.workerId ?? 'no worker'} holds the execution`;
      }
      if (attempt !== context.attempt) {
        return `OwnershipReclaimed attempt ${attempt} does not match current attempt ${context.attempt}`;
      }
      return null;
    }
    case 'ExecutionRetryScheduled':
      return event.data.attempt === context.attempt + 1
        ? null
        : `ExecutionRetryScheduled attempt ${event.data.attempt} must be ${context.attempt + 1} (current attempt ${context.attempt})`;
    case 'ExecutionTimedOut': {
      // The owner knows its own limits; the executor may only enforce the one the history holds.
      if (event.metadata.by !== EXECUTOR) return null;
      if (event.data.limit !== 'start-to-close') return `the executor may only enforce a start-to-close deadline, not a ${event.data.limit} limit`;
      if (context.deadline === null) return 'no start-to-close deadline was recorded for this run';
      return Date.parse(event.data.deadline) === Date.parse(context.deadline)
        ? null
        : `ExecutionTimedOut deadline ${event.data.deadline} is not the run's recorded deadline ${context.deadline}`;
    }
    default:
      return null;
  }
}

/**
 * Conditions that depend on the state the event arrives in. A schedule-to-start reclaim is
 * decided on seeing Scheduled past its deadline; if the worker started meanwhile, the reclaim
 * must lose the race, or a late start and a reclaim could both win.
 */
function stateProblem(status: string, event: ExecutionEvent): string | null {
  if (event.type === 'OwnershipReclaimed' && event.data.reason === 'schedule-to-start' && status !== 'Scheduled') {
    return `a schedule-to-start reclaim is only valid before the worker starts (state is ${status})`;
  }
  return null;
}

/** An event's or the context's action version: absent means 1, the version of an action that declares none. */
const versionOf = (v: number | undefined): number => v ?? 1;

/** The baton goes back to the executor, which must now retry or abandon. */
const backToExecutor = (context: ExecutionContext) => ({
  owner: EXECUTOR,
  workerId: null,
  retryPending: true,
  deadline: null,
  // Ownership only ever alternates executor ↔ worker, so appending never repeats.
  owners: [...context.owners, EXECUTOR],
});

function contextFromRequest(event: RequestedEvent): ExecutionContext {
  const { data, metadata } = event;
  return {
    action: data.action,
    input: data.input,
    owner: EXECUTOR,
    workerId: null,
    attempt: 1,
    maxAttempts: data.maxAttempts,
    // Only present keys, so a context survives a JSON round trip unchanged.
    ...(data.maxAttemptsIsDefault !== true && { submittedMaxAttempts: data.maxAttempts }),
    ...(data.idempotencyKey !== undefined && { idempotencyKey: data.idempotencyKey }),
    ...(data.priority !== undefined && { priority: data.priority }),
    ...(data.parentId !== undefined && { parentId: data.parentId }),
    ...(data.workflowId !== undefined && { workflowId: data.workflowId }),
    ...(data.actionVersion !== undefined && { pinnedVersion: data.actionVersion }),
    ...(data.tags !== undefined && Object.keys(data.tags).length > 0 && { tags: { ...data.tags } }),
    result: undefined,
    error: undefined,
    retryPending: false,
    deadline: null,
    requestedAt: metadata.occurredAt,
    updatedAt: metadata.occurredAt,
    owners: [EXECUTOR],
  };
}

// ---------------------------------------------------------------------------

export const executionMachine = setup({
  types: {
    context: {} as ExecutionContext,
    events: {} as ExecutionEvent,
    input: {} as RequestedEvent,
  },
  guards: {
    mayAppend: ({ context, event }) => mayAppend(context, event),
    fits: ({ context, event }) => dataProblem(context, event) === null,
    willRetry: ({ context, event }) =>
      event.type === 'ExecutionFailed' && event.data.retryable && context.attempt < context.maxAttempts,
  },
  actions: {
    touch: assign({ updatedAt: ({ event }) => event.metadata.occurredAt }),
    startScheduling: assign(({ context, event }) => {
      assertEvent(event, 'SchedulingStarted');
      return { maxAttempts: event.data.maxAttempts ?? context.maxAttempts };
    }),
    scheduleRetry: assign(({ event }) => {
      assertEvent(event, 'ExecutionRetryScheduled');
      return { attempt: event.data.attempt, retryPending: false, retryAt: event.data.retryAt };
    }),
    handOff: assign(({ context, event }) => {
      assertEvent(event, 'ExecutionHandedOff');
      const owner: Owner = `worker:${event.data.workerId}`;
      return {
        owner,
        workerId: event.data.workerId,
        // Kept only when not 1 (what absent means), so a context has one form per version.
        actionVersion: event.data.actionVersion === 1 ? undefined : event.data.actionVersion,
        deadline: event.data.deadline,
        scheduledAt: event.metadata.occurredAt,
        owners: [...context.owners, owner],
      };
    }),
    start: assign(({ event }) => {
      assertEvent(event, 'ExecutionStarted');
      // Progress belongs to a run; a new run must not inherit the last one's.
      return {
        startedAt: event.metadata.occurredAt,
        deadline: event.data.deadline ?? null,
        lastProgressAt: undefined,
        lastProgress: undefined,
        stallTimeoutMs: event.data.stallTimeoutMs,
      };
    }),
    progress: assign(({ event }) => {
      assertEvent(event, 'ExecutionProgressed');
      return { lastProgressAt: event.metadata.occurredAt, lastProgress: event.data.details };
    }),
    tag: assign(({ context, event }) => {
      assertEvent(event, 'ExecutionTagged');
      return { tags: { ...context.tags, ...event.data.tags } };
    }),
    giveBack: assign(({ context }) => backToExecutor(context)),
    failForRetry: assign(({ context, event }) => {
      assertEvent(event, 'ExecutionFailed');
      return { ...backToExecutor(context), error: event.data.error };
    }),
    // Final states have no dwell limit, hence deadline: null.
    complete: assign(({ event }) => {
      assertEvent(event, 'ExecutionCompleted');
      return { result: event.data.result, finishedAt: event.metadata.occurredAt, deadline: null };
    }),
    fail: assign(({ event }) => {
      assertEvent(event, 'ExecutionFailed');
      return { error: event.data.error, finishedAt: event.metadata.occurredAt, deadline: null };
    }),
    requestCancel: assign(({ event }) => {
      assertEvent(event, 'ExecutionCancelRequested');
      return { cancelRequested: event.data.reason };
    }),
    cancel: assign(({ event }) => {
      assertEvent(event, 'ExecutionCancelled');
      return { cancelReason: event.data.reason, finishedAt: event.metadata.occurredAt, deadline: null };
    }),
    timeOut: assign(({ event }) => {
      assertEvent(event, 'ExecutionTimedOut');
      return { timedOutLimit: event.data.limit, finishedAt: event.metadata.occurredAt, deadline: null };
    }),
    abandon: assign(({ event }) => {
      assertEvent(event, 'ExecutionAbandoned');
      return { abandonReason: event.data.reason, finishedAt: event.metadata.occurredAt, deadline: null };
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
        SchedulingStarted: { guard: and(['mayAppend', 'fits']), target: 'Scheduling', actions: ['touch', 'startScheduling'] },
        ExecutionRetryScheduled: {
          guard: and(['mayAppend', 'fits']),
          target: 'Requested',
          actions: ['touch', 'scheduleRetry'],
        },
        ExecutionCancelled: { guard: 'mayAppend', target: 'Cancelled', actions: ['touch', 'cancel'] },
        ExecutionAbandoned: { guard: 'mayAppend', target: 'Abandoned', actions: ['touch', 'abandon'] },
      },
    },
    Scheduling: {
      on: {
        ExecutionHandedOff: { guard: and(['mayAppend', 'fits']), target: 'Scheduled', actions: ['touch', 'handOff'] },
        ExecutionCancelled: { guard: 'mayAppend', target: 'Cancelled', actions: ['touch', 'cancel'] },
      },
    },
    Scheduled: {
      on: {
        ExecutionStarted: { guard: and(['mayAppend', 'fits']), target: 'Running', actions: ['touch', 'start'] },
        ExecutionCancelRequested: { guard: and(['mayAppend', 'fits']), actions: ['touch', 'requestCancel'] },
        ExecutionCancelled: { guard: 'mayAppend', target: 'Cancelled', actions: ['touch', 'cancel'] },
        OwnershipReleased: { guard: 'mayAppend', target: 'Requested', actions: ['touch', 'giveBack'] },
        OwnershipReclaimed: { guard: and(['mayAppend', 'fits']), target: 'Requested', actions: ['touch', 'giveBack'] },
      },
    },
    Running: {
      on: {
        ExecutionProgressed: { guard: 'mayAppend', actions: ['touch', 'progress'] },
        ExecutionTagged: { guard: and(['mayAppend', 'fits']), actions: ['touch', 'tag'] },
        ExecutionCompleted: { guard: 'mayAppend', target: 'Completed', actions: ['touch', 'complete'] },
        ExecutionFailed: [
          { guard: and(['mayAppend', 'willRetry']), target: 'Requested', actions: ['touch', 'failForRetry'] },
          { guard: 'mayAppend', target: 'Failed', actions: ['touch', 'fail'] },
        ],
        ExecutionCancelled: { guard: 'mayAppend', target: 'Cancelled', actions: ['touch', 'cancel'] },
        ExecutionCancelRequested: { guard: and(['mayAppend', 'fits']), actions: ['touch', 'requestCancel'] },
        ExecutionTimedOut: { guard: and(['mayAppend', 'fits']), target: 'TimedOut', actions: ['touch', 'timeOut'] },
        OwnershipReleased: { guard: 'mayAppend', target: 'Requested', actions: ['touch', 'giveBack'] },
        OwnershipReclaimed: {
          guard: and(['mayAppend', 'fits', ({ event }) => stateProblem('Running', event) === null]),
          target: 'Requested',
          actions: ['touch', 'giveBack'],
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
  if (snapshot.can(event)) return { ok: true, snapshot: step.next(snapshot, event) };
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
