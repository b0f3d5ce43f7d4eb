// The event-sourced runtime for executions: load = fold the stream through the machine with
// xstate's pure transition; dispatch = decide through the machine, then append at the revision
// the decision was made on. The stream is the only state; nothing is cached between calls.
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { v5 as uuidv5 } from 'uuid';
import {
  ExecutionEvent,
  executionStreamId,
  type ActorRef,
  type ExecutionEventOf,
  type ExecutionEventType,
} from '../../schemas/events.ts';
import {
  MACHINE_VERSION,
  decideExecution,
  foldExecution,
  startExecution,
  statusOf,
  type ExecutionSnapshot,
} from '../../actors/execution.machine.ts';
import {
  AlreadyFinalError,
  IdempotencyKeyConflictError,
  InvalidTransitionError,
  NotFoundError,
  NotOwnerError,
  WrongExpectedRevisionError,
  parseOrThrow,
} from '../errors.ts';
import type { EventStore, NewEvent, StoredEvent } from '../eventstore/event-store.ts';
import { asExecutionEvent, fromStored, type HistoryEvent } from '../replay/history.ts';
import { timeline, type TimelineStep } from '../replay/inspect.ts';

/** Namespace for execution ids derived from idempotency keys (uuid v5). Never change it. */
const IDEMPOTENCY_NAMESPACE = '6f1e7c52-3b0a-4d1e-9a57-0b8c4a2f9d31';

export type Clock = () => Date;
export const systemClock: Clock = () => new Date();

/** A command: a domain event without the metadata the runtime fills in. */
export type ExecutionCommand = {
  [T in ExecutionEventType]: { type: T; data: ExecutionEventOf<T>['data'] };
}[ExecutionEventType] & {
  by: ActorRef;
  /** Pass a stable id to make a retried command idempotent. */
  eventId?: string;
  correlationId?: string;
  causationId?: string;
};

export interface SubmitRequest {
  action: string;
  input?: unknown;
  maxAttempts?: number;
  idempotencyKey?: string;
  priority?: number;
  parentId?: string;
  workflowId?: string;
  correlationId?: string;
}

export interface LoadedExecution {
  executionId: string;
  snapshot: ExecutionSnapshot;
  /** Revision of the last event: the expected revision of the next append. */
  revision: bigint;
  events: StoredEvent[];
}

export interface DispatchResult {
  executionId: string;
  snapshot: ExecutionSnapshot;
  revision: bigint;
  /** False when the events were already stored (a retried command). */
  appended: boolean;
}

export interface SubmitResult {
  executionId: string;
  /** False when the idempotency key found an earlier, identical submission. */
  created: boolean;
  snapshot: ExecutionSnapshot;
  revision: bigint;
}


export interface ExecutionRuntimeOptions {
  clock?: Clock;
  /** How often dispatch reloads and decides again after losing a revision race. */
  maxConflictRetries?: number;
  /** Attempts of a submission that does not say, unless its action sets its own (BATON_MAX_ATTEMPTS). Default 3. */
  defaultMaxAttempts?: number;
}

export const DEFAULT_MAX_ATTEMPTS = 3;

/** Records the state the machine reached with the event, for replay to compare against later. */
const withStateAfter = (event: ExecutionEvent, after: ExecutionSnapshot): ExecutionEvent => ({ ...event, metadata: { ...event.metadata, stateAfter: statusOf(after) } }) as ExecutionEvent;

export function createExecutionRuntime(store: EventStore, options: ExecutionRuntimeOptions = {}) {
  const clock = options.clock ?? systemClock;
  const maxConflictRetries = options.maxConflictRetries ?? 5;

  function toEvent(command: ExecutionCommand): ExecutionEvent {
    const metadata = {
      by: command.by,
      occurredAt: clock().toISOString(),
      machineVersion: MACHINE_VERSION,
      ...(command.correlationId ? { correlationId: command.correlationId } : {}),
      ...(command.causationId ? { causationId: command.causationId } : {}),
    };
    return parseOrThrow(ExecutionEvent, { type: command.type, data: command.data, metadata }, `${command.type} event`);
  }

  const toNew = (event: ExecutionEvent, eventId: string): NewEvent => ({ eventId, type: event.type, data: event.data, metadata: event.metadata });

  async function load(executionId: string): Promise<LoadedExecution> {
    const events = await store.readStream(executionStreamId(executionId));
    if (events.length === 0) throw new NotFoundError('execution', executionId);
    let snapshot: ExecutionSnapshot;
    try {
      // The machine's one-actor fold: ~4 µs an event against ~25 µs for decide-per-event.
      snapshot = foldExecution(events.map(asExecutionEvent));
    } catch (err) {
      throw new InvalidTransitionError(executionId, '(stored history)', '?', `stream does not fold through machine version ${MACHINE_VERSION}: ${(err as Error).message}`, { cause: err });
    }
    return { executionId, snapshot, revision: events[events.length - 1]!.revision, events };
  }

  /** The stored stream as a portable history (for export, replay and time-travel). */
  async function readHistory(executionId: string): Promise<HistoryEvent[]> {
    const events = await store.readStream(executionStreamId(executionId));
    if (events.length === 0) throw new NotFoundError('execution', executionId);
    return events.map(fromStored);
  }

  /** The state after every event, folded through the machine versions that wrote them. */
  async function history(executionId: string): Promise<TimelineStep[]> {
    return timeline(executionId, await readHistory(executionId));
  }

  function reject(executionId: string, event: ExecutionEvent, state: string, rejection: string, reason: string): never {
    const Err = rejection === 'NotOwner' ? NotOwnerError : rejection === 'AlreadyFinal' ? AlreadyFinalError : InvalidTransitionError;
    throw new Err(executionId, event.type, state, reason);
  }

  /**
   * Decide the commands in order through the machine and append them atomically at the revision
   * they were decided on. On a revision conflict, reload and decide again (bounded): a command
   * that is no longer valid is then refused with a typed error, and one that was already
   * appended (same eventId) is reported as applied, so retrying a command is harmless.
   */
  async function dispatch(
    executionId: string,
    commands: ExecutionCommand | ExecutionCommand[],
    options: { known?: { snapshot: ExecutionSnapshot; revision: bigint } } = {},
  ): Promise<DispatchResult> {
    const list = Array.isArray(commands) ? commands : [commands];
    if (list.length === 0) throw new InvalidTransitionError(executionId, '(none)', '?', 'dispatch needs at least one command');
    const eventIds = list.map((c) => c.eventId ?? randomUUID());
    const events = list.map(toEvent);
    for (let attempt = 1; ; attempt++) {
      // A caller that just loaded (or just dispatched) may pass what it knows and save a read;
      // if that is stale the append conflicts and we reload.
      const loaded = attempt === 1 && options.known ? { executionId, ...options.known, events: [] } : await load(executionId);
      if (loaded.events.length > 0 && eventIds.every((id) => loaded.events.some((e) => e.eventId === id))) {
        return { executionId, snapshot: loaded.snapshot, revision: loaded.revision, appended: false };
      }
      let snapshot = loaded.snapshot;
      const decided: ExecutionEvent[] = [];
      for (const event of events) {
        const decision = decideExecution(snapshot, event);
        if (!decision.ok) reject(executionId, event, statusOf(snapshot), decision.rejection, decision.reason);
        snapshot = decision.snapshot;
        decided.push(withStateAfter(event, snapshot));
      }
      try {
        const result = await store.append(executionStreamId(executionId), decided.map((e, i) => toNew(e, eventIds[i]!)), { expectedRevision: loaded.revision });
        return { executionId, snapshot, revision: result.nextExpectedRevision, appended: !result.idempotentReplay };
      } catch (err) {
        if (err instanceof WrongExpectedRevisionError && attempt <= maxConflictRetries) continue;
        throw err;
      }
    }
  }

  /**
   * Create an execution. With an idempotency key the execution id is derived from the key, so
   * the event store's "stream must not exist" check makes a second submission find the first:
   * the database enforces it, there is no read-then-write race.
   */
  async function submit(request: SubmitRequest): Promise<SubmitResult> {
    const key = request.idempotencyKey;
    const executionId = key !== undefined ? uuidv5(`key:${key}`, IDEMPOTENCY_NAMESPACE) : randomUUID();
    const requested = toEvent({
      type: 'ExecutionRequested',
      by: 'executor',
      data: {
        action: request.action,
        input: (request.input ?? null) as ExecutionEventOf<'ExecutionRequested'>['data']['input'],
        // A submission that names no limit records the default as such: the action's own limit replaces it.
        maxAttempts: request.maxAttempts ?? options.defaultMaxAttempts ?? DEFAULT_MAX_ATTEMPTS,
        ...(request.maxAttempts === undefined && { maxAttemptsIsDefault: true as const }),
        ...(key !== undefined ? { idempotencyKey: key } : {}),
        ...(request.priority !== undefined ? { priority: request.priority } : {}),
        ...(request.parentId !== undefined ? { parentId: request.parentId } : {}),
        ...(request.workflowId !== undefined ? { workflowId: request.workflowId } : {}),
      },
      ...(request.correlationId ? { correlationId: request.correlationId } : {}),
    }) as ExecutionEventOf<'ExecutionRequested'>;
    const eventId = key !== undefined ? uuidv5(`requested:${key}`, IDEMPOTENCY_NAMESPACE) : randomUUID();
    const snapshot = startExecution(requested);
    try {
      const r = await store.append(executionStreamId(executionId), [toNew(withStateAfter(requested, snapshot), eventId)], { expectedRevision: 'no_stream' });
      if (!r.idempotentReplay) return { executionId, created: true, snapshot, revision: 0n };
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError) || key === undefined) throw err;
    }
    const existing = await load(executionId);
    const first = existing.events[0]!.data as ExecutionEventOf<'ExecutionRequested'>['data'];
    const differs = (['action', 'input', 'maxAttempts', 'maxAttemptsIsDefault', 'priority', 'parentId', 'workflowId'] as const).filter(
      (f) => !isDeepStrictEqual(first[f], requested.data[f]),
    );
    if (differs.length > 0) throw new IdempotencyKeyConflictError(key!, executionId, `differs in ${differs.join(', ')}`);
    return { executionId, created: false, snapshot: existing.snapshot, revision: existing.revision };
  }

  return { load, readHistory, history, dispatch, submit };
}

export type ExecutionRuntime = ReturnType<typeof createExecutionRuntime>;
