// The executor: schedules each waiting execution to a live worker by appending
// ExecutionHandedOff (compare-and-swap, so several executors can run at
// once), and only then publishes the work; answers executions whose baton came back (retry with
// the action's backoff, or abandon: retry-policy.ts); and runs the monitor (monitor.ts), which
// enforces every deadline the history holds and every absence the liveness table shows.
//
// It reads nothing by itself: the actor runtime's follower (src/runtime/follow-actors.ts) folds
// every execution and worker event once into the runtimes' snapshot caches, and this executor's
// scheduling view (scheduling-view.ts) is derived from their changes. Which execution goes to
// which worker is a pure function of that view (placement.ts).
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { DEFAULT_RUNTIME } from '../actions/action.ts';
import { RejectedCommandError } from '../errors.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import type { ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { createExecutorTraces } from '../observability/executor-traces.ts';
import { createExecutionRuntime, type ExecutionCommand, type ExecutionRuntime } from '../runtime/execution-runtime.ts';
import { followActors, type ActorFollower } from '../runtime/follow-actors.ts';
import { createWorkerRuntime, type WorkerRuntime } from '../runtime/worker-kind.ts';
import type { WorkMessage, WorkTransport } from '../transport/work-transport.ts';
import { createExecutorMetrics } from './executor-metrics.ts';
import type { PartitionLeases } from './partitions/leases.ts';
import { createMonitor } from './monitor/index.ts';
import { namespaceRoom } from './namespace-limits.ts';
import { plan } from './placement.ts';
import { createRateLimits, type Admitted } from './rate-limits.ts';
import type { RateLimitPolicy } from '../../schemas/worker-events.ts';
import { DEFAULT_RETRY_BACKOFF, attemptLimit, retryCommands, type RetryBackoffDefaults } from './retry-policy.ts';
import { SchedulingView } from './scheduling-view.ts';
import { EndingRuns, dispatchHandoffs } from './ending-runs.ts';
import { handoffVersion } from './version-choice.ts';
import { publishFailureFields, workMessage } from './work-messages.ts';
import { cachedDirectory, fitForWork, reachableSaying, type WorkerDirectory } from './worker-directory.ts';
import type { LocalWorkers } from '../worker/eager-dispatch.ts';
import { newId } from '../ids.ts';
import { MAX_TIMER_MS } from '../async/sleep.ts';

export type { WorkerDirectory } from './worker-directory.ts';

/**
 * Handoffs per appendMany. A pass places at most the free capacity of the live workers (the
 * bench's 2 workers × 64: 128), so this bounds only large fleets. The store's appendMany,
 * measured here (src/eventstore/group-commit.ts): 1 append 3.6 ms, 256 15.8 ms (62 µs each),
 * 1,024 47.5 ms: past 256 an append costs hardly less while the whole pass waits longer.
 */
const HANDOFFS_PER_APPEND = 256;

/** Passes whose publish may be in flight at once before a pass waits for the oldest (bounds what a slow broker holds in memory). */
const PUBLISHES_IN_FLIGHT = 4;

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
  /** How many of the monitor's appends run at once (scheduling and retry decisions go in batches: one appendMany). */
  parallelism?: number;
  retryBackoff?: RetryBackoffDefaults;
  clock?: () => number;
  /** With several executors: decide only the concurrency buckets of the partitions this one leases (src/executor/partitions/). */
  partitions?: PartitionLeases;
  /** BATON_NAMESPACE_CONCURRENCY: at most this many executions of a namespace hold a slot at once. */
  namespaceConcurrency?: Readonly<Record<string, number>>;
  /** BATON_NAMESPACE_RATE_LIMIT: at most this many handoffs of a namespace per second or minute. */
  namespaceRateLimits?: Readonly<Record<string, RateLimitPolicy>>;
  /** The worker hosts of this process: a handoff to one of them starts in the same append and runs at once (src/worker/eager-dispatch.ts). */
  localWorkers?: LocalWorkers;
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
  // Liveness as the scheduling pass reads it: asked again in the background once 250 ms old, waited
  // for only once older than a third of the staleness limit (worker-directory.ts says why).
  const directory = cachedDirectory(o.workers, 250, { now, staleLimitMs: staleAfterMs / 3, onChanged: () => view.waitingCount() > 0 && kick() });
  const ac = new AbortController();
  let caughtUp = false; // a half-built view would see deadlines that later events already met
  const inputOf = (executionId: string): unknown => runtime.cached(executionId)?.snapshot.context.input;
  const rateLimits = createRateLimits({ store: o.store, log, now, wake: () => kick(), ...(o.registry && { registry: o.registry }), ...(o.namespaceRateLimits && { namespaceRates: o.namespaceRateLimits }) });
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

  const ending = new EndingRuns();
  // --- what changed: every execution and worker change, once (own appends and observed events)
  const unsubscribe = [
    runtime.onChange((change) => {
      traces.observe(change);
      ending.drop(change.id);
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
    // A local worker's run ended: its slot takes the next execution while the outcome is stored.
    ...(o.localWorkers
      ? [
          o.localWorkers.onRunEnded((run) => {
            if (run.runtime !== runtime || view.holderOf(run.executionId) !== run.workerId || !ending.add(run.executionId, run.workerId)) return;
            void run.recorded.finally(() => ending.drop(run.executionId));
            kick();
          }),
        ]
      : []),
  ];

  // --- the scheduling pass: coalesced, so a burst of changes causes one pass, not one per change
  let pass: Promise<void> | undefined;
  let passAgain = false;
  let retryTimer: NodeJS.Timeout | undefined;
  let safetyTimer: NodeJS.Timeout | undefined;
  /** Executions whose eager start the machine refused: their next handoff goes through the transport. */
  const refusedEager = new Set<string>();
  /** Publishes of passes that ended: the next pass commits its handoffs meanwhile. */
  const publishing = new Set<Promise<void>>();

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
    // At most MAX_TIMER_MS: a longer timer fires at once (a retryAt stored under an older, unbounded backoff).
    if (next !== undefined) retryTimer = setTimeout(kick, Math.min(MAX_TIMER_MS, Math.max(0, next - now()))).unref();
    // Workers can become fit without an event (a stale heartbeat resumes); re-check slowly.
    if (view.waitingCount() > 0 || view.retryPending().length > 0) safetyTimer = setTimeout(kick, 1_000).unref();
  }

  const reachable = reachableSaying(o.transport.kind, log);

  async function schedulePass(): Promise<void> {
    if (view.waitingCount() === 0) return;
    const workers = (await directory.list())
      .filter((w) => fitForWork(w, view.workerStatus(w.workerId), staleAfterMs) && reachable(w) && (o.localWorkers?.takesWork(w.workerId) ?? true))
      .map((w) => ({ ...w, namespaces: view.workerNamespaces(w.workerId) }));
    // A bucket of a partition another executor leases has no slots here: its owner decides it.
    const freeSlots = (action: string, bucket: string) => (o.partitions && !o.partitions.owns(bucket) ? 0 : view.freeSlots(action, bucket));
    const planned = plan({
      now: now(),
      queue: view.queue,
      workers,
      loadOf: (id) => view.loadOf(id) - ending.of(id),
      freeSlots,
      admits: rateLimits.passFilter((action) => view.policyOf(action), inputOf),
      namespaceRoom: (ns) => namespaceRoom(o.namespaceConcurrency, ns, view.heldInNamespace(ns)),
    });
    // Nothing fit: the list may be older than a worker's change that no event tells (its first beat).
    if (planned.length === 0) directory.leftWaiting();
    const placements = await rateLimits.admit(planned, (action) => view.policyOf(action)?.rateLimit, inputOf);
    const messages = await handOff(placements);
    if (messages.length === 0) return;
    // Only after the handoffs are stored (state before queue). The next pass need not wait for
    // this publish (its handoffs are other executions): it commits while this one is in flight.
    while (publishing.size >= PUBLISHES_IN_FLIGHT) await Promise.race(publishing);
    const published = transport
      .publish(messages)
      .then(() => {
        monitor.published(messages.map((m) => m.messageId));
        metrics?.scheduled.inc(messages.length);
        log.debug({ count: messages.length }, 'handed off and published');
      })
      // The monitor publishes a handoff not started after republishAfterMs again (monitor/handoffs.ts).
      .catch((err: unknown) => log.error({ err, ...publishFailureFields(err, messages) }, 'publishing handed-off work failed; the monitor publishes it again'))
      .finally(() => publishing.delete(published));
    publishing.add(published);
  }

  /**
   * Append the placements' handoffs, HANDOFFS_PER_APPEND to one appendMany, each decided on the
   * cached snapshot (no load), and say what to publish: the handoffs that were stored, except those
   * a worker of this process started in the same append and now runs (eager dispatch).
   */
  async function handOff(placements: Admitted[]): Promise<WorkMessage[]> {
    const messages: WorkMessage[] = [];
    for (let from = 0; from < placements.length; from += HANDOFFS_PER_APPEND) {
      const chunk = placements.slice(from, from + HANDOFFS_PER_APPEND).map(({ execution, workerId, actionVersion, notAfter }) => {
        const handoffEventId = newId();
        const policy = view.policyOf(execution.action);
        const intake = refusedEager.has(execution.executionId) ? undefined : o.localWorkers?.intake(workerId);
        const made = { attempt: 0, eager: false };
        const trace = traces.handoff({ executionId: execution.executionId, action: execution.action, workerId });
        const commands = (s: ExecutionSnapshot | undefined): ExecutionCommand[] | undefined => {
          // Too long after its rate-limit grant: the token lapses (rate-limits.ts); a later pass grants another.
          if (notAfter !== undefined && now() >= notAfter) return undefined;
          // Its worker, of this process, began to drain since the placement: a later pass places it elsewhere.
          if (o.localWorkers?.takesWork(workerId) === false) return undefined;
          const c = s!.context;
          made.attempt = c.attempt;
          const deadline = new Date(now() + (policy?.scheduleToStartTimeoutMs ?? scheduleToStartMs)).toISOString();
          const version = handoffVersion(execution.version, actionVersion);
          const started = intake?.start({ action: c.action, attempt: c.attempt, actionVersion: version.actionVersion, cancelRequested: c.cancelRequested !== undefined });
          made.eager = started !== undefined;
          return [
            // The handoff records the attempt limit too (machine version 7: no SchedulingStarted before it).
            { type: 'ExecutionHandedOff', data: { workerId, attempt: c.attempt, deadline, ...version, maxAttempts: attemptLimit(c, policy) }, by: 'executor', eventId: handoffEventId, ...trace?.fields },
            ...(started ? [{ type: 'ExecutionStarted', data: started, by: `worker:${workerId}` } as const] : []),
          ];
        };
        return { execution, workerId, handoffEventId, made, trace, intake, request: { id: execution.executionId, commands }, after: ending.on(workerId) };
      });
      const outcomes = await dispatchHandoffs(runtime, chunk);
      for (const [i, h] of chunk.entries()) {
        const outcome = outcomes[i]!;
        const executionId = h.execution.executionId;
        if (!outcome.ok) {
          h.trace?.end({ handedOff: false, ...(!(outcome.error instanceof RejectedCommandError) && { error: outcome.error }) });
          if (h.made.eager && outcome.error instanceof RejectedCommandError && outcome.error.eventType === 'ExecutionStarted') {
            // The machine refused the worker's start (a bug, if ever): hand it off through the transport next pass, where the worker decides alone.
            refusedEager.add(executionId);
            log.error({ executionId, err: outcome.error }, 'eager start refused; scheduling it through the transport');
          }
          // Another executor scheduled it, or it was cancelled: its change reaches the view.
          else if (outcome.error instanceof RejectedCommandError) log.debug({ executionId, err: outcome.error.message }, 'not scheduled: state moved on');
          else log.error({ executionId, err: outcome.error }, 'scheduling failed; will retry');
          continue;
        }
        const r = outcome.value;
        h.trace?.end({ attempt: h.made.attempt, handedOff: r.appended });
        refusedEager.delete(executionId);
        if (!r.appended) continue;
        const eager = h.made.eager && h.intake;
        // The handoff's revision: the last event's, or the one before the start stored with it.
        const handoff = { handoffEventId: h.handoffEventId, executionId, workerId: h.workerId, action: h.execution.action, attempt: h.made.attempt, handoffRevision: eager ? r.revision - 1n : r.revision };
        if (eager) {
          eager.run({ ...workMessage(handoff, runtimeOf(h.execution.action), now()), ...h.trace?.fields }, { snapshot: r.snapshot, revision: r.revision });
          metrics?.scheduled.inc();
        } else messages.push(workMessage(handoff, runtimeOf(h.execution.action), now(), r.snapshot));
      }
    }
    return messages;
  }

  /** Decide every execution whose baton came back (retry or abandon), in one appendMany. */
  async function decideRetries(): Promise<void> {
    const pending = retryCommands(view.retryPending(), (action) => view.policyOf(action), now(), backoff, log);
    if (pending.length === 0) return;
    const outcomes = await runtime.actors.dispatchMany(pending.map(({ d, commands }) => ({ id: d.executionId, commands })));
    for (const [i, outcome] of outcomes.entries()) {
      if (outcome.ok) continue;
      const executionId = pending[i]!.d.executionId;
      if (outcome.error instanceof RejectedCommandError) view.decided(executionId); // another executor decided
      else log.error({ executionId, err: outcome.error }, 'retry decision failed; will retry');
    }
  }

  const detachPartitions = o.partitions?.attach({ kick, quiesce: async () => void (await pass, await Promise.all(publishing)) });

  let monitoring: Promise<void> | undefined;
  const monitorTimer = setInterval(() => {
    if (monitoring || ac.signal.aborted || !caughtUp) return;
    monitoring = monitor.tick().finally(() => (monitoring = undefined));
  }, monitorEveryMs);
  monitorTimer.unref();

  const ready = follower.ready.then(() => {
    caughtUp = true;
    log.info({ waiting: view.waitingCount(), handedOff: view.handedOff().length }, 'executor caught up');
    // Asked now, so that the first pass with work need not wait for it (a failure shows there).
    directory.list().catch(() => undefined);
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
      detachPartitions?.();
      clearInterval(monitorTimer);
      clearTimeout(retryTimer);
      clearTimeout(safetyTimer);
      rateLimits.stop();
      if (owned) await follower.stop();
      for (const off of unsubscribe) off();
      await deadLetters?.stop();
      await pass;
      await Promise.all(publishing);
      await monitoring;
    },
  };
}
