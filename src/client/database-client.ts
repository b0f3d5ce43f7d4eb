// The client over the database: this process uses Baton's runtime directly, as `baton submit`
// does. Submissions are checked by the same function every front door uses
// (src/runtime/submission.ts), views are folded from the event stream through the execution
// machine, and updates follow the stream (no polling).
import { isFinal, statusOf, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { configuredBuiltinActions } from '../actions/builtin.ts';
import type { AnyActionDefinition } from '../actions/action.ts';
import { openEnvironment, type Environment } from '../cli/environment.ts';
import { BatonError, NotFoundError } from '../errors.ts';
import { START } from '../eventstore/event-store.ts';
import { versionShown } from '../input/action-versions.ts';
import { createLogger } from '../log.ts';
import { executionTimeline } from '../replay/execution-history.ts';
import { cancelExecution } from '../runtime/cancel.ts';
import { actionsFor, checkItems, checkOne, knownActions } from './checks.ts';
import { configWithOptions } from './options-config.ts';
import { submittedOrThrow, type SubmitManyResult } from './submit-many.ts';
import { endReasonOf, type CancelOutcome, type DatabaseClientOptions, type ExecutionStatus, type ExecutionView, type HistoryEntry, type SubmitItem, type SubmitOptions, type Submitted } from './types.ts';

/** The calls the shared client (index.ts) builds `result` and the typed `submit` on. */
export interface Transport {
  submit(action: AnyActionDefinition | string, input: unknown, options: SubmitOptions): Promise<Submitted>;
  submitMany(items: readonly SubmitItem[]): Promise<Submitted[]>;
  cancel(id: string, reason: string | undefined): Promise<CancelOutcome>;
  get(id: string): Promise<ExecutionView | undefined>;
  history(id: string): Promise<HistoryEntry[]>;
  updates(id: string, signal: AbortSignal | undefined): AsyncIterable<ExecutionView>;
  close(): Promise<void>;
}

/** The view of an execution from its machine snapshot. */
export function viewOfSnapshot(executionId: string, snapshot: ExecutionSnapshot, revision: bigint): ExecutionView {
  const c = snapshot.context;
  const status = statusOf(snapshot) as ExecutionStatus;
  return {
    id: executionId,
    action: c.action,
    status,
    revision: Number(revision),
    input: c.input,
    result: status === 'Completed' ? c.result : undefined,
    error: c.error ? { message: c.error.message, ...(c.error.type !== undefined && { type: c.error.type }) } : undefined,
    attempt: c.attempt,
    maxAttempts: c.maxAttempts,
    owner: c.owner,
    workerId: c.workerId ?? undefined,
    priority: c.priority,
    actionVersion: versionShown(c) ?? undefined,
    idempotencyKey: c.idempotencyKey,
    namespace: c.namespace,
    tags: { ...c.tags },
    requestedAt: c.requestedAt,
    finishedAt: c.finishedAt,
    endReason: endReasonOf(c),
    final: isFinal(snapshot),
  };
}

/** `o.actions` is checked by createClient (index.ts) before this opens anything. */
export async function openDatabaseTransport(o: DatabaseClientOptions): Promise<Transport> {
  // The environment as the CLI has it, except for the database, which the caller names. A
  // caller's own BATON_* variables (BATON_EVENTSTORE_URL, BATON_LOG_LEVEL) still apply.
  const config = configWithOptions([{ path: 'databaseUrl', variable: 'BATON_DATABASE_URL', value: o.databaseUrl }], { logLevel: 'warn' });
  // Before anything is opened: nothing to close if it throws.
  const registry = knownActions(configuredBuiltinActions(config), o.actions);
  const env: Environment = await openEnvironment({ config, log: createLogger(config, { destination: 'stderr' }), as: 'cli', poolSize: 4, applicationName: 'baton-client' });
  const { runtime, store } = env;

  /** The registry a submission is checked against: the client's, with the definition it passed. */
  const registryFor = actionsFor(registry, 'refuse');

  const submitted = (r: Awaited<ReturnType<typeof runtime.submit>>): Submitted => ({
    executionId: r.executionId,
    created: r.created,
    status: statusOf(r.snapshot) as ExecutionStatus,
  });

  async function get(id: string): Promise<ExecutionView | undefined> {
    try {
      const loaded = await runtime.load(id, { fresh: true });
      return viewOfSnapshot(id, loaded.snapshot, loaded.revision);
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
  }

  return {
    async submit(action, input, options) {
      return submitted(await runtime.submit(checkOne(registryFor(action), action, input, options)));
    },
    async submitMany(items) {
      // Every item is checked before the first is stored; then they are stored in order.
      const requests = checkItems(registryFor, items);
      // One appendMany for all of them; an item the store does not take is reported alone (the others are stored).
      const outcomes = await runtime.submitMany(requests);
      return submittedOrThrow(outcomes.map((o): SubmitManyResult => (o.ok ? { ok: true, submitted: submitted(o.result) } : { ok: false, error: o.error })));
    },
    async cancel(id, reason) {
      const r = await cancelExecution(runtime, id, reason ?? 'cancelled through the client');
      return { ...r, status: r.status as ExecutionStatus };
    },
    get,
    async history(id) {
      const steps = await executionTimeline(store, id);
      return steps.map((s) => ({
        revision: s.revision,
        type: s.type,
        by: s.by,
        recordedAt: s.recordedAt,
        data: s.data,
        stateBefore: (s.stateBefore ?? undefined) as ExecutionStatus | undefined,
        state: s.state as ExecutionStatus,
      }));
    },
    async *updates(id, signal) {
      const loaded = await runtime.load(id, { fresh: true }); // NotFoundError for an unknown id
      const first = viewOfSnapshot(id, loaded.snapshot, loaded.revision);
      yield first;
      if (first.final) return;
      let last = first.revision;
      // Follow from the last event read: the next one of this stream commits after it. (From
      // START the subscription would scan the whole log before reaching the present.)
      const after = loaded.events?.at(-1)?.globalPosition ?? START;
      const ac = new AbortController();
      const stop = () => ac.abort();
      signal?.addEventListener('abort', stop, { once: true });
      try {
        // The stream id is unique, so a prefix of the whole id follows exactly this execution.
        for await (const event of store.subscribe({ after, streamPrefixes: [executionStreamId(id)], signal: ac.signal })) {
          if (Number(event.revision) <= last) continue;
          const view = await get(id);
          if (!view || view.revision <= last) continue;
          last = view.revision;
          yield view;
          if (view.final) return;
        }
      } finally {
        signal?.removeEventListener('abort', stop);
        ac.abort();
      }
    },
    close: () => env.close(),
  };
}
