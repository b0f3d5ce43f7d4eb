// The executor: schedules each waiting execution to a live worker by appending
// SchedulingStarted + ExecutionHandedOff (compare-and-swap, so several executors can run at
// once), and only then publishes the work; answers executions whose baton came back (retry with
// the action's backoff, or abandon: retry-policy.ts); and runs the monitor (monitor.ts), which
// enforces every deadline the history holds and every absence the liveness table shows.
//
// It reads nothing by itself: the actor runtime's follower (src/runtime/follow-actors.ts) folds
// every execution and worker event once into the runtimes' snapshot caches, and this executor's
// scheduling view (scheduling-view.ts) is derived from their changes. Which execution goes to
// which worker is a pure function of that view (placement.ts).
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { DEFAULT_RUNTIME } from '../actions/action.ts';
import { mapLimit } from '../async/map-limit.ts';
import { RejectedCommandError } from '../errors.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { createExecutorTraces } from '../observability/executor-traces.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../runtime/execution-runtime.ts';
import { followActors, type ActorFollower } from '../runtime/follow-actors.ts';
import { createWorkerRuntime, type WorkerRuntime } from '../runtime/worker-kind.ts';
import type { WorkMessage, WorkTransport } from '../transport/work-transport.ts';
import { createExecutorMetrics } from './executor-metrics.ts';
import { createMonitor } from './monitor/index.ts';
import { plan, type Placement } from './placement.ts';
import { DEFAULT_RETRY_BACKOFF, attemptLimit, retryCommand, type RetryBackoffDefaults } from './retry-policy.ts';
import { SchedulingView } from './scheduling-view.ts';
import { workMessage } from './work-messages.ts';
import { cachedDirectory, fitForWork, type WorkerDirectory } from './worker-directory.ts';

export type { WorkerDirectory } from './worker-directory.ts';

/** The runtimes an executor host shares with its workflow orchestrator, and the one follower feeding them. */
export interface ExecutorActors {
  executions: ExecutionRuntime;
  workerStreams: WorkerRuntime;
  follower: ActorFollower;
}

export interface ExecutorOptions {
  store: EventStore;
  transport: WorkTransport;
  workers: WorkerDirectory;
  log: Logger;
  /** Shared with other parts of the process (src/cli/hosts.ts); by default the executor makes its own and follows the store itself. */
  actors?: ExecutorActors;
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
  retryBackoff?: RetryBackoffDefaults;
  clock?: () => number;
}

export interface Executor {
  /** Resolves once the executor has caught up with the event store and is scheduling. */
  ready: Promise<void>;
  stop(): Promise<void>;
  waiting(): number;
}

/** Its own runtimes and follower, for an executor nobody shares them with. */
function ownActors(o: ExecutorOptions): ExecutorActors {
  const clock = o.clock && (() => new Date(o.clock!()));
  const executions = createExecutionRuntime(o.store, clock && { clock });
  const workerStreams = createWorkerRuntime(o.store, clock && { clock });
  return { executions, workerStreams, follower: followActors({ store: o.store, runtimes: [executions.actors, workerStreams], log: o.log, who: 'executor' }) };
}

export function startExecutor(o: ExecutorOptions): Executor {
  const log = o.log;
  const now = o.clock ?? Date.now;
  const staleAfterMs = o.staleAfterMs ?? 30_000;
  const scheduleToStartMs = o.scheduleToStartMs ?? 30_000;
  const monitorEveryMs = o.monitorEveryMs ?? Math.max(50, Math.min(1_000, Math.floor(scheduleToStartMs / 4), Math.floor(staleAfterMs / 6)));
  const parallelism = o.parallelism ?? 32;
  const backoff = o.retryBackoff ?? DEFAULT_RETRY_BACKOFF;
  const owned = o.actors === undefined;
  const { executions: runtime, workerStreams, follower } = o.actors ?? ownActors(o);
  const view = new SchedulingView();
  const traces = createExecutorTraces({ cached: (id) => runtime.cached(id), now });
  const transport = traces.publishing(o.transport);
  // Liveness as the scheduling pass reads it: 250 ms old at most (heartbeats come every few seconds).
  const directory = cachedDirectory(o.workers, 250, now);
  const ac = new AbortController();
  let caughtUp = false; // a half-built view would see deadlines that later events already met
  const metrics = o.registry && createExecutorMetrics(o.registry, view, transport, () => monitor.unoffered());
  /** The runtime tag the action's workers advertise: the work subject's `<runtime>` token. */
  const runtimeOf = (action: string): string => view.policyOf(action)?.runtime ?? DEFAULT_RUNTIME;
  const monitor = createMonitor({
    view,
    runtime,
    workerStreams,
    transport,
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

  // --- what changed: every execution and worker change, once (own appends and observed events)
  const unsubscribe = [
    runtime.onChange((change) => {
      traces.observe(change);
      const handoff = view.handoffOf(change.id);
      const { unblocks, terminal } = view.applyExecution(change);
      if (handoff && !view.handoffOf(change.id)) monitor.handoffGone(handoff.handoffEventId);
      if (!caughtUp) return;
      if (terminal) {
        metrics?.terminal.inc({ status: terminal });
        log.info({ executionId: change.id, status: terminal }, `execution ${change.id} reached terminal state ${terminal}`);
      }
      if (unblocks) kick();
      if (change.events.some((c) => c.event.type === 'ExecutionCancelRequested')) {
        monitor.ringCancelRequests().catch((err: unknown) => log.warn({ err, executionId: change.id }, 'could not ring the worker about a cancel request; the monitor rings again'));
      }
    }),
    workerStreams.onChange((change) => {
      view.applyWorker(change);
      directory.invalidate();
      if (!caughtUp) return;
      kick();
      if (change.events.some((c) => c.event.type === 'WorkerStarted')) monitor.reclaimOrphans().catch((err: unknown) => log.error({ err }, 'restart reclaims failed'));
    }),
  ];

  // --- the scheduling pass: coalesced, so a burst of changes causes one pass, not one per change
  let pass: Promise<void> | undefined;
  let passAgain = false;
  let retryTimer: NodeJS.Timeout | undefined;
  let safetyTimer: NodeJS.Timeout | undefined;

  function kick(): void {
    if (ac.signal.aborted || !caughtUp) return;
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
    const next = view.nextRetryAt(now());
    if (next !== undefined) retryTimer = setTimeout(kick, Math.max(0, next - now())).unref();
    // Workers can become fit without an event (a stale heartbeat resumes); re-check slowly.
    if (view.waitingCount() > 0 || view.retryPending().length > 0) safetyTimer = setTimeout(kick, 1_000).unref();
  }

  async function schedulePass(): Promise<void> {
    if (view.waitingCount() === 0) return;
    const workers = (await directory.list())
      .filter((w) => fitForWork(w, view.workerStatus(w.workerId), staleAfterMs))
      .map((w) => ({ ...w, namespaces: view.workerNamespaces(w.workerId) }));
    const placements = plan({ now: now(), queue: view.queue, workers, loadOf: (id) => view.loadOf(id), freeSlots: (action, bucket) => view.freeSlots(action, bucket) });
    const messages = (await mapLimit(placements, parallelism, handOff)).filter((m) => m !== undefined);
    if (messages.length > 0) {
      await transport.publish(messages);
      monitor.published(messages.map((m) => m.messageId));
      metrics?.scheduled.inc(messages.length);
      log.debug({ count: messages.length }, 'handed off and published');
    }
  }

  /** Append the handoff (decided on the cached snapshot: no load), and say what to publish. */
  async function handOff({ execution, workerId }: Placement): Promise<WorkMessage | undefined> {
    const handoffEventId = randomUUID();
    const policy = view.policyOf(execution.action);
    let attempt = 0;
    const trace = traces.handoff({ executionId: execution.executionId, action: execution.action, workerId });
    try {
      const r = await runtime.dispatch(execution.executionId, (s) => {
        const c = s!.context;
        attempt = c.attempt;
        const deadline = new Date(now() + (policy?.scheduleToStartTimeoutMs ?? scheduleToStartMs)).toISOString();
        return [
          { type: 'SchedulingStarted', data: { maxAttempts: attemptLimit(c, policy) }, by: 'executor' },
          { type: 'ExecutionHandedOff', data: { workerId, attempt: c.attempt, deadline }, by: 'executor', eventId: handoffEventId, ...trace?.fields },
        ];
      });
      trace?.end({ attempt, handedOff: r.appended });
      if (!r.appended) return undefined;
      return workMessage({ handoffEventId, executionId: execution.executionId, workerId, action: execution.action, attempt, handoffRevision: r.revision }, runtimeOf(execution.action), now(), r.snapshot);
    } catch (err) {
      trace?.end({ handedOff: false, ...(!(err instanceof RejectedCommandError) && { error: err }) });
      // Another executor scheduled it, or it was cancelled: its change reaches the view.
      if (err instanceof RejectedCommandError) log.debug({ executionId: execution.executionId, err: err.message }, 'not scheduled: state moved on');
      else log.error({ executionId: execution.executionId, err }, 'scheduling failed; will retry');
      return undefined;
    }
  }

  async function decideRetries(): Promise<void> {
    await mapLimit(view.retryPending(), parallelism, async (d) => {
      try {
        await runtime.dispatch(d.executionId, retryCommand(d, view.policyOf(d.action), now(), backoff));
      } catch (err) {
        if (err instanceof RejectedCommandError) view.decided(d.executionId); // another executor decided
        else log.error({ executionId: d.executionId, err }, 'retry decision failed; will retry');
      }
    });
  }

  let monitoring: Promise<void> | undefined;
  const monitorTimer = setInterval(() => {
    if (monitoring || ac.signal.aborted || !caughtUp) return;
    monitoring = monitor.tick().finally(() => (monitoring = undefined));
  }, monitorEveryMs);
  monitorTimer.unref();

  const ready = follower.ready.then(() => {
    caughtUp = true;
    log.info({ waiting: view.waitingCount(), handedOff: view.handedOff().length }, 'executor caught up');
    kick();
    // Restarts the catch-up saw whose previous processes' executions nothing has settled yet.
    monitor.reclaimOrphans().catch((err: unknown) => log.error({ err }, 'restart reclaims failed'));
  });
  let stopped = false;
  let deadLetters: { stop(): Promise<void> } | undefined;
  ready
    .then(async () => {
      if (o.handleDeadLetters === false) return;
      const subscription = await transport.onDeadLetter(monitor.onDeadLetter);
      if (stopped) await subscription.stop();
      else deadLetters = subscription;
    })
    .catch((err: unknown) => log.error({ err }, 'could not subscribe to dead letters'));

  return {
    ready,
    waiting: () => view.waitingCount(),
    async stop() {
      stopped = true;
      ac.abort();
      clearInterval(monitorTimer);
      clearTimeout(retryTimer);
      clearTimeout(safetyTimer);
      if (owned) await follower.stop();
      for (const off of unsubscribe) off();
      await deadLetters?.stop();
      await pass;
      await monitoring;
    },
  };
}
