// The worker host: announces itself on its stream, heartbeats to the liveness table, pulls its
// work from the transport (at most `capacity` runs at once) and runs each delivery. On stop
// (SIGTERM) it drains: takes no new work, lets runs finish up to the shutdown timeout, then
// aborts the rest, which hand their executions back (OwnershipReleased) for another worker.
// It also listens for the executor's cancel rings: a run it holds is aborted and ends as
// Cancelled; a handoff it holds but has not started is cancelled at once.
import { setMaxListeners } from 'node:events';
import os from 'node:os';
import type { Logger } from 'pino';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ActionRegistry } from '../actions/index.ts';
import { WorkerIdInUseError } from './worker-id-in-use.ts';
import { holderIsGone } from '../liveness/holder-is-gone.ts';
export { WorkerIdInUseError };
import type { EventStore } from '../eventstore/event-store.ts';
import { HeartbeatLoop } from '../liveness/heartbeat-loop.ts';
import { HEARTBEAT_INTERVAL_MS, staleAfterMs, type LivenessStore } from '../liveness/liveness-store.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';
import type { Consumer, WorkTransport } from '../transport/work-transport.ts';
import { workerLifecycle } from './worker-lifecycle.ts';
import { createWorkerRuntime, recordWorkerEvent, type WorkerRuntime } from '../runtime/worker-kind.ts';
import { cancelHeldExecution, runDelivery, type RunDeliveryDeps } from './run-delivery.ts';
import type { OutOfTouch } from './run-stops.ts';
import { watchOutOfTouch } from './out-of-touch.ts';
import { eagerIntake, type LocalWorkers } from './eager-dispatch.ts';
import { batcherFor } from './dispatch-batcher.ts';
import { untilDeliveriesQuiet, type DrainSettle } from './drain-settle.ts';
import { traceRun } from '../observability/tracing.ts';
import { componentLogger } from '../log.ts';

export interface WorkerHostOptions {
  workerId: string;
  store: EventStore;
  runtime: ExecutionRuntime;
  /** Worker streams (its own lifecycle events); shared with the executor in one process (`baton dev`), else its own. */
  workerStreams?: WorkerRuntime;
  transport: WorkTransport;
  liveness: LivenessStore;
  actions: ActionRegistry;
  capacity: number;
  log: Logger;
  registry?: Registry;
  heartbeatIntervalMs?: number;
  /** A worker silent this long is gone, and its id free to take. Default: 3 heartbeat intervals. */
  staleAfterMs?: number;
  /** start-to-close limit of runs whose action sets none. */
  startToCloseMs?: number;
  /** How long a drain waits for runs to finish before aborting them. */
  shutdownTimeoutMs?: number;
  /** How long a draining worker keeps taking handoffs addressed to it (drain-settle.ts). */
  drainSettle?: DrainSettle;
  /** The namespaces whose executions it runs (announced in WorkerStarted); undefined: every namespace. */
  namespaces?: readonly string[];
  /** This process's worker hosts, for an executor here to dispatch to eagerly (eager-dispatch.ts); undefined: work comes through the transport only. */
  localWorkers?: LocalWorkers;
}


export interface WorkerHost {
  workerId: string;
  inFlight(): number;
  /** What keeps it from working, for /healthz: heartbeats failing (the database unreachable). */
  problems(): string[];
  /** Drain and stop; resolves when the worker holds nothing. */
  stop(reason?: string): Promise<void>;
}

function createWorkerMetrics(registry: Registry) {
  /** Each worker host's running set, read when metrics are scraped. */
  const running = new Map<string, Set<string>>();
  return {
    running,
    runs: new Counter({ name: 'baton_worker_runs_total', help: 'Action runs by outcome', labelNames: ['worker', 'outcome'], registers: [registry] }),
    inFlight: new Gauge({
      name: 'baton_worker_in_flight',
      help: 'Executions running now',
      labelNames: ['worker'],
      registers: [registry],
      collect() {
        for (const [worker, set] of running) this.set({ worker }, set.size);
      },
    }),
    pickup: new Histogram({
      name: 'baton_pickup_latency_seconds',
      help: 'Submit (ExecutionRequested) to ExecutionStarted',
      buckets: [0.001, 0.002, 0.003, 0.005, 0.008, 0.013, 0.021, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
  };
}
// One set per registry: several worker hosts in one process (baton dev) share it, labelled by worker.
const metricsByRegistry = new WeakMap<Registry, ReturnType<typeof createWorkerMetrics>>();
function workerMetrics(registry: Registry) {
  let m = metricsByRegistry.get(registry);
  if (!m) metricsByRegistry.set(registry, (m = createWorkerMetrics(registry)));
  return m;
}

export async function startWorkerHost(o: WorkerHostOptions): Promise<WorkerHost> {
  const { workerId, capacity } = o;
  const log = componentLogger(o.log, 'worker', { workerId });
  const running = new Set<string>();
  const cancellers = new Map<string, (attempt: number, reason: string) => void>();
  const fences = new Map<string, (reason: OutOfTouch) => void>();
  const shutdown = new AbortController();
  /** Runs stopped by the shutdown whose action still runs (deaf to its signal): their executions stay held. */
  const deafRuns = new Set<string>();
  setMaxListeners(capacity + 16, shutdown.signal); // each run listens for the shutdown
  let draining = false;
  const metrics = o.registry ? workerMetrics(o.registry) : undefined;
  metrics?.running.set(workerId, running);
  const actions = o.actions.names();
  // The liveness row also lists `name@version` for versioned actions: the executor's directory
  // reads each live worker's version from it (src/executor/version-choice.ts).
  const offers = o.actions.offers();
  const runtimes = o.actions.runtimes();

  const policies = o.actions.policies();
  // In the liveness row too: the API and `baton status` say when an execution waits for its
  // namespace, and executors place work only on workers of their own transport.
  const servedBy = { ...(o.namespaces !== undefined && { namespaces: [...o.namespaces] }), ...(o.transport.kind && { transport: o.transport.kind }) };
  // Take the id before announcing it: two live processes under one id would share a stream,
  // a liveness row and a queue, and each would take the other's work for its own.
  const claim = await o.liveness.claim(
    { workerId, actions: offers, runtimes, capacity, inFlight: 0, draining: true, ...servedBy, pid: process.pid, host: os.hostname() },
    { staleAfterMs: o.staleAfterMs ?? staleAfterMs(o.heartbeatIntervalMs), holderIsGone },
  );
  if (!claim.claimed) throw new WorkerIdInUseError(workerId, claim.holder);
  const announcement = {
    actions,
    runtimes,
    capacity,
    host: os.hostname(),
    pid: process.pid,
    ...(Object.keys(policies).length > 0 && { policies }),
    ...(o.namespaces !== undefined && { namespaces: [...o.namespaces] }),
  };
  const workers = o.workerStreams ?? createWorkerRuntime(o.store);
  await recordWorkerEvent(workers, workerId, 'WorkerStarted', announcement).catch(async (err: unknown) => {
    await o.liveness.remove(workerId).catch(() => undefined); // give the id back
    throw err;
  });
  const heartbeatIntervalMs = o.heartbeatIntervalMs ?? HEARTBEAT_INTERVAL_MS;
  const lifecycle = workerLifecycle({ workers, workerId, announcement, heartbeatIntervalMs, log });
  const heartbeat = new HeartbeatLoop({
    store: o.liveness,
    state: () => ({ workerId, actions: offers, runtimes, capacity, inFlight: running.size, draining, ...servedBy, pid: process.pid, host: os.hostname() }),
    intervalMs: heartbeatIntervalMs,
    log,
    afterBeat: lifecycle.afterBeat,
  });
  heartbeat.start();
  await heartbeat.beatNow(); // visible to executors before the first message can arrive
  const stopWatching = watchOutOfTouch({ heartbeat, fences, workerId, staleAfterMs: o.staleAfterMs ?? staleAfterMs(o.heartbeatIntervalMs), heartbeatIntervalMs, log });

  const deps: RunDeliveryDeps = {
    workerId,
    runtime: o.runtime,
    appends: batcherFor(o.runtime),
    actions: o.actions,
    log,
    shutdown: shutdown.signal,
    running,
    cancellers,
    fences,
    startToCloseMs: o.startToCloseMs,
    onStarted: (ms) => metrics?.pickup.observe(ms / 1000),
    onDeafRun: (executionId) => deafRuns.add(executionId),
    ...(o.localWorkers && { onActionEnded: (executionId: string, recorded: Promise<void>) => o.localWorkers!.runEnded({ workerId, executionId, recorded, runtime: o.runtime }) }),
    onFinished: (outcome) => {
      metrics?.runs.inc({ worker: workerId, outcome });
      // Fenced: perhaps declared lost while it ran (the check is one read of its stream).
      if (outcome === 'lost') void lifecycle.comeBackIfLost('a run lost its baton');
    },
  };
  let lastDeliveryAt = -Infinity;
  const consumer: Consumer = await o.transport.consume(
    workerId,
    (delivery) => {
      lastDeliveryAt = performance.now();
      return traceRun(delivery, () => runDelivery(delivery, deps));
    },
    { concurrency: capacity },
  );
  /** Runs an executor of this process started with their handoffs (eager-dispatch.ts). */
  const eagerRuns = new Set<Promise<void>>();
  let eagerClosed = false;
  const unregister = o.localWorkers?.register(workerId, eagerIntake({ deps, actions: o.actions, accepting: () => !draining, closed: () => eagerClosed, runs: eagerRuns, log }));
  const signals = await o.transport.onSignal(workerId, (signal) => {
    const cancelRun = cancellers.get(signal.executionId);
    if (cancelRun) return cancelRun(signal.attempt, signal.reason);
    // Not running here: perhaps handed to us and not delivered yet. The ring repeats, so a failure here is retried.
    cancelHeldExecution(o.runtime, workerId, signal.executionId, log).catch((err: unknown) => log.warn({ err, executionId: signal.executionId }, 'could not cancel a held execution; the executor will ask again'));
  });
  log.info({ capacity, actions }, `worker ${workerId} started`);

  let stopping: Promise<void> | undefined;
  return {
    workerId,
    inFlight: () => running.size,
    problems() {
      // Two in a row: one can fail to a blip; by two (an interval apart) executors soon count it lost.
      const { consecutiveFailures: failures, lastSuccessAt } = heartbeat.status();
      return failures >= 2 ? [`heartbeats failing (${failures} in a row, last success ${lastSuccessAt?.toISOString() ?? 'never'}): the database may be unreachable`] : [];
    },
    stop(reason = 'stopped') {
      stopping ??= (async () => {
        draining = true;
        log.info({ inFlight: running.size, reason }, 'draining: no new work; finishing what runs');
        await heartbeat.beatNow(); // executors stop scheduling to it, even while it announces itself again below
        await lifecycle.record('WorkerDraining', { reason });
        const timeoutMs = o.shutdownTimeoutMs ?? 30_000;
        const grace = setTimeout(() => {
          log.warn({ inFlight: running.size, timeoutMs }, 'shutdown timeout: aborting runs still in progress; their executions are released, but for any whose action ignores the abort (it stays held until this process is gone)');
          shutdown.abort(new Error(`worker ${workerId} shutdown timeout`));
        }, timeoutMs);
        grace.unref();
        unregister?.();
        await untilDeliveriesQuiet(() => lastDeliveryAt, shutdown.signal, o.drainSettle);
        await consumer.stop();
        while (eagerRuns.size > 0) await Promise.all(eagerRuns);
        eagerClosed = true; // a start the executor stores from now on is handed back (eager-dispatch.ts)
        await signals.stop();
        clearTimeout(grace);
        stopWatching();
        await heartbeat.stop();
        if (deafRuns.size > 0) {
          // Left to go stale: the executor reclaims what a stale worker holds (worker-lost) once
          // this process, and the deaf runs' code with it, is gone; a removed row would hide them.
          log.warn({ held: [...deafRuns] }, `leaving worker ${workerId}'s liveness row to go stale: ${deafRuns.size} run(s) ignored their abort signal, and their executions are reclaimed once it is stale`);
        } else {
          // Best effort: a row left behind goes stale by itself, and the drain must not wait on a database that is gone.
          await o.liveness.remove(workerId).catch((err: unknown) => log.warn({ err }, 'could not remove the liveness row'));
        }
        metrics?.running.delete(workerId);
        await lifecycle.record('WorkerStopped', { reason });
        log.info(`worker ${workerId} stopped`);
      })();
      return stopping;
    },
  };
}
