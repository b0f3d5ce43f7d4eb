// The executor: follows the event store, schedules each waiting execution to a live worker by
// appending SchedulingStarted + ExecutionHandedOff (compare-and-swap, so several executors can
// run at once), and only then publishes the work. It also answers executions whose baton came
// back (retry with the action's backoff, or abandon), and its monitor enforces every deadline
// the history holds: handoffs not started in time are reclaimed, workers whose heartbeat went
// stale are declared lost and what they held is reclaimed, runs past their start-to-close
// deadline (whose worker did not time them out itself) are timed out, and handoffs not yet
// started are re-published (NATS is a doorbell, not a record). Every one of those is an
// ordinary compare-and-swap append, so several executors doing it at once is harmless.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { START, type EventStore, type StoredEvent } from '../eventstore/event-store.ts';
import type { DeadLetter, WorkMessage, WorkTransport } from '../transport/work-transport.ts';
import { BatonError, NotFoundError, RejectedCommandError, WrongExpectedRevisionError } from '../errors.ts';
import { isFinal, type ExecutionContext } from '../../actors/execution.machine.ts';
import { recordWorkerEvent } from '../worker/worker-lifecycle.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';
import { WORKER_STREAM_PREFIX } from '../../schemas/worker-events.ts';
import { followStore } from '../eventstore/follow.ts';
import { DEFAULT_RUNTIME } from '../actions/action.ts';
import { SchedulingIndex, type ActionGauges, type RetryDecision, type WaitingExecution } from './scheduling-index.ts';

/** What the executor needs to know about live workers (the liveness table provides it). */
export interface WorkerDirectory {
  list(): Promise<{ workerId: string; actions: string[]; runtimes: string[]; capacity: number; draining: boolean; ageMs: number; heartbeatAt: Date }[]>;
}

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
  const republishAfterMs = o.republishAfterMs ?? 2_000;
  const timeoutGraceMs = o.timeoutGraceMs ?? 5_000;
  const monitorEveryMs = o.monitorEveryMs ?? Math.max(50, Math.min(1_000, Math.floor(scheduleToStartMs / 4), Math.floor(staleAfterMs / 6)));
  const parallelism = o.parallelism ?? 32;
  const backoff = o.retryBackoff ?? { initialMs: 1_000, multiplier: 2, maxMs: 60_000 };
  const index = new SchedulingIndex();
  /** handoff event id → when this executor last published it and how many times. */
  const published = new Map<string, { at: number; times: number }>();
  /** Workers this executor declared lost while their heartbeat stays stale. */
  const declaredLost = new Set<string>();
  const ac = new AbortController();

  const metrics = o.registry && {
    scheduled: new Counter({ name: 'baton_executor_handoffs_total', help: 'Executions handed off to a worker', registers: [o.registry] }),
    terminal: new Counter({ name: 'baton_executions_terminal_total', help: 'Executions that reached a terminal state', labelNames: ['status'], registers: [o.registry] }),
    waiting: new Gauge({ name: 'baton_executor_waiting', help: 'Executions waiting for a worker', registers: [o.registry], collect() { this.set(index.waitingCount()); } }),
    handedOff: new Gauge({ name: 'baton_executor_handed_off', help: 'Executions handed off and not yet started', registers: [o.registry], collect() { this.set(index.handedOff().length); } }),
    enforced: new Counter({ name: 'baton_executor_deadlines_enforced_total', help: 'Reclaims, timeouts and lost workers the monitor recorded', labelNames: ['kind'], registers: [o.registry] }),
    ...actionGauges(o.registry),
    queueDepth: new Gauge({
      name: 'baton_work_queue_depth',
      help: 'Work messages published and not yet acknowledged',
      registers: [o.registry],
      async collect() {
        this.set(await o.transport.depth());
      },
    }),
  };

  /** Per-action gauges from this executor's index (labelled by action only: keys are unbounded). */
  function actionGauges(registry: Registry) {
    const perAction = (name: string, help: string, pick: (g: ActionGauges) => number | undefined) =>
      new Gauge({
        name,
        help,
        labelNames: ['action'],
        registers: [registry],
        collect() {
          this.reset();
          for (const [action, g] of index.actionGauges()) {
            const v = pick(g);
            if (v !== undefined) this.set({ action }, v);
          }
        },
      });
    return {
      actionQueued: perAction('baton_action_queued', 'Executions of the action waiting in Requested for a slot or a worker (retries waiting for their time included)', (g) => g.waiting),
      actionSlots: perAction('baton_action_slots_held', 'Concurrency slots the action holds: executions scheduled, handed off or running, not yet final or returned to the executor', (g) => g.held),
      actionLimit: perAction('baton_action_concurrency_limit', 'The concurrency limit the action\'s workers advertise (per key when it declares one); absent when it has none', (g) => g.limit),
      actionAtLimit: perAction('baton_action_queued_at_limit', 'Of the queued executions, those whose action (or key) is at its concurrency limit now', (g) => g.atLimit),
    };
  }

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

  async function mapLimit<T>(items: T[], fn: (item: T) => Promise<void>): Promise<void> {
    let i = 0;
    await Promise.all(
      Array.from({ length: Math.min(parallelism, items.length) }, async () => {
        while (i < items.length) await fn(items[i++]!);
      }),
    );
  }

  async function schedulePass(): Promise<void> {
    const ready = index.ready(now());
    if (ready.length === 0) return;
    // A worker whose WorkerStarted this index has not applied yet (its liveness row can be a
    // moment ahead of our subscription) gets nothing yet: its policies, concurrency limits
    // included, are not known here. Applying that event kicks another pass. Nor does one whose
    // stream says Lost, even if it beats again (SIGCONT): it must announce itself again first.
    const fit = (await o.workers.list()).filter((w) => !w.draining && w.ageMs < staleAfterMs && index.workerStatus(w.workerId) === 'active');
    const planned = new Map<string, number>();
    /** Concurrency slots this pass plans to take, per bucket: the index counts them only once appended. */
    const plannedSlots = new Map<string, number>();
    const assignments: { execution: WaitingExecution; worker: (typeof fit)[number] }[] = [];
    for (const execution of ready) {
      // ready() already offers no more of a bucket than it has free slots; counting here too
      // keeps the pass strict on its own. A full bucket skips only its own executions.
      if ((plannedSlots.get(execution.bucket) ?? 0) >= index.freeSlots(execution.action, execution.bucket)) continue;
      // Least loaded first, counting what this pass already planned.
      let best: (typeof fit)[number] | undefined;
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
    await mapLimit(assignments, async ({ execution, worker }) => {
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
      for (const m of messages) published.set(m.messageId, { at: now(), times: 1 });
      metrics?.scheduled.inc(messages.length);
      log.debug({ count: messages.length }, 'handed off and published');
    }
  }

  /** The runtime tag the action's workers advertise: the work subject's `<runtime>` token. */
  const runtimeOf = (action: string): string => index.policyOf(action)?.runtime ?? DEFAULT_RUNTIME;

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
    await mapLimit(pending, async (d: RetryDecision) => {
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

  // --- the monitor: every deadline in the history is enforced by an ordinary append
  const messageOf = (h: ReturnType<typeof index.handedOff>[number]): WorkMessage => ({
    messageId: h.handoffEventId,
    executionId: h.executionId,
    workerId: h.workerId,
    runtime: runtimeOf(h.action),
    action: h.action,
    attempt: h.attempt,
    handoffRevision: String(h.handoffRevision),
    publishedAt: new Date(now()).toISOString(),
  });

  /** Append for the monitor; a refusal means the state moved on (started, finished, another executor acted). */
  async function enforce(kind: string, executionId: string, command: Parameters<ExecutionRuntime['dispatch']>[1]): Promise<void> {
    try {
      const r = await o.runtime.dispatch(executionId, command);
      if (r.appended) {
        metrics?.enforced.inc({ kind });
        log.warn({ executionId, kind }, `monitor: ${kind}`);
      }
    } catch (err) {
      if (err instanceof RejectedCommandError) log.debug({ executionId, kind, reason: err.message }, 'monitor: nothing to enforce any more');
      else log.error({ executionId, kind, err }, 'monitor: append failed; will try again');
    }
  }

  /**
   * Re-publish handoffs not started yet: after republishAfterMs, then with doubling gaps. The
   * message id is the handoff's event id, so a message the broker still holds is deduplicated;
   * one it lost (restart, wiped store, a crash between append and publish) is delivered again.
   */
  async function republish(): Promise<void> {
    const due = index.handedOff().filter((h) => {
      const last = published.get(h.handoffEventId);
      const since = last ? now() - last.at : now() - h.handedOffAt;
      return since >= republishAfterMs * 2 ** Math.min(4, (last?.times ?? 1) - 1);
    });
    if (due.length === 0) return;
    await o.transport.publish(due.map(messageOf));
    for (const h of due) published.set(h.handoffEventId, { at: now(), times: (published.get(h.handoffEventId)?.times ?? 0) + 1 });
    log.info({ count: due.length, executionIds: due.slice(0, 10).map((h) => h.executionId) }, 're-published handoffs not started yet');
  }

  /** executionId → when this executor last rang its worker about the cancel request. */
  const rung = new Map<string, number>();
  const RING_EVERY_MS = 1_000;

  /**
   * Tell each worker holding an execution with a cancel request to stop it. The ring is a
   * doorbell (not durable), so it repeats until the execution leaves the worker; the worker's
   * ExecutionCancelled (or a reclaim, then our own) ends it.
   */
  async function ringCancelRequests(): Promise<void> {
    const held = index.cancelRequestsHeld();
    const stillHeld = new Set(held.map((r) => r.executionId));
    for (const id of rung.keys()) if (!stillHeld.has(id)) rung.delete(id);
    const due = held.filter((r) => now() - (rung.get(r.executionId) ?? -Infinity) >= RING_EVERY_MS);
    await mapLimit(due, async (r) => {
      rung.set(r.executionId, now());
      await o.transport.sendSignal(r.workerId, { kind: 'cancel', executionId: r.executionId, attempt: r.attempt, reason: r.reason });
      log.debug({ executionId: r.executionId, workerId: r.workerId }, 'asked the worker to cancel');
    });
  }

  async function reclaimExpiredHandoffs(): Promise<void> {
    await mapLimit(index.expiredHandoffs(now()), (h) =>
      enforce('schedule-to-start reclaim', h.executionId, {
        type: 'OwnershipReclaimed',
        data: { reason: 'schedule-to-start', workerId: h.workerId, attempt: h.attempt },
        by: 'executor',
      }),
    );
  }

  /**
   * When this executor last started seeing the database without a break. Heartbeats stop for
   * everyone while the database is down, so right after an outage every worker looks stale:
   * no worker is declared lost until we have been connected for a whole staleness period.
   */
  let connectedSince: number | undefined;

  /** A worker whose heartbeat went stale is lost: record it, then reclaim everything it held. */
  async function reclaimFromLostWorkers(): Promise<void> {
    let workers;
    try {
      workers = await o.workers.list();
    } catch (err) {
      connectedSince = undefined;
      throw err;
    }
    connectedSince ??= now();
    if (now() - connectedSince < staleAfterMs) return;
    for (const w of workers) {
      if (w.ageMs < staleAfterMs) {
        declaredLost.delete(w.workerId); // it came back (or never left): it may be declared again later
        continue;
      }
      const held = index.heldBy(w.workerId);
      const status = index.workerStatus(w.workerId);
      if (declaredLost.has(w.workerId) && held.length === 0) continue;
      if (status !== 'lost' && status !== 'stopped') {
        try {
          await recordWorkerEvent(o.store, w.workerId, 'WorkerLost', {
            lastHeartbeatAt: w.heartbeatAt.toISOString(),
            reason: `no heartbeat for ${Math.round(w.ageMs / 1000)} s (the limit is ${Math.round(staleAfterMs / 1000)} s)`,
          }, 'executor');
          metrics?.enforced.inc({ kind: 'worker lost' });
          log.warn({ workerId: w.workerId, ageMs: w.ageMs, holds: held.length }, `worker ${w.workerId} declared lost`);
        } catch (err) {
          // Another executor recorded it first, or the stream moved on: the reclaims below still apply.
          if (!(err instanceof BatonError || err instanceof WrongExpectedRevisionError)) throw err;
        }
      }
      declaredLost.add(w.workerId);
      await mapLimit(held, (x) =>
        enforce('worker-lost reclaim', x.executionId, {
          type: 'OwnershipReclaimed',
          data: { reason: 'worker-lost', workerId: w.workerId, attempt: x.attempt },
          by: 'executor',
        }),
      );
    }
  }

  /**
   * Reclaim at once what a previous process of a worker id held when a new process announced
   * itself under that id: that process is gone (kill -9, OOM, a crash), so waiting for its
   * heartbeat to go stale or its message's ack-wait would only delay the retry. A start that
   * landed after the announcement is the new process's own and is left alone.
   */
  async function reclaimOrphans(): Promise<void> {
    await mapLimit(index.takeOrphans(), async (x) => {
      try {
        const loaded = await o.runtime.load(x.executionId);
        const c = loaded.snapshot.context;
        if (c.owner !== `worker:${x.workerId}` || c.attempt !== x.attempt) return;
        const start = loaded.events.findLast((e) => e.type === 'ExecutionStarted');
        if (start && start.globalPosition > x.announcedAt) return;
        const r = await o.runtime.dispatch(
          x.executionId,
          { type: 'OwnershipReclaimed', data: { reason: 'worker-restarted', workerId: x.workerId, attempt: x.attempt }, by: 'executor' },
          { known: loaded },
        );
        if (r.appended) {
          metrics?.enforced.inc({ kind: 'restart reclaim' });
          log.warn({ executionId: x.executionId, workerId: x.workerId, attempt: x.attempt }, `reclaimed from worker ${x.workerId}: it restarted while holding it`);
        }
      } catch (err) {
        if (err instanceof RejectedCommandError || err instanceof NotFoundError) return; // moved on meanwhile
        log.error({ executionId: x.executionId, err }, 'restart reclaim failed; the lost-worker and schedule-to-start checks still apply');
      }
    });
  }

  /** Runs past their start-to-close deadline (plus a grace for the worker to say so itself). */
  async function timeOutOverdueRuns(): Promise<void> {
    await mapLimit(index.overdueRuns(now(), timeoutGraceMs), (r) =>
      enforce('start-to-close timeout', r.executionId, {
        type: 'ExecutionTimedOut',
        data: { limit: 'start-to-close', deadline: r.deadline! },
        by: 'executor',
      }),
    );
  }

  /**
   * A work message that ran out of deliveries: fail its execution, clearly, if that worker
   * still holds that attempt. Anything else (it finished meanwhile, was reclaimed, a late ack
   * raced the move) means there is nothing to fail; a dead letter seen twice is harmless.
   */
  async function onDeadLetter(d: DeadLetter): Promise<void> {
    const { executionId, attempt } = d.message;
    let loaded;
    try {
      loaded = await o.runtime.load(executionId);
    } catch (err) {
      if (err instanceof NotFoundError) return;
      throw err;
    }
    const c = loaded.snapshot.context;
    if (isFinal(loaded.snapshot) || c.owner !== `worker:${d.workerId}` || c.attempt !== attempt) return;
    try {
      // One append: reclaim and abandon together, so no retry is scheduled in between.
      await o.runtime.dispatch(
        executionId,
        [
          { type: 'OwnershipReclaimed', data: { reason: 'dead-letter', workerId: d.workerId, attempt }, by: 'executor' },
          {
            type: 'ExecutionAbandoned',
            data: { reason: `its work message for worker ${d.workerId} was dead-lettered (${d.reason}); see \`baton dlq show ${d.messageId}\`` },
            by: 'executor',
          },
        ],
        { known: loaded },
      );
      metrics?.enforced.inc({ kind: 'dead letter' });
      log.warn({ executionId, workerId: d.workerId, messageId: d.messageId }, 'execution abandoned: its work message was dead-lettered');
    } catch (err) {
      if (!(err instanceof RejectedCommandError)) throw err; // thrown: the transport hands it over again
    }
  }

  let monitoring: Promise<void> | undefined;
  let caughtUp = false; // a half-built index would see deadlines that later events already met
  const monitorTimer = setInterval(() => {
    if (monitoring || ac.signal.aborted || !caughtUp) return;
    monitoring = (async () => {
      for (const [name, step] of [
        ['re-publishing handoffs', republish],
        ['ringing cancel requests', ringCancelRequests],
        ['reclaiming expired handoffs', reclaimExpiredHandoffs],
        ['detecting lost workers', reclaimFromLostWorkers],
        ['timing out overdue runs', timeOutOverdueRuns],
      ] as const) {
        try {
          await step();
        } catch (err) {
          log.error({ err }, `monitor: ${name} failed; will try again`);
        }
      }
    })().finally(() => (monitoring = undefined));
  }, monitorEveryMs);
  monitorTimer.unref();

  /** The completion listener and the scheduler's trigger: read-only for executions it does not own. */
  function observe(event: StoredEvent): void {
    const executionId = event.streamId.slice(EXECUTION_STREAM_PREFIX.length);
    const handoff = index.handoffOf(executionId);
    const { unblocks, terminal } = index.apply(event);
    if (handoff && !index.handoffOf(executionId)) published.delete(handoff.handoffEventId);
    if (terminal) {
      metrics?.terminal.inc({ status: terminal });
      log.info({ executionId, status: terminal, revision: Number(event.revision) }, `execution ${executionId} reached terminal state ${terminal}`);
    }
    if (unblocks) kick();
    if (event.type === 'WorkerStarted' && caughtUp) reclaimOrphans().catch((err: unknown) => log.error({ err }, 'restart reclaims failed'));
    if (event.type === 'ExecutionCancelRequested') ringCancelRequests().catch((err: unknown) => log.warn({ err, executionId }, 'could not ring the worker about a cancel request; the monitor rings again'));
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

  const deadLetters = ready.then(() => (o.handleDeadLetters === false ? undefined : o.transport.onDeadLetter(onDeadLetter)));
  deadLetters.catch((err: unknown) => log.error({ err }, 'could not subscribe to dead letters'));

  // Follow from the last event applied, resuming after database errors (followStore).
  const following = ready.then((from) => {
    kick();
    // Restarts the catch-up saw whose previous processes' executions nothing has settled yet.
    reclaimOrphans().catch((err: unknown) => log.error({ err }, 'restart reclaims failed'));
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
