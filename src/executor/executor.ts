// The executor: follows the event store, schedules each waiting execution to a live worker by
// appending SchedulingStarted + ExecutionHandedOff (compare-and-swap, so several executors can
// run at once), and only then publishes the work. It also answers executions whose baton came
// back (retry with backoff, or abandon), re-publishes handoffs that were committed but never
// published (state before queue), and logs every execution that reaches a terminal state.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { START, type EventStore, type StoredEvent } from '../eventstore/event-store.ts';
import type { WorkMessage, WorkTransport } from '../transport/work-transport.ts';
import { RejectedCommandError } from '../errors.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';
import { SchedulingIndex, type RetryDecision, type WaitingExecution } from './scheduling-index.ts';

/** What the executor needs to know about live workers (the liveness table provides it). */
export interface WorkerDirectory {
  list(): Promise<{ workerId: string; actions: string[]; runtimes: string[]; capacity: number; draining: boolean; ageMs: number }[]>;
}

export interface ExecutorOptions {
  store: EventStore;
  runtime: ExecutionRuntime;
  transport: WorkTransport;
  workers: WorkerDirectory;
  log: Logger;
  registry?: Registry;
  /** A worker whose heartbeat is older than this is not given work. */
  staleAfterMs?: number;
  /** Schedule-to-start deadline written into each handoff. */
  scheduleToStartMs?: number;
  /** A handoff not seen started after this long is published again. */
  republishAfterMs?: number;
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
  const parallelism = o.parallelism ?? 32;
  const backoff = o.retryBackoff ?? { initialMs: 1_000, multiplier: 2, maxMs: 60_000 };
  const index = new SchedulingIndex();
  const published = new Set<string>();
  const ac = new AbortController();

  const metrics = o.registry && {
    scheduled: new Counter({ name: 'baton_executor_handoffs_total', help: 'Executions handed off to a worker', registers: [o.registry] }),
    terminal: new Counter({ name: 'baton_executions_terminal_total', help: 'Executions that reached a terminal state', labelNames: ['status'], registers: [o.registry] }),
    waiting: new Gauge({ name: 'baton_executor_waiting', help: 'Executions waiting for a worker', registers: [o.registry], collect() { this.set(index.waitingCount()); } }),
    handedOff: new Gauge({ name: 'baton_executor_handed_off', help: 'Executions handed off and not yet started', registers: [o.registry], collect() { this.set(index.handedOff().length); } }),
    queueDepth: new Gauge({
      name: 'baton_work_queue_depth',
      help: 'Work messages published and not yet acknowledged',
      registers: [o.registry],
      async collect() {
        this.set(await o.transport.depth());
      },
    }),
  };

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
    const fit = (await o.workers.list()).filter((w) => !w.draining && w.ageMs < staleAfterMs);
    const planned = new Map<string, number>();
    const assignments: { execution: WaitingExecution; worker: (typeof fit)[number] }[] = [];
    for (const execution of ready) {
      // Least loaded first, counting what this pass already planned.
      let best: (typeof fit)[number] | undefined;
      let bestLoad = Infinity;
      for (const w of fit) {
        if (!w.actions.includes(execution.action)) continue;
        const held = index.loadOf(w.workerId) + (planned.get(w.workerId) ?? 0);
        if (held >= w.capacity) continue;
        const load = held / w.capacity;
        if (load < bestLoad) [best, bestLoad] = [w, load];
      }
      if (!best) continue; // waits in Requested until a worker fits; the next event or timer re-runs the pass
      planned.set(best.workerId, (planned.get(best.workerId) ?? 0) + 1);
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
            { type: 'SchedulingStarted', data: {}, by: 'executor' },
            {
              type: 'ExecutionHandedOff',
              data: { workerId: worker.workerId, attempt: current.snapshot.context.attempt, deadline: new Date(now() + scheduleToStartMs).toISOString() },
              by: 'executor',
              eventId: handoffId,
            },
          ],
          { known: current },
        );
        index.forget(execution.executionId);
        messages.push({
          messageId: handoffId,
          executionId: execution.executionId,
          workerId: worker.workerId,
          runtime: worker.runtimes[0] ?? 'node',
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
      for (const m of messages) published.add(m.messageId);
      metrics?.scheduled.inc(messages.length);
      log.debug({ count: messages.length }, 'handed off and published');
    }
  }

  function retryDelay(attempt: number): number {
    return Math.min(backoff.maxMs, backoff.initialMs * backoff.multiplier ** Math.max(0, attempt - 1));
  }

  async function decideRetries(): Promise<void> {
    const pending = index.retryPending();
    await mapLimit(pending, async (d: RetryDecision) => {
      try {
        if (d.attempt < d.maxAttempts) {
          await o.runtime.dispatch(d.executionId, {
            type: 'ExecutionRetryScheduled',
            data: { attempt: d.attempt + 1, retryAt: new Date(now() + retryDelay(d.attempt)).toISOString(), reason: d.reason },
            by: 'executor',
          });
        } else {
          await o.runtime.dispatch(d.executionId, {
            type: 'ExecutionAbandoned',
            data: { reason: `gave up after ${d.attempt} of ${d.maxAttempts} attempts; last: ${d.reason}` },
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

  // --- state before queue: publish handoffs that were committed but never published
  const republishTimer = setInterval(() => {
    const due = index.handedOff().filter((h) => !published.has(h.handoffEventId) && now() - h.handedOffAt >= republishAfterMs);
    if (due.length === 0) return;
    const messages = due.map(
      (h): WorkMessage => ({
        messageId: h.handoffEventId,
        executionId: h.executionId,
        workerId: h.workerId,
        runtime: 'node',
        action: h.action,
        attempt: h.attempt,
        handoffRevision: String(h.handoffRevision),
        publishedAt: new Date(now()).toISOString(),
      }),
    );
    o.transport.publish(messages).then(
      () => {
        for (const m of messages) published.add(m.messageId);
        log.warn({ count: messages.length, executionIds: messages.slice(0, 10).map((m) => m.executionId) }, 're-published handoffs that were committed but not published');
      },
      (err: unknown) => log.error({ err }, 're-publishing handoffs failed; will retry'),
    );
  }, Math.max(250, Math.floor(republishAfterMs / 2)));
  republishTimer.unref();

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
    if (unblocks || event.streamId.startsWith('worker-')) kick();
  }

  const ready = (async () => {
    // Catch up first, so the index is complete before the first scheduling decision.
    let after = START;
    for (;;) {
      const batch = await o.store.readAll({ after, limit: 5_000, streamPrefixes: [EXECUTION_STREAM_PREFIX] });
      if (batch.length === 0) break;
      for (const e of batch) index.apply(e);
      after = batch[batch.length - 1]!.globalPosition;
    }
    log.info({ waiting: index.waitingCount(), handedOff: index.handedOff().length }, 'executor caught up');
    return after;
  })();

  const following = ready.then(async (after) => {
    kick();
    for await (const event of o.store.subscribe({ after, streamPrefixes: [EXECUTION_STREAM_PREFIX, 'worker-'], signal: ac.signal })) observe(event);
  });
  following.catch((err: unknown) => {
    if (!ac.signal.aborted) log.fatal({ err }, 'executor stopped following the event store');
  });

  return {
    ready: ready.then(() => undefined),
    waiting: () => index.waitingCount(),
    async stop() {
      ac.abort();
      clearInterval(republishTimer);
      clearTimeout(retryTimer);
      clearTimeout(safetyTimer);
      await following.catch(() => undefined);
      await pass;
    },
  };
}
