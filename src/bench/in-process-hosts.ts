// The hosts a benchmark runs in one process, composed as `baton dev` composes them: one
// follower feeds the executor and the workflow orchestrator, the workers append through the same
// runtimes (so their outcomes reach the executor at once, without a database round trip), and
// optionally the projector keeps the read model, as every real installation runs one.
import type pg from 'pg';
import type { Logger } from 'pino';
import type { ActionRegistry } from '../actions/registry.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { warmUp } from '../process/warm-up.ts';
import { startExecutor } from '../executor/executor.ts';
import { createLivenessStore } from '../liveness/liveness-store.ts';
import { startProjector, type Projector } from '../readmodel/projector-host.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../runtime/execution-runtime.ts';
import { followActors } from '../runtime/follow-actors.ts';
import { readStartPoint } from '../runtime/start-point.ts';
import { createWorkerRuntime } from '../runtime/worker-kind.ts';
import type { WorkTransport } from '../transport/work-transport.ts';
import { LocalWorkers } from '../worker/eager-dispatch.ts';
import { startWorkerHost, type WorkerHost } from '../worker/worker-host.ts';
import { startOrchestrator } from '../workflow/orchestrator.ts';
import { createWorkflowRuntime } from '../workflow/workflow-stream.ts';

export interface InProcessHosts {
  /** The execution runtime the executor and workers share: its changes are every execution change the hosts make or see. */
  executions: ExecutionRuntime;
  workers: WorkerHost[];
  projector: Projector | undefined;
  /** Runs the executor handed to these workers with their start, without the transport (0 when eager dispatch is off). */
  eagerRuns(): number;
  /** The global position the hosts' follower started after: 0 when it read the whole store, the checkpoint when it started from one. */
  followedAfter(): bigint;
  stop(): Promise<void>;
}

export async function startInProcessHosts(o: {
  store: EventStore;
  pool: pg.Pool;
  transport: WorkTransport;
  actions: ActionRegistry;
  /** Worker ids; each gets `capacity` concurrent runs (one number for all, or one per worker). */
  workerIds: string[];
  capacity: number | readonly number[];
  log: Logger;
  projector?: boolean;
  /** Whether the executor starts handoffs to these workers in the same append (src/worker/eager-dispatch.ts), as `baton dev` does by default. */
  eagerDispatch?: boolean;
  /**
   * Whether the follower starts from the read model's checkpoint and the executions live then
   * (src/runtime/start-point.ts), as `baton dev` and the deployed hosts do, instead of reading every
   * stored event: what a store with a long history needs.
   */
  fromCheckpoint?: boolean;
}): Promise<InProcessHosts> {
  await warmUp(o.store, o.log);
  const runtime = createExecutionRuntime(o.store);
  const workerStreams = createWorkerRuntime(o.store);
  const workflows = createWorkflowRuntime(o.store);
  const liveness = createLivenessStore(o.pool);
  const localWorkers = o.eagerDispatch === false ? undefined : new LocalWorkers();
  const runtimes = [runtime.actors, workerStreams, workflows];
  let followedAfter = 0n;
  const startFrom = o.fromCheckpoint
    ? async () => {
        const point = await readStartPoint(o.pool, runtimes.map((r) => r.kind.streamPrefix));
        followedAfter = point?.after ?? 0n;
        return point;
      }
    : undefined;
  const follower = followActors({ store: o.store, runtimes, log: o.log, who: 'executor', ...(startFrom && { startFrom }) });
  const executor = startExecutor({ store: o.store, actors: { executions: runtime, workerStreams, follower }, transport: o.transport, workers: liveness, log: o.log, localWorkers });
  const orchestrator = startOrchestrator({ store: o.store, actors: { executions: runtime, workflows, follower }, log: o.log });
  await Promise.all([executor.ready, orchestrator.ready]);
  const projector = o.projector ? startProjector({ pool: o.pool, store: o.store, log: o.log }) : undefined;
  const workers = await Promise.all(
    o.workerIds.map((workerId, i) =>
      startWorkerHost({ workerId, store: o.store, runtime, workerStreams, transport: o.transport, liveness, actions: o.actions, capacity: typeof o.capacity === 'number' ? o.capacity : o.capacity[i]!, log: o.log, localWorkers }),
    ),
  );
  let stopping: Promise<void> | undefined;
  return {
    executions: runtime,
    workers,
    projector,
    eagerRuns: () => localWorkers?.runs ?? 0,
    followedAfter: () => followedAfter,
    stop: () =>
      (stopping ??= (async () => {
        await Promise.all(workers.map((w) => w.stop('bench finished')));
        await follower.stop();
        await orchestrator.stop();
        await executor.stop();
        await projector?.stop();
      })()),
  };
}
