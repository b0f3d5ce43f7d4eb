// The executor's monitor: every deadline and every absence the history and the liveness table
// show is enforced by an ordinary compare-and-swap append, so several executors doing it at
// once is harmless (the loser finds the state moved on). Handoffs not started in time are
// reclaimed, and re-published meanwhile (NATS is a doorbell, not a record); workers whose
// heartbeat went stale are declared lost and what they held is reclaimed, as is what a worker
// id's previous process held when a new one announces itself; runs past their start-to-close
// deadline are timed out; executions no live worker offers an action for are abandoned after
// noWorkerTimeoutMs; cancel requests ring the worker holding them; dead-lettered work fails its
// execution.
import type { Logger } from 'pino';
import { isFinal } from '../../actors/execution.machine.ts';
import { mapLimit } from '../async/map-limit.ts';
import { formatDuration } from '../config.ts';
import { BatonError, NotFoundError, RejectedCommandError, WrongExpectedRevisionError } from '../errors.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';
import { recordWorkerEvent, type WorkerRuntime } from '../runtime/worker-kind.ts';
import type { DeadLetter, WorkTransport } from '../transport/work-transport.ts';
import type { ExecutorMetrics } from './executor-metrics.ts';
import type { SchedulingView } from './scheduling-view.ts';
import type { WaitingExecution } from './waiting-queue.ts';
import { workMessage } from './work-messages.ts';
import { fitForWork, type LiveWorker, type WorkerDirectory } from './worker-directory.ts';

export interface MonitorOptions {
  view: SchedulingView;
  /** Worker streams, for WorkerLost. */
  workerStreams: WorkerRuntime;
  runtime: ExecutionRuntime;
  transport: WorkTransport;
  workers: WorkerDirectory;
  log: Logger;
  metrics: ExecutorMetrics | undefined;
  now: () => number;
  parallelism: number;
  staleAfterMs: number;
  republishAfterMs: number;
  timeoutGraceMs: number;
  noWorkerTimeoutMs: number;
  /** The runtime tag an action's work messages carry. */
  runtimeOf(action: string): string;
}

export type Monitor = ReturnType<typeof createMonitor>;

export function createMonitor(o: MonitorOptions) {
  const { log, now, staleAfterMs, republishAfterMs } = o;
  /** handoff event id → when this executor last published it and how many times. */
  const published = new Map<string, { at: number; times: number }>();
  /** Workers this executor declared lost while their heartbeat stays stale. */
  const declaredLost = new Set<string>();


  /** Append for the monitor; a refusal means the state moved on (started, finished, another executor acted). */
  async function enforce(kind: string, executionId: string, command: Parameters<ExecutionRuntime['dispatch']>[1]): Promise<void> {
    try {
      const r = await o.runtime.dispatch(executionId, command);
      if (r.appended) {
        o.metrics?.enforced.inc({ kind });
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
    const due = o.view.handedOff().filter((h) => {
      const last = published.get(h.handoffEventId);
      const since = last ? now() - last.at : now() - h.handedOffAt;
      return since >= republishAfterMs * 2 ** Math.min(4, (last?.times ?? 1) - 1);
    });
    if (due.length === 0) return;
    await o.transport.publish(due.map((h) => workMessage(h, o.runtimeOf(h.action), now())));
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
    const held = o.view.cancelRequestsHeld();
    const stillHeld = new Set(held.map((r) => r.executionId));
    for (const id of rung.keys()) if (!stillHeld.has(id)) rung.delete(id);
    const due = held.filter((r) => now() - (rung.get(r.executionId) ?? -Infinity) >= RING_EVERY_MS);
    await mapLimit(due, o.parallelism, async (r) => {
      rung.set(r.executionId, now());
      await o.transport.sendSignal(r.workerId, { kind: 'cancel', executionId: r.executionId, attempt: r.attempt, reason: r.reason });
      log.debug({ executionId: r.executionId, workerId: r.workerId }, 'asked the worker to cancel');
    });
  }

  async function reclaimExpiredHandoffs(): Promise<void> {
    await mapLimit(o.view.expiredHandoffs(now()), o.parallelism, (h) =>
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
  async function reclaimFromLostWorkers(workers: readonly LiveWorker[]): Promise<void> {
    if (connectedSince === undefined || now() - connectedSince < staleAfterMs) return;
    for (const w of workers) {
      if (w.ageMs < staleAfterMs) {
        declaredLost.delete(w.workerId); // it came back (or never left): it may be declared again later
        continue;
      }
      const held = o.view.heldBy(w.workerId);
      const status = o.view.workerStatus(w.workerId);
      if (declaredLost.has(w.workerId) && held.length === 0) continue;
      if (status !== 'lost' && status !== 'stopped') {
        try {
          await recordWorkerEvent(o.workerStreams, w.workerId, 'WorkerLost', {
            lastHeartbeatAt: w.heartbeatAt.toISOString(),
            reason: `no heartbeat for ${Math.round(w.ageMs / 1000)} s (the limit is ${Math.round(staleAfterMs / 1000)} s)`,
          }, { by: 'executor' });
          o.metrics?.enforced.inc({ kind: 'worker lost' });
          log.warn({ workerId: w.workerId, ageMs: w.ageMs, holds: held.length }, `worker ${w.workerId} declared lost`);
        } catch (err) {
          // Another executor recorded it first, or the stream moved on: the reclaims below still apply.
          if (!(err instanceof BatonError || err instanceof WrongExpectedRevisionError)) throw err;
        }
      }
      declaredLost.add(w.workerId);
      await mapLimit(held, o.parallelism, (x) =>
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
   * landed after the announcement is the new process's own and is left alone. (One that lands
   * between this read and the append makes the append conflict and the runtime decide again,
   * where the reclaim still fits: that run is fenced off and retried as a new attempt, visibly.)
   */
  async function reclaimOrphans(): Promise<void> {
    await mapLimit(o.view.takeOrphans(), o.parallelism, async (x) => {
      try {
        // Decided on the state the append is made at: still that process's attempt (a start by
        // the new process, after its announcement, already took it off the view's orphans).
        const r = await o.runtime.dispatch(x.executionId, (s) =>
          s!.context.owner === `worker:${x.workerId}` && s!.context.attempt === x.attempt
            ? { type: 'OwnershipReclaimed', data: { reason: 'worker-restarted', workerId: x.workerId, attempt: x.attempt }, by: 'executor' }
            : undefined,
        );
        if (r.appended) {
          o.metrics?.enforced.inc({ kind: 'restart reclaim' });
          log.warn({ executionId: x.executionId, workerId: x.workerId, attempt: x.attempt }, `reclaimed from worker ${x.workerId}: it restarted while holding it`);
        }
      } catch (err) {
        if (err instanceof RejectedCommandError || err instanceof NotFoundError) return; // moved on meanwhile
        log.error({ executionId: x.executionId, err }, 'restart reclaim failed; the lost-worker and schedule-to-start checks still apply');
      }
    });
  }

  /** Actions some execution waits for that no live worker offers: since when (this executor saw). */
  const unofferedSince = new Map<string, number>();

  /**
   * An execution whose action no live worker offers waits visibly (baton status, the API, the
   * baton_executor_waiting_unoffered gauge). Once it has waited noWorkerTimeoutMs while no worker
   * offered its action (counted from when this executor first saw none, so a restart starts the
   * count again), it is abandoned with that reason, an ordinary final event.
   */
  async function abandonUnoffered(workers: readonly LiveWorker[]): Promise<void> {
    const offered = new Set(workers.filter((w) => fitForWork(w, o.view.workerStatus(w.workerId), staleAfterMs)).flatMap((w) => w.actions));
    const waiting = o.view.waitingActions();
    for (const action of unofferedSince.keys()) if (offered.has(action) || !waiting.has(action)) unofferedSince.delete(action);
    const due: WaitingExecution[] = [];
    for (const action of waiting.keys()) {
      if (offered.has(action)) continue;
      const since = unofferedSince.get(action) ?? now();
      unofferedSince.set(action, since);
      if (now() - since < o.noWorkerTimeoutMs) continue;
      due.push(...o.view.waitingFor(action).filter((w) => now() - Math.max(w.since, since) >= o.noWorkerTimeoutMs));
    }
    await mapLimit(due, o.parallelism, (w) =>
      enforce('no-worker abandon', w.executionId, {
        type: 'ExecutionAbandoned',
        data: { reason: `no live worker offered action "${w.action}" for ${formatDuration(o.noWorkerTimeoutMs)} (BATON_NO_WORKER_TIMEOUT)` },
        by: 'executor',
      }),
    );
  }

  /** Runs past their start-to-close deadline (plus a grace for the worker to say so itself). */
  async function timeOutOverdueRuns(): Promise<void> {
    await mapLimit(o.view.overdueRuns(now(), o.timeoutGraceMs), o.parallelism, (r) =>
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
    try {
      // One append: reclaim and abandon together, so no retry is scheduled in between.
      const r = await o.runtime.dispatch(executionId, (s) =>
        isFinal(s!) || s!.context.owner !== `worker:${d.workerId}` || s!.context.attempt !== attempt
          ? undefined
          : [
              { type: 'OwnershipReclaimed', data: { reason: 'dead-letter', workerId: d.workerId, attempt }, by: 'executor' },
              {
                type: 'ExecutionAbandoned',
                data: { reason: `its work message for worker ${d.workerId} was dead-lettered (${d.reason}); see \`baton dlq show ${d.messageId}\`` },
                by: 'executor',
              },
            ],
      );
      if (!r.appended) return;
      o.metrics?.enforced.inc({ kind: 'dead letter' });
      log.warn({ executionId, workerId: d.workerId, messageId: d.messageId }, 'execution abandoned: its work message was dead-lettered');
    } catch (err) {
      if (err instanceof NotFoundError || err instanceof RejectedCommandError) return;
      throw err; // thrown: the transport hands it over again
    }
  }

  /** One pass of every check; a failing check is logged and tried again next time. */
  async function tick(): Promise<void> {
    const run = async (name: string, step: () => Promise<void>) => {
      try {
        await step();
      } catch (err) {
        log.error({ err }, `monitor: ${name} failed; will try again`);
      }
    };
    await run('re-publishing handoffs', republish);
    await run('ringing cancel requests', ringCancelRequests);
    await run('reclaiming expired handoffs', reclaimExpiredHandoffs);
    let workers: LiveWorker[] | undefined;
    await run('listing workers', async () => {
      try {
        workers = await o.workers.list();
        connectedSince ??= now();
      } catch (err) {
        connectedSince = undefined;
        throw err;
      }
    });
    if (workers) {
      const listed = workers;
      await run('detecting lost workers', () => reclaimFromLostWorkers(listed));
      await run('abandoning executions no worker offers', () => abandonUnoffered(listed));
    }
    await run('timing out overdue runs', timeOutOverdueRuns);
  }

  return {
    tick,
    ringCancelRequests,
    reclaimOrphans,
    onDeadLetter,
    /** This executor published these handoffs just now: re-publish them only after republishAfterMs. */
    published(messageIds: readonly string[]): void {
      for (const id of messageIds) published.set(id, { at: now(), times: 1 });
    },
    /** The handoff was started or settled: nothing to re-publish. */
    handoffGone(handoffEventId: string): void {
      published.delete(handoffEventId);
    },
    /** Per action no live worker offers now, the executions waiting for it (as the last tick saw). */
    unoffered(): ReadonlyMap<string, number> {
      const waiting = o.view.waitingActions();
      return new Map([...unofferedSince.keys()].flatMap((action) => (waiting.has(action) ? [[action, waiting.get(action)!] as const] : [])));
    },
  };
}
