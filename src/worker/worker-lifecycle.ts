// The worker's own stream (`worker-<id>`): decide each lifecycle event through the worker
// machine, then append it at the revision it was decided on.
import { randomUUID } from 'node:crypto';
import { WORKER_MACHINE_VERSION, decideWorker, foldWorker } from '../../actors/worker.machine.ts';
import { WorkerEvent, workerStreamId, type WorkerEventOf, type WorkerEventType } from '../../schemas/worker-events.ts';
import { InvalidTransitionError, parseOrThrow } from '../errors.ts';
import type { EventStore } from '../eventstore/event-store.ts';

export async function recordWorkerEvent<T extends WorkerEventType>(
  store: EventStore,
  workerId: string,
  type: T,
  data: WorkerEventOf<T>['data'],
  by: string = `worker:${workerId}`,
): Promise<void> {
  const streamId = workerStreamId(workerId);
  const event = parseOrThrow(
    WorkerEvent,
    { type, data, metadata: { by, occurredAt: new Date().toISOString(), machineVersion: WORKER_MACHINE_VERSION } },
    `${type} event`,
  );
  const stored = await store.readStream(streamId);
  const snapshot = foldWorker(workerId, stored.map((e) => ({ type: e.type, data: e.data, metadata: e.metadata }) as WorkerEvent));
  const decision = decideWorker(snapshot, event);
  if (!decision.ok) throw new InvalidTransitionError(workerId, type, String(snapshot.value), decision.reason);
  const expectedRevision = stored.length === 0 ? 'no_stream' : stored[stored.length - 1]!.revision;
  await store.append(streamId, [{ eventId: randomUUID(), type, data: event.data, metadata: event.metadata }], { expectedRevision });
}
