// Executions on the one actor runtime (actor-runtime.ts): load folds the stream through the
// execution machine (or answers from this process's snapshot cache), dispatch decides through
// the machine and appends at the revision the decision was made on, and submit creates an
// execution, idempotently when it has a key. History and time-travel are replay's business
// (src/replay/execution-history.ts), not the runtime's.
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { v5 as uuidv5 } from 'uuid';
import { executionStreamId, type ActorRef, type ExecutionEvent, type ExecutionEventOf, type ExecutionEventType } from '../../schemas/events.ts';
import { startExecution, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { IdempotencyKeyConflictError, WrongExpectedRevisionError } from '../errors.ts';
import type { EventStore, StoredEvent } from '../eventstore/event-store.ts';
import { stateName, type Command } from './actor-kind.ts';
import { createActorRuntime, systemClock, type ActorRuntime, type Clock } from './actor-runtime.ts';
import { executionKind } from './execution-kind.ts';
import { traceSubmit, type TraceFields } from '../observability/tracing.ts';
import { DEFAULT_NAMESPACE } from '../input/namespace.ts';
import { createNamespaces } from './namespaces.ts';

export { systemClock, type Clock } from './actor-runtime.ts';

/** Namespace for execution ids derived from idempotency keys (uuid v5). Never change it. */
const IDEMPOTENCY_NAMESPACE = '6f1e7c52-3b0a-4d1e-9a57-0b8c4a2f9d31';

/** The execution id a submission with idempotency key `key` gets (what `submit` derives). */
export const executionIdForKey = (key: string, namespace: string = DEFAULT_NAMESPACE): string =>
  // The default namespace keeps the ids keys had before namespaces; another namespace's keys are
  // its own (a name holds no ':', so the two forms never meet).
  uuidv5(namespace === DEFAULT_NAMESPACE ? `key:${key}` : `ns-key:${namespace}:${key}`, IDEMPOTENCY_NAMESPACE);

/** A command: a domain event without the metadata the runtime fills in. */
export type ExecutionCommand = Command<ExecutionEvent> & { by: ActorRef };

export interface SubmitRequest {
  action: string;
  input?: unknown;
  maxAttempts?: number;
  idempotencyKey?: string;
  priority?: number;
  parentId?: string;
  workflowId?: string;
  correlationId?: string;
  /** Where it lives (checked before: see namespaceProblem). Default `default`. */
  namespace?: string;
}

export interface LoadedExecution {
  executionId: string;
  snapshot: ExecutionSnapshot;
  /** Revision of the last event: the expected revision of the next append. */
  revision: bigint;
  /** The stored events, when this load read the stream (not when the snapshot cache answered). */
  events?: StoredEvent[];
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
  /** The snapshot cache's bound (src/runtime/snapshot-cache.ts). */
  maxCached?: number;
  /** This process observes every execution event (the executor): loads answer from the cache (actor-runtime.ts). */
  followsStore?: boolean;
  /** Attempts of a submission that does not say, unless its action sets its own (BATON_MAX_ATTEMPTS). Default 3. */
  defaultMaxAttempts?: number;
}

export const DEFAULT_MAX_ATTEMPTS = 3;


export function createExecutionRuntime(store: EventStore, options: ExecutionRuntimeOptions = {}) {
  const clock: Clock = options.clock ?? systemClock;
  const actors: ActorRuntime<ExecutionSnapshot, ExecutionEvent> = createActorRuntime(store, executionKind, {
    clock,
    ...(options.maxConflictRetries !== undefined && { maxConflictRetries: options.maxConflictRetries }),
    ...(options.maxCached !== undefined && { maxCached: options.maxCached }),
    ...(options.followsStore !== undefined && { followsStore: options.followsStore }),
  });

  const namespaces = createNamespaces(store, clock);

  async function load(executionId: string, o: { fresh?: boolean } = {}): Promise<LoadedExecution> {
    const loaded = await actors.load(executionId, o);
    return { executionId, snapshot: loaded.snapshot, revision: loaded.revision!, ...(loaded.events && { events: loaded.events }) };
  }

  /**
   * Decide the commands in order through the machine and append them atomically at the revision
   * they were decided on (actor-runtime.ts): a conflict reloads and decides again (bounded); a
   * command that no longer fits is refused with a typed error, and one already appended (same
   * eventId) is reported as applied, so retrying a command is harmless. Commands that depend on
   * the state are given as a function of it, made again on each attempt (undefined: nothing to do).
   */
  async function dispatch(
    executionId: string,
    commands: ExecutionCommand | ExecutionCommand[] | ((snapshot: ExecutionSnapshot | undefined) => ExecutionCommand | ExecutionCommand[] | undefined),
    o: { known?: { snapshot: ExecutionSnapshot; revision: bigint } } = {},
  ): Promise<DispatchResult> {
    const r = await actors.dispatch(executionId, commands, o);
    return { executionId, snapshot: r.snapshot, revision: r.revision, appended: r.appended };
  }

  /**
   * Create an execution. With an idempotency key the execution id is derived from the key, so
   * the event store's "stream must not exist" check makes a second submission find the first:
   * the database enforces it, there is no read-then-write race. Traced as `baton.submit` when a
   * tracer provider is registered (ExecutionRequested then records its trace context).
   */
  async function submit(request: SubmitRequest): Promise<SubmitResult> {
    const key = request.idempotencyKey;
    const executionId = key !== undefined ? executionIdForKey(key, request.namespace) : randomUUID();
    // `default` always exists; any other namespace is created on first use.
    if (request.namespace !== undefined && request.namespace !== DEFAULT_NAMESPACE) await namespaces.ensure(request.namespace);
    return traceSubmit(request, (trace) => append(request, executionId, trace));
  }

  /** The submission's ExecutionRequested appended (or found, with its key), `trace` in its metadata. */
  async function append(request: SubmitRequest, executionId: string, trace: TraceFields): Promise<SubmitResult> {
    const key = request.idempotencyKey;
    const requested = executionKind.make(
      {
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
          namespace: request.namespace ?? DEFAULT_NAMESPACE,
        },
        ...(request.correlationId ? { correlationId: request.correlationId } : {}),
        ...trace,
      },
      clock().toISOString(),
    ) as ExecutionEventOf<'ExecutionRequested'>;
    // Event ids are unique store-wide: another namespace's key derives its own (from its execution id).
    const eventId = key === undefined ? randomUUID() : uuidv5(request.namespace === undefined || request.namespace === DEFAULT_NAMESPACE ? `requested:${key}` : `requested:${executionId}`, IDEMPOTENCY_NAMESPACE);
    const snapshot = startExecution(requested);
    const stored = { ...requested, metadata: { ...requested.metadata, stateAfter: stateName(snapshot) } };
    try {
      const r = await store.append(executionStreamId(executionId), [{ eventId, type: stored.type, data: stored.data, metadata: stored.metadata }], { expectedRevision: 'no_stream' });
      if (!r.idempotentReplay) return { executionId, created: true, snapshot, revision: 0n };
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError) || key === undefined) throw err;
    }
    const existing = await load(executionId, { fresh: true });
    const first = existing.events![0]!.data as ExecutionEventOf<'ExecutionRequested'>['data'];
    const differs = (['action', 'input', 'maxAttempts', 'maxAttemptsIsDefault', 'priority', 'parentId', 'workflowId'] as const).filter(
      (f) => !isDeepStrictEqual(first[f], requested.data[f]),
    );
    if (differs.length > 0) throw new IdempotencyKeyConflictError(key!, executionId, `differs in ${differs.join(', ')}`);
    return { executionId, created: false, snapshot: existing.snapshot, revision: existing.revision };
  }

  return { store, load, dispatch, submit, observe: actors.observe, onChange: actors.onChange, cached: actors.cached, followed: actors.followed, actors };
}

export type ExecutionRuntime = ReturnType<typeof createExecutionRuntime>;
