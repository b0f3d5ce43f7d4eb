// Worker ids as the actor runtime sees them: streams `worker-<id>`, which exist (Starting)
// before their first event, the worker machine's decisions, and its refusals as
// WorkerEventRefusedError naming the worker.
import { WORKER_MACHINE_VERSION, decideWorker, foldWorker, startWorker, statusOf, type WorkerSnapshot } from '../../actors/worker.machine.ts';
import { WORKER_STREAM_PREFIX, WorkerEvent, workerIdOfStream, workerStreamId, type WorkerEventOf, type WorkerEventType } from '../../schemas/worker-events.ts';
import { WorkerEventRefusedError, parseOrThrow } from '../errors.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import type { ActorKind, Command } from './actor-kind.ts';
import { createActorRuntime, type ActorRuntime, type ActorRuntimeOptions } from './actor-runtime.ts';

export const workerKind: ActorKind<WorkerSnapshot, WorkerEvent> = {
  name: 'worker',
  machineVersion: WORKER_MACHINE_VERSION,
  streamPrefix: WORKER_STREAM_PREFIX,
  streamId: workerStreamId,
  idOf: workerIdOfStream,
  empty: startWorker,
  read: (e) => ({ type: e.type, data: e.data, metadata: e.metadata }) as WorkerEvent,
  make: (c, occurredAt) =>
    parseOrThrow(WorkerEvent, { type: c.type, data: c.data, metadata: { by: c.by, occurredAt, machineVersion: WORKER_MACHINE_VERSION } }, `${c.type} event`),
  decide(id, before, event) {
    const snapshot = before ?? startWorker(id);
    const d = decideWorker(snapshot, event);
    return d.ok ? d : { ok: false, error: new WorkerEventRefusedError(id, event.type, String(statusOf(snapshot)), d.reason) };
  },
  fold: foldWorker,
  // A worker id outlives its processes: no state of its machine is final.
  isFinal: () => false,
};

export type WorkerRuntime = ActorRuntime<WorkerSnapshot, WorkerEvent>;

export const createWorkerRuntime = (store: EventStore, options: ActorRuntimeOptions = {}): WorkerRuntime => createActorRuntime(store, workerKind, options);

/**
 * Append `type` to the worker's stream if its machine takes it, at the revision it was decided
 * on (a conflict decides again, bounded). Throws WorkerEventRefusedError when the machine
 * refuses it. With `when`, appends only if `when` accepts the stream's state, checked on the
 * state each attempt decides on, and says whether it appended. `by` defaults to the worker
 * itself (the executor appends WorkerLost).
 */
export async function recordWorkerEvent<T extends WorkerEventType>(
  workers: WorkerRuntime,
  workerId: string,
  type: T,
  data: WorkerEventOf<T>['data'],
  o: { by?: string; when?: (snapshot: WorkerSnapshot) => boolean } = {},
): Promise<boolean> {
  const by = o.by ?? `worker:${workerId}`;
  const r = await workers.dispatch(workerId, (snapshot) =>
    o.when && !o.when(snapshot!) ? undefined : ({ type, data, by } as Command<WorkerEvent>),
  );
  return r.appended;
}
