// Absent workers: one whose heartbeat went stale is declared lost and what it held is reclaimed;
// what a worker id's previous process held when a new one announced itself is reclaimed at once;
// and executions whose action no live worker offers are abandoned after noWorkerTimeoutMs.
import { mapLimit } from '../../async/map-limit.ts';
import { formatDuration } from '../../config.ts';
import { BatonError, NotFoundError, RejectedCommandError, WrongExpectedRevisionError } from '../../errors.ts';
import { recordWorkerEvent } from '../../runtime/worker-kind.ts';
import { DEFAULT_NAMESPACE } from '../../input/namespace.ts';
import type { WaitingExecution } from '../waiting-queue.ts';
import { fitForWork, reachableOver, type LiveWorker } from '../worker-directory.ts';
import type { MonitorContext } from './context.ts';
import { timeOutRun } from './runs.ts';

/** What unofferedSince is keyed by: an action as one namespace waits for it. */
const offerKey = (action: string, namespace: string) => `${action}\0${namespace}`;
const namespaceOf = (w: WaitingExecution) => w.namespace ?? DEFAULT_NAMESPACE;

export function workerDuties(c: MonitorContext) {
  /** Workers this executor declared lost while their heartbeat stays stale. */
  const declaredLost = new Set<string>();
  /** Actions (per namespace: offerKey) some execution waits for that no live worker offers it: since when (this executor saw). */
  const unofferedSince = new Map<string, number>();
  const reachable = reachableOver(c.transport.kind);

  return {
    /**
     * A worker whose heartbeat went stale is lost: record it, then reclaim everything it held.
     * `connectedSince`: heartbeats stop for everyone while the database is down, so right after an
     * outage every worker looks stale; none is declared lost until the executor has been
     * connected for a whole staleness period.
     */
    async reclaimFromLost(workers: readonly LiveWorker[], connectedSince: number): Promise<void> {
      if (c.now() - connectedSince < c.staleAfterMs) return;
      for (const w of workers) {
        if (w.ageMs < c.staleAfterMs) {
          declaredLost.delete(w.workerId); // it came back (or never left): it may be declared again later
          continue;
        }
        const held = c.view.heldBy(w.workerId);
        const status = c.view.workerStatus(w.workerId);
        if (declaredLost.has(w.workerId) && held.length === 0) continue;
        if (status !== 'lost' && status !== 'stopped') {
          try {
            await recordWorkerEvent(
              c.workerStreams,
              w.workerId,
              'WorkerLost',
              { lastHeartbeatAt: w.heartbeatAt.toISOString(), reason: `no heartbeat for ${Math.round(w.ageMs / 1000)} s (the limit is ${Math.round(c.staleAfterMs / 1000)} s)` },
              { by: 'executor' },
            );
            c.metrics?.enforced.inc({ kind: 'worker lost' });
            c.log.warn({ workerId: w.workerId, ageMs: w.ageMs, holds: held.length }, `worker ${w.workerId} declared lost`);
          } catch (err) {
            // Another executor recorded it first, or the stream moved on: the reclaims below still apply.
            if (!(err instanceof BatonError || err instanceof WrongExpectedRevisionError)) throw err;
          }
        }
        declaredLost.add(w.workerId);
        // A run already past its start-to-close deadline has timed out, whoever notices first: its
        // timeout (due after a grace for the worker to say so) must not become a retry (QA).
        const overdue = new Map(c.view.overdueRuns(c.now(), 0).filter((r) => r.workerId === w.workerId).map((r) => [r.executionId, r]));
        await mapLimit(held, c.parallelism, (x) => {
          const run = overdue.get(x.executionId);
          return run
            ? timeOutRun(c, run)
            : c.enforce('worker-lost reclaim', x.executionId, { type: 'OwnershipReclaimed', data: { reason: 'worker-lost', workerId: w.workerId, attempt: x.attempt }, by: 'executor' });
        });
      }
    },

    /**
     * A worker that stopped cleanly (WorkerStopped, its liveness row removed) can still be handed
     * an execution by a pass that had not yet seen it drain (QA: one 75 ms after WorkerStopped).
     * Nobody starts it there unless that id comes back, so it is reclaimed now (reason `drain`)
     * rather than at its schedule-to-start deadline. A worker with a liveness row (back under its
     * id, or one whose runs ignored their abort and left the row to go stale) is left to the other duties.
     */
    async reclaimFromStopped(workers: readonly LiveWorker[]): Promise<void> {
      const listed = new Set(workers.map((w) => w.workerId));
      for (const [workerId, held] of c.view.heldByStopped()) {
        if (listed.has(workerId)) continue;
        await mapLimit(held, c.parallelism, (x) =>
          c.enforce('stopped-worker reclaim', x.executionId, { type: 'OwnershipReclaimed', data: { reason: 'drain', workerId, attempt: x.attempt }, by: 'executor' }),
        );
      }
    },

    /**
     * Reclaim at once what a previous process of a worker id held when a new process announced
     * itself under that id: that process is gone (kill -9, OOM, a crash), so waiting for its
     * heartbeat to go stale or its message's ack-wait would only delay the retry. A start that
     * landed after the announcement is the new process's own and is left alone (the view drops
     * it from the orphans). One that lands between the view's note and this append makes the
     * append conflict and the runtime decide again, where the reclaim still fits: that run is
     * fenced off and retried as a new attempt, visibly.
     */
    async reclaimOrphans(): Promise<void> {
      await mapLimit(c.view.takeOrphans(), c.parallelism, async (x) => {
        try {
          const r = await c.runtime.dispatch(x.executionId, (s) =>
            s!.context.owner === `worker:${x.workerId}` && s!.context.attempt === x.attempt
              ? { type: 'OwnershipReclaimed', data: { reason: 'worker-restarted', workerId: x.workerId, attempt: x.attempt }, by: 'executor' }
              : undefined,
          );
          if (r.appended) {
            c.metrics?.enforced.inc({ kind: 'restart reclaim' });
            c.log.warn({ executionId: x.executionId, workerId: x.workerId, attempt: x.attempt }, `reclaimed from worker ${x.workerId}: it restarted while holding it`);
          }
        } catch (err) {
          if (err instanceof RejectedCommandError || err instanceof NotFoundError) return; // moved on meanwhile
          c.log.error({ executionId: x.executionId, err }, 'restart reclaim failed; the lost-worker and schedule-to-start checks still apply');
        }
      });
    },

    /**
     * An execution whose action no live worker offers waits visibly (baton status, the API, the
     * baton_executor_waiting_unoffered gauge). Once it has waited noWorkerTimeoutMs while no worker
     * offered its action (counted from when this executor first saw none, so a restart starts the
     * count again), it is abandoned with that reason, an ordinary final event. Offered means to its
     * namespace: workers that run only other namespaces' executions (`--namespaces`) would never
     * take it, and it waited forever.
     */
    async abandonUnoffered(workers: readonly LiveWorker[]): Promise<void> {
      const now = c.now();
      // A worker on another transport never gets the work: it offers nothing here.
      const fitAnywhere = workers.filter((w) => fitForWork(w, c.view.workerStatus(w.workerId), c.staleAfterMs));
      const fit = fitAnywhere.filter(reachable);
      /** Per action, the other transports fit workers offering it pull from (for the reason). */
      const onOtherTransports = new Map<string, Set<string>>();
      for (const w of fitAnywhere) if (!reachable(w)) for (const a of w.actions) onOtherTransports.set(a, (onOtherTransports.get(a) ?? new Set()).add(String(w.transport)));
      const offeredEverywhere = new Set<string>();
      const offeredIn = new Set<string>();
      for (const w of fit) {
        const namespaces = c.view.workerNamespaces(w.workerId);
        for (const action of w.actions) {
          if (namespaces === undefined) offeredEverywhere.add(action);
          else for (const ns of namespaces) offeredIn.add(offerKey(action, ns));
        }
      }
      const offered = (action: string, namespace: string) => offeredEverywhere.has(action) || offeredIn.has(offerKey(action, namespace));
      const waitingFor = new Map<string, WaitingExecution[]>();
      for (const action of c.view.queue.actions().keys()) {
        if (offeredEverywhere.has(action)) continue; // the common case: no walk through its queue
        for (const w of c.view.queue.of(action)) {
          const key = offerKey(action, namespaceOf(w));
          if (!offered(action, namespaceOf(w))) waitingFor.set(key, [...(waitingFor.get(key) ?? []), w]);
        }
      }
      for (const key of unofferedSince.keys()) if (!waitingFor.has(key)) unofferedSince.delete(key);
      const due: WaitingExecution[] = [];
      for (const [key, waiting] of waitingFor) {
        const since = unofferedSince.get(key) ?? now;
        unofferedSince.set(key, since);
        if (now - since >= c.noWorkerTimeoutMs) due.push(...waiting.filter((w) => now - Math.max(w.since, since) >= c.noWorkerTimeoutMs));
      }
      await mapLimit(due, c.parallelism, (w) =>
        c.enforce('no-worker abandon', w.executionId, {
          type: 'ExecutionAbandoned',
          data: {
            reason: offeredEverywhere.has(w.action) || [...offeredIn].some((k) => k.startsWith(`${w.action}\0`))
              ? `no live worker offered action "${w.action}" to namespace "${namespaceOf(w)}" for ${formatDuration(c.noWorkerTimeoutMs)} (BATON_NO_WORKER_TIMEOUT; the workers offering it run other namespaces only)`
              : onOtherTransports.has(w.action)
                ? `no live worker offered action "${w.action}" on the ${c.transport.kind} transport for ${formatDuration(c.noWorkerTimeoutMs)} (BATON_NO_WORKER_TIMEOUT; the workers offering it pull from ${[...onOtherTransports.get(w.action)!].sort().join(' or ')})`
                : `no live worker offered action "${w.action}" for ${formatDuration(c.noWorkerTimeoutMs)} (BATON_NO_WORKER_TIMEOUT)`,
          },
          by: 'executor',
        }),
      );
    },

    /** Per action no live worker offers now (to the namespace of each waiting for it), the executions waiting for it (as the last tick saw). */
    unoffered(): ReadonlyMap<string, number> {
      const counts = new Map<string, number>();
      for (const action of c.view.queue.actions().keys()) {
        const n = c.view.queue.of(action).filter((w) => unofferedSince.has(offerKey(action, namespaceOf(w)))).length;
        if (n > 0) counts.set(action, n);
      }
      return counts;
    },
  };
}
