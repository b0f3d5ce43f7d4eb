// One delivery, start to finish: check the baton is still ours, append ExecutionStarted at the
// handoff's revision (losing that race means we are no longer the owner: drop the work
// unrun), validate the input, run the action, append the outcome, and only then ack. A cancel
// request ends it as Cancelled: before the start, instead of running; during the run, by
// aborting the action's signal (see cancelHeldExecution for the handoffs no run holds yet).
import { TAG_LIMITS, tagsProblems } from '../input/tags.ts';
import type { Logger } from 'pino';
import { statusOf, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { InvalidActionInputError, isA, isRetryable, runAction, toErrorInfo, type ActionRegistry, type AnyActionDefinition } from '../actions/index.ts';
import { DEFAULT_ACTION_VERSION } from '../input/action-versions.ts';
import { refuseAny, under } from '../input/errors.ts';
import type { Json } from '../input/rules.ts';
import { ActionAbortedError, ActionTimeoutError } from '../actions/registry.ts';
import { settlesWithin } from '../async/settles-within.ts';
import { NotFoundError, RejectedCommandError } from '../errors.ts';
import { persistently } from './persistently.ts';
import { traceOutcome } from '../observability/tracing.ts';
import { restoreExecution } from '../runtime/carried-execution.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';
import type { Delivery } from '../transport/work-transport.ts';
import type { DispatchBatcher } from './dispatch-batcher.ts';
import type { ErrorInfo, ExecutionEvent } from '../../schemas/events.ts';
import { newId } from '../ids.ts';
import { CancelRequested, LimitReached, OutOfTouch } from './run-stops.ts';
import { RunHistory, storedResult } from './run-history.ts';

type ExecutionStartedData = Extract<ExecutionEvent, { type: 'ExecutionStarted' }>['data'];

export interface RunDeliveryDeps {
  workerId: string;
  runtime: ExecutionRuntime;
  actions: ActionRegistry;
  log: Logger;
  /** Aborts every run of this worker (shutdown past its grace time). */
  shutdown: AbortSignal;
  /** Executions this worker is running now. */
  running: Set<string>;
  /** Per running execution: abort its run because a cancel was requested (filled while it runs). */
  cancellers?: Map<string, (attempt: number, reason: string) => void>;
  /** Per running execution: stop its run because this worker is out of touch (OutOfTouch; filled while it runs). */
  fences?: Map<string, (reason: OutOfTouch) => void>;
  /** Where ExecutionStarted and the outcome are appended: coalesced with other runs' (dispatch-batcher.ts). Default: one append each. */
  appends?: Pick<DispatchBatcher, 'dispatch'>;
  onStarted?: (pickupMs: number) => void;
  onFinished?: (outcome: 'completed' | 'failed' | 'timed-out' | 'cancelled' | 'lost' | 'released') => void;
  /** A run's action ended and its outcome (or release) is being stored; `recorded` resolves when that is done or given up. */
  onActionEnded?: (executionId: string, recorded: Promise<void>) => void;
  /** Append ExecutionProgressed at most this often per run (ms). */
  progressEveryMs?: number;
  /** start-to-close limit of a run whose action sets none (ms). Default 10 minutes. */
  startToCloseMs?: number;
  /**
   * A run stopped by the shutdown whose action ignored its abort signal: its execution stays held
   * by this worker (not released), for the executor to reclaim once this process is gone.
   */
  onDeafRun?: (executionId: string) => void;
}

/**
 * How long a run stopped by the shutdown has to return once aborted before it counts as deaf to
 * its signal: an action that honours it returns within milliseconds (it rejects on the abort).
 */
export const DEAF_RUN_GRACE_MS = 1_000;

/**
 * End a handoff this worker holds but has not started, when a cancel was requested: the owner
 * appends ExecutionCancelled. Returns whether it did. Used before a start, after a start lost
 * to a cancel request, and when the executor rings about a handoff no delivery reached yet.
 */
export async function cancelHeldExecution(runtime: ExecutionRuntime, workerId: string, executionId: string, log: Logger): Promise<boolean> {
  const me = `worker:${workerId}` as const;
  const loaded = await runtime.load(executionId);
  const { owner, cancelRequested } = loaded.snapshot.context;
  if (statusOf(loaded.snapshot) !== 'Scheduled' || owner !== me || cancelRequested === undefined) return false;
  try {
    await runtime.dispatch(executionId, { type: 'ExecutionCancelled', data: { reason: cancelRequested }, by: me }, { known: loaded });
    log.info({ executionId }, 'cancelled before it started, as requested');
    return true;
  } catch (err) {
    if (err instanceof RejectedCommandError) return false; // moved on meanwhile (reclaimed): not ours to end
    throw err;
  }
}

type Outcome =
  | { type: 'ExecutionCompleted'; data: { result: Json } }
  | { type: 'ExecutionFailed'; data: { error: ErrorInfo; retryable: boolean } }
  | { type: 'ExecutionTimedOut'; data: { limit: 'start-to-close' | 'heartbeat'; deadline: string } }
  | { type: 'ExecutionCancelled'; data: { reason: string } };

/**
 * The outcome of a run whose action threw `err` or was stopped. Never throws, whatever was
 * thrown (a Proxy, throwing getters: isA, toErrorInfo): a throw here would leave the execution
 * Running with no outcome and the worker's slot held.
 */
function failedOutcome(err: unknown, action: AnyActionDefinition | undefined, stop: unknown, deadline: string): Outcome {
  // However the action reacted to a cancel (AbortError, its own error), it was cancelled.
  if (stop instanceof CancelRequested) return { type: 'ExecutionCancelled', data: { reason: stop.reason } };
  const limit = stop instanceof LimitReached ? stop : isA(err, ActionTimeoutError) ? new LimitReached('start-to-close', deadline) : undefined;
  if (limit) return { type: 'ExecutionTimedOut', data: { limit: limit.limit, deadline: limit.deadline } };
  const retryable = !isA(err, InvalidActionInputError) && (action ? isRetryable(err, action) : false);
  return { type: 'ExecutionFailed', data: { error: toErrorInfo(err), retryable } };
}

const FINISHED = { ExecutionCompleted: 'completed', ExecutionFailed: 'failed', ExecutionTimedOut: 'timed-out', ExecutionCancelled: 'cancelled' } as const;

/**
 * Where a delivery starts from: what this process already holds at (or past) the handoff, else
 * the state the message carries (a first delivery only: a redelivery may find this worker's own
 * earlier start, which only the store shows), else the store.
 */
function knownAtHandoff(delivery: Delivery, runtime: ExecutionRuntime): { snapshot: ExecutionSnapshot; revision: bigint } | undefined {
  const { message } = delivery;
  const handoffRevision = BigInt(message.handoffRevision);
  const held = runtime.cached(message.executionId);
  if (held && held.revision >= handoffRevision) return held;
  if (delivery.deliveryCount !== 1) return undefined;
  const snapshot = restoreExecution(message.execution);
  return snapshot && { snapshot, revision: handoffRevision };
}

/** What both halves of a run (before and after its start) append as, log with and append through. */
interface RunContext {
  me: `worker:${string}`;
  log: Logger;
  append: Pick<DispatchBatcher, 'dispatch'>['dispatch'];
}

function runContext(deps: RunDeliveryDeps, message: Delivery['message']): RunContext {
  return {
    me: `worker:${deps.workerId}`,
    log: deps.log.child({ executionId: message.executionId, attempt: message.attempt }),
    append: deps.appends ? (...a) => deps.appends!.dispatch(...a) : (...a) => deps.runtime.dispatch(...a),
  };
}

export async function runDelivery(delivery: Delivery, deps: RunDeliveryDeps, fromStore = false): Promise<void> {
  const { message } = delivery;
  const { workerId, runtime } = deps;
  const context = runContext(deps, message);
  const { me, log, append } = context;

  let loaded;
  try {
    const known = fromStore ? undefined : knownAtHandoff(delivery, runtime);
    loaded = known ? { executionId: message.executionId, ...known } : await runtime.load(message.executionId, { fresh: fromStore });
  } catch (err) {
    if (err instanceof NotFoundError) {
      log.error('work for an execution that does not exist; dropping it');
      await delivery.term();
      return;
    }
    throw err; // the transport naks: a database hiccup is worth another delivery
  }
  const ctx = loaded.snapshot.context;
  if (deps.running.has(message.executionId)) {
    // A redelivery while we still run it (ack-wait passed): the run in progress will settle it.
    await delivery.term();
    return;
  }
  if (statusOf(loaded.snapshot) === 'Running' && ctx.owner === me && ctx.attempt === message.attempt) {
    // We started this attempt but no run of ours holds it: this process lost it (its outcome could
    // not be recorded, or an earlier incarnation of this worker died). Hand the baton back so the
    // executor retries it as a new, visible attempt instead of leaving it Running.
    try {
      await runtime.dispatch(
        message.executionId,
        { type: 'OwnershipReleased', data: { reason: `worker ${workerId} lost track of attempt ${ctx.attempt} (its outcome was never recorded)` }, by: me },
        { known: loaded },
      );
      log.warn('found an attempt of ours that no run holds; released it for a retry');
      deps.onFinished?.('released');
    } catch (err) {
      if (!(err instanceof RejectedCommandError)) throw err;
    }
    await delivery.term();
    return;
  }
  if (statusOf(loaded.snapshot) === 'Scheduled' && ctx.owner === me && ctx.cancelRequested !== undefined) {
    if (await cancelHeldExecution(runtime, workerId, message.executionId, log)) deps.onFinished?.('cancelled');
    await delivery.term();
    return;
  }
  if (statusOf(loaded.snapshot) !== 'Scheduled' || ctx.owner !== me || ctx.attempt !== message.attempt) {
    log.info({ status: statusOf(loaded.snapshot), owner: ctx.owner, currentAttempt: ctx.attempt }, 'not ours to run any more; dropping the message');
    await delivery.term();
    return;
  }

  const action = deps.actions.get(ctx.action);
  const handed = ctx.actionVersion ?? DEFAULT_ACTION_VERSION;
  if (action && (action.version ?? DEFAULT_ACTION_VERSION) !== handed) {
    // Handed off for another version than this process runs (the id restarted with new code in
    // between): the machine would refuse our start, so hand the baton back for the right fleet.
    try {
      const reason = `worker ${workerId} runs ${ctx.action}@${action.version ?? DEFAULT_ACTION_VERSION}, not version ${handed}`;
      await runtime.dispatch(message.executionId, { type: 'OwnershipReleased', data: { reason }, by: me }, { known: loaded });
      deps.onFinished?.('released');
    } catch (err) {
      if (!(err instanceof RejectedCommandError)) throw err;
    }
    await delivery.term();
    return;
  }
  let started;
  try {
    started = await append(message.executionId, { type: 'ExecutionStarted', data: startedData(ctx.attempt, action, deps.startToCloseMs), by: me }, { known: loaded });
  } catch (err) {
    if (err instanceof RejectedCommandError) {
      // Started from a remembered state: what the store holds now decides what to do instead.
      if (!fromStore) return runDelivery(delivery, deps, true);
      // A cancel request that landed between our read and the start is ours to carry out.
      if (await cancelHeldExecution(runtime, workerId, message.executionId, log)) deps.onFinished?.('cancelled');
      else log.info({ reason: err.message }, 'lost the baton before starting (reclaimed or cancelled); not running it');
      await delivery.term();
      return;
    }
    throw err;
  }
  await runStarted(delivery, deps, started, context);
}

/**
 * ExecutionStarted's data for a run of `action` (undefined: not offered here) starting now. The
 * start-to-close deadline travels in it: the history says which limit applies.
 */
export function startedData(attempt: number, action: AnyActionDefinition | undefined, defaultStartToCloseMs = 10 * 60_000): ExecutionStartedData {
  const deadline = new Date(Date.now() + (action?.timeoutMs ?? defaultStartToCloseMs)).toISOString();
  const stall = action?.stallTimeoutMs;
  return { attempt, deadline, ...(stall !== undefined && { stallTimeoutMs: stall }), ...(action?.version !== undefined && { actionVersion: action.version }) };
}

/**
 * The run of a delivery whose ExecutionStarted is stored (`started`: the state it left): run the
 * action, append the outcome, ack. Also where an eager dispatch (eager-dispatch.ts) begins, whose
 * start the executor stored with the handoff.
 */
export async function runStarted(
  delivery: Delivery,
  deps: RunDeliveryDeps,
  started: { snapshot: ExecutionSnapshot; revision: bigint },
  { me, log, append }: RunContext = runContext(deps, delivery.message),
): Promise<void> {
  const { message } = delivery;
  const { workerId, runtime } = deps;
  const ctx = started.snapshot.context;
  const action = deps.actions.get(ctx.action);
  // Set by every start (startedData); the fallback only satisfies the type.
  const deadline = ctx.deadline ?? startedData(ctx.attempt, action, deps.startToCloseMs).deadline!;
  deps.running.add(message.executionId);
  deps.onStarted?.(Date.now() - Date.parse(ctx.requestedAt));

  const abort = new AbortController();
  deps.cancellers?.set(message.executionId, (attempt, reason) => {
    if (attempt === ctx.attempt && !abort.signal.aborted) abort.abort(new CancelRequested(reason));
  });
  deps.fences?.set(message.executionId, (reason) => {
    if (!abort.signal.aborted) abort.abort(reason);
  });
  const onShutdown = () => abort.abort(deps.shutdown.reason);
  deps.shutdown.addEventListener('abort', onShutdown, { once: true });
  const closeTimer = setTimeout(() => abort.abort(new LimitReached('start-to-close', deadline)), Math.max(0, Date.parse(deadline) - Date.now()));
  // Liveness is not progress: any ctx.heartbeat() pushes this out, details or not.
  let heartbeatTimer: NodeJS.Timeout | undefined;
  const armHeartbeat = () => {
    if (action?.heartbeatTimeoutMs === undefined) return;
    clearTimeout(heartbeatTimer);
    const due = action.heartbeatTimeoutMs;
    heartbeatTimer = setTimeout(() => abort.abort(new LimitReached('heartbeat', new Date(Date.now()).toISOString())), due);
  };
  armHeartbeat();
  let tags: Record<string, string> = { ...ctx.tags };
  const history = new RunHistory(
    {
      runtime,
      executionId: message.executionId,
      me,
      log,
      progressEveryMs: deps.progressEveryMs ?? 1_000,
      onFenced: (err) => abort.abort(err), // someone else owns it now
    },
    { snapshot: started.snapshot, revision: started.revision },
  );

  let outcome: Outcome;
  /** The action's own run, when we stopped waiting for it (an abort) before it returned. */
  let stillRunning: Promise<unknown> | undefined;
  try {
    if (!action) throw Object.assign(new Error(`worker ${workerId} does not offer action ${ctx.action}`), { name: 'UnknownAction' });
    const result = await runAction(action, ctx.input, {
      executionId: message.executionId,
      attempt: ctx.attempt,
      signal: abort.signal,
      log,
      heartbeat(details?: unknown) {
        // Bad details throw here, naming the field, before anything else happens.
        if (details !== undefined) history.progress(details);
        armHeartbeat();
        // Cheap however often it is called: the transport throttles the signal (working-throttle.ts).
        void delivery.working().catch(() => undefined);
      },
      tag(added: Record<string, string>) {
        // Checked here, so the action hears of a bad tag at once rather than the machine refusing it later.
        refuseAny(under('tags', tagsProblems(added)));
        const merged = { ...tags, ...added };
        if (Object.keys(merged).length > TAG_LIMITS.maxTags) refuseAny([{ path: 'tags', message: `an execution has at most ${TAG_LIMITS.maxTags} tags (it would have ${Object.keys(merged).length})` }]);
        tags = merged;
        return history.tag(added);
      },
    });
    outcome = { type: 'ExecutionCompleted', data: { result: storedResult(result) } };
  } catch (err) {
    outcome = failedOutcome(err, action, abort.signal.reason, deadline);
    stillRunning = isA(err, ActionAbortedError) ? (err as ActionAbortedError).running : undefined;
  } finally {
    deps.cancellers?.delete(message.executionId);
    deps.fences?.delete(message.executionId);
    deps.shutdown.removeEventListener('abort', onShutdown);
    clearTimeout(closeTimer);
    clearTimeout(heartbeatTimer);
  }
  // The last progress reported is recorded before the outcome, unless the run lost the store
  // (out of touch) or the execution (fenced): it would only be refused, or wait on the database.
  await history.settle(!(abort.signal.reason instanceof OutOfTouch) && !(abort.signal.reason instanceof RejectedCommandError));
  const known = history.known;

  // One event id for every try: a try whose commit went unanswered is recognised by the next.
  const endEventId = newId();
  // Built whether or not anyone hears of it: `?.()` would skip evaluating the promise, and the resolver with it.
  let recorded!: () => void;
  const outcomeRecorded = new Promise<void>((resolve) => (recorded = resolve));
  deps.onActionEnded?.(message.executionId, outcomeRecorded);
  const outOfTouch = abort.signal.reason instanceof OutOfTouch;
  try {
    if (outOfTouch && outcome.type === 'ExecutionFailed' && stillRunning && !(await settlesWithin(stillRunning, DEAF_RUN_GRACE_MS))) {
      // Nothing here can end its code: the attempt the executor starts elsewhere may overlap it.
      log.error({ action: ctx.action }, `action ${ctx.action} ignored its abort signal when worker ${workerId} lost touch with the database; its execution may be retried elsewhere while it still runs here`);
    } else if (outOfTouch && outcome.type === 'ExecutionFailed') {
      // Stopped so it cannot overlap a retry: hand the baton back (refused if it was reclaimed meanwhile).
      await persistently('releasing the execution', log, () =>
        append(message.executionId, { type: 'OwnershipReleased', data: { reason: (abort.signal.reason as OutOfTouch).message }, by: me, eventId: endEventId }, { known }),
      );
      deps.onFinished?.('released');
    } else if (deps.shutdown.aborted && outcome.type === 'ExecutionFailed' && stillRunning && !(await settlesWithin(stillRunning, DEAF_RUN_GRACE_MS))) {
      // Its code still runs here: released now, the next attempt could start on another worker
      // alongside it. The baton stays with this worker; once this process is gone, the executor
      // reclaims it (worker lost, or at once when this worker id starts again).
      log.error({ action: ctx.action }, `action ${ctx.action} ignored its abort signal at the shutdown timeout; its execution stays held by worker ${workerId} until this process is gone`);
      deps.onDeafRun?.(message.executionId);
    } else if (deps.shutdown.aborted && outcome.type === 'ExecutionFailed') {
      // Stopped by our own shutdown, not by the action: hand the baton back for another worker.
      await persistently('releasing the execution', log, () =>
        append(message.executionId, { type: 'OwnershipReleased', data: { reason: `worker ${workerId} shut down before the run finished` }, by: me, eventId: endEventId }, { known }),
      );
      deps.onFinished?.('released');
    } else {
      await traceOutcome(delivery, outcome.type, (trace) =>
        persistently('recording the outcome', log, () => append(message.executionId, { ...outcome, by: me, eventId: endEventId, ...trace }, { known })),
      );
      deps.onFinished?.(FINISHED[outcome.type]);
      log.debug({ outcome: outcome.type }, 'run finished');
    }
  } catch (err) {
    if (!(err instanceof RejectedCommandError)) throw err;
    // Fenced: the executor reclaimed the execution while we ran; our result is not history.
    log.warn({ reason: err.message }, 'lost the baton during the run; discarding its outcome');
    deps.onFinished?.('lost');
  } finally {
    deps.running.delete(message.executionId);
    recorded();
  }
  await delivery.ack();
}
