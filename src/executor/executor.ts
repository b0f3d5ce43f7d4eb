// The executor: follows the event store, schedules each waiting execution to a live worker by
// appending SchedulingStarted + ExecutionHandedOff (compare-and-swap, so several executors can
// run at once), and only then publishes the work. It also answers executions whose baton came
// back (retry with the action's backoff, or abandon). Its monitor (./monitor.ts) enforces every
// deadline the history holds and every absence the liveness table shows, each by an ordinary
// compare-and-swap append.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { START, type EventStore, type StoredEvent } from '../eventstore/event-store.ts';
import type { WorkMessage, WorkTransport } from '../transport/work-transport.ts';
import { RejectedCommandError } from '../errors.ts';
import type { ExecutionContext } from '../../actors/execution.machine.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';
import { WORKER_STREAM_PREFIX } from '../../schemas/worker-events.ts';
import { followStore } from '../eventstore/follow.ts';
import { DEFAULT_RUNTIME } from '../actions/action.ts';
import { createExecutorMetrics } from './executor-metrics.ts';
import { createMonitor } from './monitor.ts';
import { mapLimit } from './parallel.ts';
import { SchedulingIndex, type RetryDecision, type WaitingExecution } from './scheduling-index.ts';
import { fitForWork, type LiveWorker, type WorkerDirectory } from './worker-directory.ts';

export type { WorkerDirectory } from './worker-directory.ts';

export interface ExecutorOptions {
  store: EventStore;
  runtime: ExecutionRuntime;
  transport: WorkTransport;
  workers: WorkerDirectory;
  log: Logger;
  registry?: Registry;
  /** A worker whose heartbeat is older than this gets no work and is declared lost. */
  staleAfterMs?: number;
  /** Schedule-to-start deadline written into each handoff, unless the action sets its own. */
  scheduleToStartMs?: number;
  /** A handoff not seen started after this long is published again (then with backoff). */
  republishAfterMs?: number;
  /** How long past a run's start-to-close deadline the executor waits for the worker to time it out itself. */
  timeoutGraceMs?: number;
  /** An execution waiting this long while no live worker offers its action is abandoned (BATON_NO_WORKER_TIMEOUT). */
  noWorkerTimeoutMs?: number;
  /** How often the monitor looks for expired deadlines and stale workers. */
  monitorEveryMs?: number;
  /** Fail executions whose work message was dead-lettered (default true). */
  handleDeadLetters?: boolean;
  /** How many scheduling appends run at once. */
  parallelism?: number;
  retryBackoff?: { initialMs: number; multiplier: number; maxMs: number };
  clock?: () => number;
}

export interface Executor {
  /** Resolves once the executor has caught up with the event store and is scheduling. */
  ready: Promise<void>;
  stop(): Promise<void>;
  waiting(): number;
}

export function startExecutor(o: ExecutorOptions): Executor {
  const log = o.log;
  const now = o.clock ?? Date.now;
  const staleAfterMs = o.staleAfterMs ?? 30_000;
  const scheduleToStartMs = o.scheduleToStartMs ?? 30_000;
  const monitorEveryMs = o.monitorEveryMs ?? Math.max(50, Math.min(1_000, Math.floor(scheduleToStartMs / 4), Math.floor(staleAfterMs / 6)));
  const parallelism = o.parallelism ?? 32;
  const backoff = o.retryBackoff ?? { initialMs: 1_000, multiplier: 2, maxMs: 60_000 };
  const index = new SchedulingIndex();
  const ac = new AbortController();
  const metrics = o.registry && createExecutorMetrics(o.registry, index, o.transport, () => monitor.unoffered());
  /** The runtime tag the action's workers advertise: the work subject's `<runtime>` token. */
  const runtimeOf = (action: string): string => index.policyOf(action)?.runtime ?? DEFAULT_RUNTIME;
  const monitor = createMonitor({
    index,
    store: o.store,
    runtime: o.runtime,
    transport: o.transport,
    workers: o.workers,
    log,
    metrics,
    now,
    parallelism,
    staleAfterMs,
    republishAfterMs: o.republishAfterMs ?? 2_000,
    timeoutGraceMs: o.timeoutGraceMs ?? 5_000,
    noWorkerTimeoutMs: o.noWorkerTimeoutMs ?? 60 * 60_000,
    runtimeOf,
  });

  // --- the scheduling pass: coalesced, so a burst of events causes one pass, not one per event
  let pass: Promise<void> | undefined;
  let passAgain = false;
  let retryTimer: NodeJS.Timeout | undefined;
  let safetyTimer: NodeJS.Timeout | undefined;

  function kick(): void {
    if (ac.signal.aborted) return;
    if (pass) {
      passAgain = true;
      return;
    }
    pass = (async () => {
      try {
        do {
          passAgain = false;
          await decideRetries();
          await schedulePass();
        } while (passAgain && !ac.signal.aborted);
      } catch (err) {
        log.error({ err }, 'scheduling pass failed');
      } finally {
        pass = undefined;
        armTimers();
      }
    })();
  }

  function armTimers(): void {
    clearTimeout(retryTimer);
    clearTimeout(safetyTimer);
    if (ac.signal.aborted) return;
    const next = index.nextRetryAt(now());
    if (next !== undefined) retryTimer = setTimeout(kick, Math.max(0, next - now())).unref();
    // Workers can become fit without an event (a stale heartbeat resumes); re-check slowly.
    if (index.waitingCount() > 0 || index.retryPending().length > 0) safetyTimer = setTimeout(kick, 1_000).unref();
  }

  async function schedulePass(): Promise<void> {
    const ready = index.ready(now());
    if (ready.length === 0) return;
    const fit = (await o.workers.list()).filter((w) => fitForWork(w, index.workerStatus(w.workerId), staleAfterMs));
    const planned = new Map<string, number>();
    /** Concurrency slots this pass plans to take, per bucket: the index counts them only once appended. */
    const plannedSlots = new Map<string, number>();
    const assignments: { execution: WaitingExecution; worker: LiveWorker }[] = [];
    for (const execution of ready) {
      // ready() already offers no more of a bucket than it has free slots; counting here too
      // keeps the pass strict on its own. A full bucket skips only its own executions.
      if ((plannedSlots.get(execution.bucket) ?? 0) >= index.freeSlots(execution.action, execution.bucket)) continue;
      // Least loaded first, counting what this pass already planned.
      let best: LiveWorker | undefined;
      let bestLoad = Infinity;
      // A worker that let an earlier attempt expire unstarted is a last resort, used only when
      // no other live worker offers the action at all.
      const offering = fit.filter((w) => w.actions.includes(execution.action));
      const others = offering.filter((w) => !execution.avoid.includes(w.workerId));
      for (const w of others.length > 0 ? others : offering) {
        const held = index.loadOf(w.workerId) + (planned.get(w.workerId) ?? 0);
        if (held >= w.capacity) continue;
        const load = held / w.capacity;
        if (load < bestLoad) [best, bestLoad] = [w, load];
      }
      if (!best) continue; // waits in Requested until a worker fits; the next event or timer re-runs the pass
      planned.set(best.workerId, (planned.get(best.workerId) ?? 0) + 1);
      plannedSlots.set(execution.bucket, (plannedSlots.get(execution.bucket) ?? 0) + 1);
      assignments.push({ execution, worker: best });
    }
    const messages: WorkMessage[] = [];
    await mapLimit(assignments, parallelism, async ({ execution, worker }) => {
      const handoffId = randomUUID();
      try {
        const current = await o.runtime.load(execution.executionId);
        const r = await o.runtime.dispatch(
          execution.executionId,
          [
            { type: 'SchedulingStarted', data: { maxAttempts: attemptLimit(current.snapshot.context, execution.action) }, by: 'executor' },
            {
              type: 'ExecutionHandedOff',
              data: {
                workerId: worker.workerId,
                attempt: current.snapshot.context.attempt,
                deadline: new Date(now() + (index.policyOf(execution.action)?.scheduleToStartTimeoutMs ?? scheduleToStartMs)).toISOString(),
              },
              by: 'executor',
              eventId: handoffId,
            },
          ],
          { known: current },
        );
        // Take the slot now (SchedulingStarted is the event before the handoff), so the next
        // pass counts it even before the subscription brings these events back.
        if (r.appended) index.scheduling(execution.executionId, r.revision - 1n);
        else index.forget(execution.executionId);
        messages.push({
          messageId: handoffId,
          executionId: execution.executionId,
          workerId: worker.workerId,
          runtime: runtimeOf(execution.action),
          action: execution.action,
          attempt: current.snapshot.context.attempt,
          handoffRevision: String(r.revision),
          publishedAt: new Date(now()).toISOString(),
        });
      } catch (err) {
        if (err instanceof RejectedCommandError) {
          // Another executor scheduled it, or it was cancelled: nothing to do.
          index.forget(execution.executionId);
          log.debug({ executionId: execution.executionId, err: err.message }, 'not scheduled: state moved on');
        } else {
          log.error({ executionId: execution.executionId, err }, 'scheduling failed; will retry');
        }
      }
    });
    if (messages.length > 0) {
      await o.transport.publish(messages);
      monitor.published(messages.map((m) => m.messageId));
      metrics?.scheduled.inc(messages.length);
      log.debug({ count: messages.length }, 'handed off and published');
    }
  }

  /**
   * The attempt limit to record when scheduling: the action's advertised retry.maxAttempts,
   * capped by a limit the submission named; the current limit when the action sets none. Never
   * below the attempt being scheduled (the machine refuses that).
   */
  function attemptLimit(c: ExecutionContext, action: string): number {
    const own = index.policyOf(action)?.retry?.maxAttempts;
    const limit = own === undefined ? c.maxAttempts : Math.min(own, c.submittedMaxAttempts ?? own);
    return Math.max(limit, c.attempt);
  }

  /** Delay before the attempt after `attempt`: the action's advertised policy, else the default. */
  function retryDelay(action: string, attempt: number): number {
    const p = index.policyOf(action)?.retry;
    const [initialMs, multiplier, maxMs] = p ? [p.initialIntervalMs, p.multiplier, p.maxIntervalMs] : [backoff.initialMs, backoff.multiplier, backoff.maxMs];
    return Math.min(maxMs, Math.round(initialMs * multiplier ** Math.max(0, attempt - 1)));
  }

  async function decideRetries(): Promise<void> {
    const pending = index.retryPending();
    await mapLimit(pending, parallelism, async (d: RetryDecision) => {
      // The limit the history recorded when this attempt was scheduled. An execution scheduled before
      // machine version 4 recorded none: then the action's budget caps the request's, as it did.
      const maxAttempts = d.limitRecorded ? d.maxAttempts : Math.min(d.maxAttempts, index.policyOf(d.action)?.retry?.maxAttempts ?? Infinity);
      try {
        if (d.cancelRequested !== undefined) {
          // Someone asked to cancel while a worker held it; the baton came back instead: end it.
          await o.runtime.dispatch(d.executionId, { type: 'ExecutionCancelled', data: { reason: d.cancelRequested }, by: 'executor' });
        } else if (d.attempt < maxAttempts) {
          await o.runtime.dispatch(d.executionId, {
            type: 'ExecutionRetryScheduled',
            data: { attempt: d.attempt + 1, retryAt: new Date(now() + retryDelay(d.action, d.attempt)).toISOString(), reason: d.reason },
            by: 'executor',
          });
        } else {
          await o.runtime.dispatch(d.executionId, {
            type: 'ExecutionAbandoned',
            data: { reason: `gave up after ${d.attempt} of ${maxAttempts} attempts; last: ${d.reason}` },
            by: 'executor',
          });
        }
        index.decided(d.executionId);
      } catch (err) {
        if (err instanceof RejectedCommandError) index.decided(d.executionId); // another executor decided
        else log.error({ executionId: d.executionId, err }, 'retry decision failed; will retry');
      }
    });
  }

  let monitoring: Promise<void> | undefined;
  let caughtUp = false; // a half-built index would see deadlines that later events already met
  const monitorTimer = setInterval(() => {
    if (monitoring || ac.signal.aborted || !caughtUp) return;
    monitoring = monitor.tick().finally(() => (monitoring = undefined));
  }, monitorEveryMs);
  monitorTimer.unref();

  /** The completion listener and the scheduler's trigger: read-only for executions it does not own. */
  function observe(event: StoredEvent): void {
    const executionId = event.streamId.slice(EXECUTION_STREAM_PREFIX.length);
    const handoff = index.handoffOf(executionId);
    const { unblocks, terminal } = index.apply(event);
    if (handoff && !index.handoffOf(executionId)) monitor.handoffGone(handoff.handoffEventId);
    if (terminal) {
      metrics?.terminal.inc({ status: terminal });
      log.info({ executionId, status: terminal, revision: Number(event.revision) }, `execution ${executionId} reached terminal state ${terminal}`);
    }
    if (unblocks) kick();
    if (event.type === 'WorkerStarted' && caughtUp) monitor.reclaimOrphans().catch((err: unknown) => log.error({ err }, 'restart reclaims failed'));
    if (event.type === 'ExecutionCancelRequested') monitor.ringCancelRequests().catch((err: unknown) => log.warn({ err, executionId }, 'could not ring the worker about a cancel request; the monitor rings again'));
  }

  const ready = (async () => {
    // Catch up first, so the index is complete before the first scheduling decision.
    let after = START;
    for (;;) {
      const batch = await o.store.readAll({ after, limit: 5_000, streamPrefixes: [EXECUTION_STREAM_PREFIX, WORKER_STREAM_PREFIX] });
      if (batch.length === 0) break;
      for (const e of batch) index.apply(e);
      after = batch[batch.length - 1]!.globalPosition;
    }
    log.info({ waiting: index.waitingCount(), handedOff: index.handedOff().length }, 'executor caught up');
    caughtUp = true;
    return after;
  })();

  const deadLetters = ready.then(() => (o.handleDeadLetters === false ? undefined : o.transport.onDeadLetter(monitor.onDeadLetter)));
  deadLetters.catch((err: unknown) => log.error({ err }, 'could not subscribe to dead letters'));

  // Follow from the last event applied, resuming after database errors (followStore).
  const following = ready.then((from) => {
    kick();
    // Restarts the catch-up saw whose previous processes' executions nothing has settled yet.
    monitor.reclaimOrphans().catch((err: unknown) => log.error({ err }, 'restart reclaims failed'));
    return followStore({ store: o.store, after: from, streamPrefixes: [EXECUTION_STREAM_PREFIX, WORKER_STREAM_PREFIX], signal: ac.signal, log, who: 'executor' }, observe);
  });
  following.catch((err: unknown) => {
    if (!ac.signal.aborted) log.fatal({ err }, 'executor stopped following the event store');
  });

  return {
    ready: ready.then(() => undefined),
    waiting: () => index.waitingCount(),
    async stop() {
      ac.abort();
      clearInterval(monitorTimer);
      clearTimeout(retryTimer);
      clearTimeout(safetyTimer);
      await following.catch(() => undefined);
      await (await deadLetters.catch(() => undefined))?.stop();
      await pass;
      await monitoring;
    },
  };
}
