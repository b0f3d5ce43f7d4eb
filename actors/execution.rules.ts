// The execution machine's rules, written once: ownership (mayAppend), and the conditions on
// context, data and state that make an event fit. The machine's guards, its refusal classifier and
// allowedEventTypes all ask these functions, so the three can never disagree (execution.machine.ts).
import { WorkerRef, type ErrorInfo, type ExecutionEvent, type ExecutionEventOf, type ExecutionEventType } from '../schemas/events.ts';
import { namespaceOr } from '../src/input/namespace.ts';
import { TAG_LIMITS } from '../src/input/tags.ts';

export const EXECUTOR = 'executor' as const;
export type Owner = typeof EXECUTOR | `worker:${string}`;

export type RequestedEvent = ExecutionEventOf<'ExecutionRequested'>;
export type Json = RequestedEvent['data']['input'];
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
  /** Where it lives: the request's, or `default` when it recorded none (recorded before namespaces). */
  namespace: string;
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

export function notOwnerReason(context: ExecutionContext, event: ExecutionEvent): string {
  if (event.type === 'OwnershipReclaimed') {
    return `only the executor may reclaim ownership, not ${event.metadata.by}`;
  }
  if (event.type === 'ExecutionCancelRequested') {
    return `only the executor records a cancel request, not ${event.metadata.by}`;
  }
  return `${event.metadata.by} is not the owner (owner is ${context.owner})`;
}

/** Conditions on context only, so allowedEventTypes can apply them without an event. */
export function contextProblem(context: ExecutionContext, type: ExecutionEventType): string | null {
  switch (type) {
    case 'SchedulingStarted':
    case 'ExecutionHandedOff':
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
export function dataProblem(context: ExecutionContext, event: ExecutionEvent): string | null {
  const problem = contextProblem(context, event.type);
  if (problem !== null) return problem;
  switch (event.type) {
    case 'SchedulingStarted':
      return attemptLimitProblem(context, event.type, event.data.maxAttempts);
    case 'ExecutionHandedOff': {
      const { attempt, workerId } = event.data;
      const limitProblem = attemptLimitProblem(context, event.type, event.data.maxAttempts);
      if (limitProblem !== null) return limitProblem;
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

/** Whether an attempt limit the executor records (SchedulingStarted, or from version 7 the handoff) fits. */
function attemptLimitProblem(context: ExecutionContext, type: ExecutionEventType, limit: number | undefined): string | null {
  if (limit === undefined) return null;
  if (context.submittedMaxAttempts !== undefined && limit > context.submittedMaxAttempts) {
    return `${type} maxAttempts ${limit} exceeds the submission's own limit ${context.submittedMaxAttempts}: an action's limit may lower a submission's, never raise it`;
  }
  return limit < context.attempt ? `${type} maxAttempts ${limit} is below the current attempt ${context.attempt}` : null;
}

/**
 * Conditions that depend on the state the event arrives in. A schedule-to-start reclaim is
 * decided on seeing Scheduled past its deadline; if the worker started meanwhile, the reclaim
 * must lose the race, or a late start and a reclaim could both win.
 */
export function stateProblem(status: string, event: ExecutionEvent): string | null {
  if (event.type === 'OwnershipReclaimed' && event.data.reason === 'schedule-to-start' && status !== 'Scheduled') {
    return `a schedule-to-start reclaim is only valid before the worker starts (state is ${status})`;
  }
  return null;
}

/** An event's or the context's action version: absent means 1, the version of an action that declares none. */
export const versionOf = (v: number | undefined): number => v ?? 1;

/** The baton goes back to the executor, which must now retry or abandon. */
export const backToExecutor = (context: ExecutionContext) => ({
  owner: EXECUTOR,
  workerId: null,
  retryPending: true,
  deadline: null,
  // Ownership only ever alternates executor ↔ worker, so appending never repeats.
  owners: [...context.owners, EXECUTOR],
});

export function contextFromRequest(event: RequestedEvent): ExecutionContext {
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
    namespace: namespaceOr(data.namespace),
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
