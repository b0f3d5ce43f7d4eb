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
import { catchUpAndFollow } from '../eventstore/follow.ts';
import { redactUrl } from '../db/connect.ts';
import { versionShown } from '../input/action-versions.ts';
import { createLogger } from '../log.ts';
import { executionTimeline } from '../replay/execution-history.ts';
import { timeline } from '../replay/inspect.ts';
import { cancelExecution } from '../runtime/cancel.ts';
import { actionsFor, checkItems, checkOne, knownActions } from './checks.ts';
import { readArchivedExecution } from './archived-execution.ts';
import { once, STOPPED, throughOutage } from './database-outage.ts';
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
  const env: Environment = await openEnvironment({ config, log: o.logger ?? createLogger(config, { destination: 'stderr' }), as: 'cli', poolSize: 4, applicationName: 'baton-client' });
  const { runtime, store } = env;
  /** The database as messages name it (no password). */
  const where = redactUrl(o.databaseUrl);

  /** The registry a submission is checked against: the client's, with the definition it passed. */
  const registryFor = actionsFor(registry, 'refuse');

  const submitted = (r: Awaited<ReturnType<typeof runtime.submit>>): Submitted => ({
    executionId: r.executionId,
    created: r.created,
    status: statusOf(r.snapshot) as ExecutionStatus,
  });

  /** Not in the store: the archive's, when retention archived it (ArchivedError when its file cannot be read). */
  const archived = (id: string) => once(where, () => readArchivedExecution(env.db.pool, id));

  /** The execution now, from the store or else its archive; undefined for an id no execution has. */
  async function get(id: string): Promise<ExecutionView | undefined> {
    try {
      const loaded = await once(where, () => runtime.load(id, { fresh: true }));
      return viewOfSnapshot(id, loaded.snapshot, loaded.revision);
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      const a = await archived(id);
      return a && viewOfSnapshot(id, a.snapshot, a.revision);
    }
  }

  /** For updates: an archived execution is its final state (retention archives only those). */
  async function loadOrArchived(id: string): Promise<{ snapshot: ExecutionSnapshot; revision: bigint; events?: readonly { globalPosition: bigint }[] }> {
    try {
      const loaded = await runtime.load(id, { fresh: true });
      return { snapshot: loaded.snapshot, revision: loaded.revision ?? 0n, events: loaded.events };
    } catch (err) {
      const a = err instanceof NotFoundError ? await readArchivedExecution(env.db.pool, id) : undefined;
      if (!a) throw err;
      return { snapshot: a.snapshot, revision: a.revision };
    }
  }

  return {
    async submit(action, input, options) {
      const request = checkOne(registryFor(action), action, input, options);
      // Not retried: without an idempotency key a retry could submit it twice.
      return submitted(await once(where, () => runtime.submit(request)));
    },
    async submitMany(items) {
      // Every item is checked before the first is stored; then they are stored in order.
      const requests = checkItems(registryFor, items);
      // One appendMany for all of them; an item the store does not take is reported alone (the others are stored).
      const outcomes = await once(where, () => runtime.submitMany(requests));
      return submittedOrThrow(outcomes.map((o): SubmitManyResult => (o.ok ? { ok: true, submitted: submitted(o.result) } : { ok: false, error: o.error })));
    },
    async cancel(id, reason) {
      const r = await once(where, () => cancelExecution(runtime, id, reason ?? 'cancelled through the client'));
      return { ...r, status: r.status as ExecutionStatus };
    },
    get,
    async history(id) {
      const steps = await once(where, () => executionTimeline(store, id)).catch(async (err: unknown) => {
        const a = err instanceof NotFoundError ? await archived(id) : undefined;
        if (!a) throw err;
        return timeline(id, a.events);
      });
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
      const ac = new AbortController();
      const stop = () => ac.abort();
      signal?.addEventListener('abort', stop, { once: true });
      if (signal?.aborted) ac.abort();
      let following: Promise<void> | undefined;
      try {
        // An outage is waited out until the caller stops. NotFoundError for an id no execution has.
        const loaded = await throughOutage(where, ac.signal, () => loadOrArchived(id));
        if (loaded === STOPPED) return;
        const first = viewOfSnapshot(id, loaded.snapshot, loaded.revision);
        yield first;
        if (first.final) return;
        let last = first.revision;
        const views: ExecutionView[] = [];
        let wake = () => {};
        ac.signal.addEventListener('abort', () => wake(), { once: true });
        // As the hosts follow the store: resumed after the last event handled when the database
        // goes away, with the hosts' backoff. `stream` order: one execution's events need no order
        // across streams, and the global one waits for every transaction open on the server, in
        // any database. From the last event read: the next one of this stream commits after it
        // (from START the follow would scan the whole log first). The stream id is unique, so a
        // prefix of the whole id follows exactly this execution.
        following = catchUpAndFollow(
          { store, streamPrefixes: [executionStreamId(id)], signal: ac.signal, log: env.log, who: `client following execution ${id}`, order: 'stream', after: loaded.events?.at(-1)?.globalPosition ?? START },
          {
            onEvent: async (event) => {
              if (Number(event.revision) <= last) return;
              // Throws through an outage: the follow retries this event after the backoff.
              const loadedNow = await loadOrArchived(id);
              const view = viewOfSnapshot(id, loadedNow.snapshot, loadedNow.revision);
              if (view.revision <= last) return;
              last = view.revision;
              views.push(view);
              wake();
            },
          },
        );
        for (;;) {
          const view = views.shift();
          if (view) {
            yield view;
            if (view.final) return;
            continue;
          }
          if (ac.signal.aborted) return;
          await new Promise<void>((resolve) => (wake = resolve));
        }
      } finally {
        signal?.removeEventListener('abort', stop);
        ac.abort();
        await following;
      }
    },
    close: () => env.close(),
  };
}
