// Executions on the one actor runtime (actor-runtime.ts): load folds the stream through the
// execution machine (or answers from this process's snapshot cache), dispatch decides through
// the machine and appends at the revision the decision was made on, and submit creates an
// execution, idempotently when it has a key. History and time-travel are replay's business
// (src/replay/execution-history.ts), not the runtime's.
import { v5 as uuidv5 } from 'uuid';
import { executionStreamId, type ActorRef, type ExecutionEvent, type ExecutionEventOf, type ExecutionEventType } from '../../schemas/events.ts';
import { startExecution, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { IdempotencyKeyConflictError, WrongExpectedRevisionError } from '../errors.ts';
import type { EventStore, NewEvent, StoredEvent } from '../eventstore/event-store.ts';
import { stateName, type Command } from './actor-kind.ts';
import { createActorRuntime, systemClock, type ActorRuntime, type Clock } from './actor-runtime.ts';
import { executionKind } from './execution-kind.ts';
import { mapLimit } from '../async/map-limit.ts';
import { keyedDifferences, requestedDataOf, type RequestedData } from './requested-data.ts';
import { traceSubmit, traceSubmitMany, type TraceFields } from '../observability/tracing.ts';
import { DEFAULT_NAMESPACE } from '../input/namespace.ts';
import { createNamespaces } from './namespaces.ts';
import { newId } from '../ids.ts';

export { systemClock, type Clock } from './actor-runtime.ts';

/** Namespace for execution ids derived from idempotency keys (uuid v5). Never change it. */
const IDEMPOTENCY_NAMESPACE = '6f1e7c52-3b0a-4d1e-9a57-0b8c4a2f9d31';

/** The execution id a submission with idempotency key `key` gets (what `submit` derives). */
export const executionIdForKey = (key: string, namespace: string = DEFAULT_NAMESPACE): string =>
  // The default namespace keeps the ids keys had before namespaces; another namespace's keys are
  // its own (a name holds no ':', so the two forms never meet).
  uuidv5(namespace === DEFAULT_NAMESPACE ? `key:${key}` : `ns-key:${namespace}:${key}`, IDEMPOTENCY_NAMESPACE);

/** The event id of a keyed execution's ExecutionRequested (what `submit` derives; unique store-wide). */
export const requestedEventIdOf = (executionId: string): string => uuidv5(`requested-event:${executionId}`, IDEMPOTENCY_NAMESPACE);
/** A keyed execution abandoned in the append that creates it (submitAbandoned): a repeat resends this id, so the store sees the same append. */
const abandonedAtOnceEventIdOf = (executionId: string): string => uuidv5(`abandoned-at-once-event:${executionId}`, IDEMPOTENCY_NAMESPACE);

/** A command: a domain event without the metadata the runtime fills in. */
export type ExecutionCommand = Command<ExecutionEvent> & { by: ActorRef };

export interface SubmitRequest {
  action: string;
  input?: unknown;
  maxAttempts?: number;
  idempotencyKey?: string;
  priority?: number;
  /** Pin the action version every attempt runs on; absent: the newest a live worker offers at each handoff. */
  actionVersion?: number;
  parentId?: string;
  workflowId?: string;
  correlationId?: string;
  /** Where it lives (checked before: see namespaceProblem). Default `default`. */
  namespace?: string;
  /** String key-values to find it by (src/input/tags.ts). */
  tags?: Record<string, string>;
}

export interface LoadedExecution {
  executionId: string;
  snapshot: ExecutionSnapshot;
  /** Revision of the last event: the expected revision of the next append. */
  revision: bigint;
  /** The stored events, when this load read the stream (not when the snapshot cache answered); from a stored snapshot's revision on unless loaded `whole`. */
  events?: StoredEvent[];
  /** Set when the load started from a stored snapshot: `events` start at this revision. */
  from?: bigint;
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


/**
 * What became of one request of a submitMany: submitted (or found by its key), or not (an
 * idempotency conflict, a store error), with the execution id it has or would have had.
 */
export type SubmitOutcome = { ok: true; result: SubmitResult } | { ok: false; error: Error; executionId: string };

// Streams read at once when a batch's keys find earlier executions (a file submitted again).
const EXISTING_READS_IN_FLIGHT = 16;

export interface ExecutionRuntimeOptions {
  clock?: Clock;
  /** How often dispatch reloads and decides again after losing a revision race. */
  maxConflictRetries?: number;
  /** The snapshot cache's bound (src/runtime/snapshot-cache.ts). */
  maxCached?: number;
  /** This process observes every execution event (the executor): loads answer from the cache (actor-runtime.ts). */
  followsStore?: boolean;
  /** Events between two stored snapshots of a long execution (src/runtime/stream-snapshots.ts). */
  snapshotEvery?: number;
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
    ...(options.snapshotEvery !== undefined && { snapshotEvery: options.snapshotEvery }),
  });

  const namespaces = createNamespaces(store, clock);

  /** `whole`: read the whole stream, never from a stored snapshot (`events` then holds every event). */
  async function load(executionId: string, o: { fresh?: boolean; whole?: boolean } = {}): Promise<LoadedExecution> {
    const loaded = await actors.load(executionId, o);
    return { executionId, snapshot: loaded.snapshot, revision: loaded.revision!, ...(loaded.events && { events: loaded.events }), ...(loaded.from !== undefined && { from: loaded.from }) };
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

  /** The request as its ExecutionRequested (`trace` in its metadata), ready to append at 'no_stream'; ids derive from the key when there is one. */
  function prepare(request: SubmitRequest, trace: TraceFields) {
    const key = request.idempotencyKey;
    const executionId = key !== undefined ? executionIdForKey(key, request.namespace) : newId();
    const requested = executionKind.make(
      {
        type: 'ExecutionRequested',
        by: 'executor',
        data: requestedDataOf(request, options.defaultMaxAttempts ?? DEFAULT_MAX_ATTEMPTS),
        ...(request.correlationId ? { correlationId: request.correlationId } : {}),
        ...trace,
      },
      clock().toISOString(),
    ) as ExecutionEventOf<'ExecutionRequested'>;
    // Event ids are unique store-wide, so a keyed one derives from the execution id (itself unique
    // per namespace and key) under a prefix of its own. Before, a default-namespace key derived it
    // from the key text (`requested:<key>`) and other namespaces from the execution id
    // (`requested:<id>`): a default key spelled like another namespace's execution id took that
    // execution's event id, and its append failed as a duplicate. Executions stored under the old
    // ids are still found by their key: the stream exists, so the retry reads it (existing()).
    const eventId = key === undefined ? newId() : requestedEventIdOf(executionId);
    const snapshot = startExecution(requested);
    const stored = { ...requested, metadata: { ...requested.metadata, stateAfter: stateName(snapshot) } };
    return { key, executionId, data: requested.data, snapshot, append: { streamId: executionStreamId(executionId), events: [{ eventId, type: stored.type, data: stored.data, metadata: stored.metadata }] as NewEvent[], expectedRevision: 'no_stream' as const } };
  }
  type Prepared = ReturnType<typeof prepare>;

  /** The key found an earlier execution: it, if that was the same request, else IdempotencyKeyConflictError. */
  async function existing(p: Prepared): Promise<SubmitResult> {
    const found = await load(p.executionId, { fresh: true, whole: true });
    const differs = keyedDifferences(found.events![0]!.data as RequestedData, p.data);
    if (differs.length > 0) throw new IdempotencyKeyConflictError(p.key!, p.executionId, `differs in ${differs.join(', ')}`);
    return { executionId: p.executionId, created: false, snapshot: found.snapshot, revision: found.revision };
  }

  /**
   * Create an execution. With an idempotency key the execution id is derived from the key, so
   * the event store's "stream must not exist" check makes a second submission find the first:
   * the database enforces it, there is no read-then-write race. Traced as `baton.submit` when a
   * tracer provider is registered (ExecutionRequested then records its trace context).
   */
  async function submit(request: SubmitRequest): Promise<SubmitResult> {
    await ensureNamespaces([request]);
    return traceSubmit(request, (trace) => append(prepare(request, trace)));
  }

  /**
   * Create an execution that ends at once, Abandoned with `reason`, in the append that creates it:
   * a request that is recorded but must not run (a workflow step whose input could not be made
   * from its parents' results), so its history says why and no executor ever schedules it. With
   * a key, a repeat finds it as submit finds an earlier execution.
   */
  async function submitAbandoned(request: SubmitRequest, reason: string): Promise<SubmitResult> {
    await ensureNamespaces([request]);
    return traceSubmit(request, (trace) => append(abandonedAtOnce(prepare(request, trace), reason, request.correlationId)));
  }

  function abandonedAtOnce(p: Prepared, reason: string, correlationId: string | undefined): Prepared {
    const abandoned = executionKind.make({ type: 'ExecutionAbandoned', by: 'executor', data: { reason }, ...(correlationId && { correlationId }) }, clock().toISOString());
    const d = executionKind.decide(p.executionId, p.snapshot, abandoned);
    if (!d.ok) throw d.error;
    const event = { eventId: p.key === undefined ? newId() : abandonedAtOnceEventIdOf(p.executionId), type: abandoned.type, data: abandoned.data, metadata: { ...abandoned.metadata, stateAfter: stateName(d.snapshot) } };
    return { ...p, snapshot: d.snapshot, append: { ...p.append, events: [...p.append.events, event] } };
  }

  /** `default` always exists; any other namespace is created on first use, before its first execution. */
  async function ensureNamespaces(requests: readonly SubmitRequest[]): Promise<void> {
    const named = new Set(requests.map((r) => r.namespace ?? DEFAULT_NAMESPACE));
    named.delete(DEFAULT_NAMESPACE);
    for (const ns of named) await namespaces.ensure(ns);
  }

  /** The submission's ExecutionRequested appended (or found, with its key). */
  async function append(p: Prepared): Promise<SubmitResult> {
    try {
      const r = await store.append(p.append.streamId, p.append.events, { expectedRevision: 'no_stream' });
      // Unkeyed, a replay is this append, retried by the store after a lost answer (see appendMany).
      if (!r.idempotentReplay || p.key === undefined) return { executionId: p.executionId, created: true, snapshot: p.snapshot, revision: BigInt(p.append.events.length - 1) };
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError) || p.key === undefined) throw err;
    }
    return existing(p);
  }

  /**
   * Create many executions with one appendMany (one transaction where the store has them), each
   * with its own outcome in the requests' order. Idempotency keys hold inside the batch as across
   * batches: a key's first request is appended, a repeat of it answers the first's execution
   * (`created: false`), and a repeat with a different request is an IdempotencyKeyConflictError
   * for that item alone. The requests are taken as checked (src/runtime/submission.ts checks
   * people's); an event the catalog refuses throws before anything is written. Each request is
   * traced as a `baton.submit` of its own, as submit traces one.
   */
  async function submitMany(requests: readonly SubmitRequest[], o: { itemLabel?: (index: number) => string } = {}): Promise<SubmitOutcome[]> {
    await ensureNamespaces(requests);
    return traceSubmitMany(requests, (traces) => appendMany(requests.map((r, i) => prepare(r, traces[i]!)), o.itemLabel ?? ((i) => `the batch's item ${i}`)));
  }

  /** `itemLabel`: how a conflicting repeat names the request it repeats, as the caller numbers them (`line 5`). */
  async function appendMany(prepared: readonly Prepared[], itemLabel: (index: number) => string): Promise<SubmitOutcome[]> {
    // Keyed by the execution id the key derives (a key is unique within its namespace).
    const firstOfKey = new Map<string, number>();
    const appended: number[] = [];
    prepared.forEach((p, i) => {
      if (p.key !== undefined && firstOfKey.has(p.executionId)) return;
      if (p.key !== undefined) firstOfKey.set(p.executionId, i);
      appended.push(i);
    });
    const results = appended.length === 0 ? [] : await store.appendMany(appended.map((i) => prepared[i]!.append));
    const outcomes: SubmitOutcome[] = new Array(prepared.length);
    const found: number[] = [];
    results.forEach((r, j) => {
      const i = appended[j]!;
      const p = prepared[i]!;
      // Unkeyed, an idempotent replay is this very append, stored by a statement whose answer was
      // lost (the store retried it): its fresh event id can be nobody else's, so it was created here.
      if (r.ok && (!r.result.idempotentReplay || p.key === undefined)) outcomes[i] = { ok: true, result: { executionId: p.executionId, created: true, snapshot: p.snapshot, revision: 0n } };
      else if (p.key !== undefined && (r.ok || r.error instanceof WrongExpectedRevisionError)) found.push(i);
      else outcomes[i] = { ok: false, error: r.ok ? new Error('unreachable') : r.error, executionId: p.executionId };
    });
    /** The outcomes of these items from the execution their key names in the store. */
    const fromStore = (items: number[]) =>
      mapLimit(items, EXISTING_READS_IN_FLIGHT, async (i) => {
        outcomes[i] = await existing(prepared[i]!).then(
          (result): SubmitOutcome => ({ ok: true, result }),
          (error: unknown): SubmitOutcome => ({ ok: false, error: error as Error, executionId: prepared[i]!.executionId }),
        );
      });
    await fromStore(found);
    // Repeats of a key inside the batch: the first's execution, if they asked for the same. When
    // the first was refused because the store holds that key with another request, the stored one
    // is what a repeat must match: one that asks exactly for it is that execution, not a conflict.
    const againstStore: number[] = [];
    prepared.forEach((p, i) => {
      if (outcomes[i] !== undefined) return;
      const first = firstOfKey.get(p.executionId)!;
      const was = outcomes[first]!;
      if (!was.ok && was.error instanceof IdempotencyKeyConflictError) return void againstStore.push(i);
      const differs = keyedDifferences(prepared[first]!.data, p.data);
      if (differs.length > 0) outcomes[i] = { ok: false, error: new IdempotencyKeyConflictError(p.key!, p.executionId, `differs in ${differs.join(', ')} from ${itemLabel(first)}`), executionId: p.executionId };
      else outcomes[i] = was.ok ? { ok: true, result: { ...was.result, created: false } } : was;
    });
    await fromStore(againstStore);
    return outcomes;
  }

  return { store, load, dispatch, submit, submitMany, submitAbandoned, observe: actors.observe, onChange: actors.onChange, cached: actors.cached, followed: actors.followed, actors };
}

export type ExecutionRuntime = ReturnType<typeof createExecutionRuntime>;
