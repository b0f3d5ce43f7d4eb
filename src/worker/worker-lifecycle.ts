// The worker's own stream (`worker-<id>`): decide each lifecycle event through the worker
// machine, then append it at the revision it was decided on; and a live process's watch over
// it (announcing itself again when the executor declared it lost).
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { WORKER_MACHINE_VERSION, decideWorker, foldWorker, statusOf, type WorkerSnapshot } from '../../actors/worker.machine.ts';
import { WorkerEvent, workerStreamId, type WorkerEventOf, type WorkerEventType } from '../../schemas/worker-events.ts';
import { WorkerEventRefusedError, WrongExpectedRevisionError, parseOrThrow } from '../errors.ts';
import type { EventStore } from '../eventstore/event-store.ts';

/**
 * Append `type` to the worker's stream if its machine takes it, at the revision it was decided
 * on. Throws WorkerEventRefusedError when the machine refuses it, and WrongExpectedRevisionError
 * when someone appended meanwhile. With `when`, appends only if `when` accepts the stream's state
 * (read in the same fold the decision uses), and says whether it appended.
 */
export async function recordWorkerEvent<T extends WorkerEventType>(
  store: EventStore,
  workerId: string,
  type: T,
  data: WorkerEventOf<T>['data'],
  by: string = `worker:${workerId}`,
  when?: (snapshot: WorkerSnapshot) => boolean,
): Promise<boolean> {
  const streamId = workerStreamId(workerId);
  const event = parseOrThrow(
    WorkerEvent,
    { type, data, metadata: { by, occurredAt: new Date().toISOString(), machineVersion: WORKER_MACHINE_VERSION } },
    `${type} event`,
  );
  const stored = await store.readStream(streamId);
  const snapshot = foldWorker(workerId, stored.map((e) => ({ type: e.type, data: e.data, metadata: e.metadata }) as WorkerEvent));
  if (when && !when(snapshot)) return false;
  const decision = decideWorker(snapshot, event);
  if (!decision.ok) throw new WorkerEventRefusedError(workerId, type, String(statusOf(snapshot)), decision.reason);
  const expectedRevision = stored.length === 0 ? 'no_stream' : stored[stored.length - 1]!.revision;
  await store.append(streamId, [{ eventId: randomUUID(), type, data: event.data, metadata: event.metadata }], { expectedRevision });
  return true;
}

/**
 * A process that finds its stream says Lost (the executor declared it gone while it was paused
 * or cut off, and reclaimed what it held) announces itself again: a new incarnation, after which
 * it gets work again and may drain and stop. Only from Lost, decided and appended at one
 * revision, so two triggers at once announce once (the loser's append conflicts and it reads
 * Active). Returns whether it announced.
 */
export async function announceAgainIfLost(store: EventStore, workerId: string, announcement: WorkerEventOf<'WorkerStarted'>['data']): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await recordWorkerEvent(store, workerId, 'WorkerStarted', announcement, undefined, (s) => statusOf(s) === 'Lost');
    } catch (err) {
      // Something moved the stream meanwhile: look again (a few times; it is rarely written).
      if (!(err instanceof WrongExpectedRevisionError) || attempt >= 5) throw err;
    }
  }
}

export interface LifecycleOptions {
  store: EventStore;
  workerId: string;
  /** What this process announced in its WorkerStarted; announcing again repeats it. */
  announcement: WorkerEventOf<'WorkerStarted'>['data'];
  heartbeatIntervalMs: number;
  log: Logger;
}

/**
 * One worker process's side of its stream after it started: it notices when the executor
 * declared it lost while it lived on (SIGSTOP then SIGCONT, a partition) and announces itself
 * again, and records its drain and stop even then. It looks when there is a reason to: a beat
 * that comes long after the previous one (checked then and at the next beat, since an executor
 * may act on the stale beat it read just before ours), a run whose outcome was refused, and
 * a drain or stop the stream refuses.
 */
export function workerLifecycle(o: LifecycleOptions) {
  const { store, workerId, announcement, log } = o;
  let checking: Promise<void> | undefined;
  let checksLeft = 0;

  /** Announce again if the stream says Lost; one check at a time; logs, never throws. */
  const comeBackIfLost = (why: string): Promise<void> =>
    (checking ??= announceAgainIfLost(store, workerId, announcement)
      .then((announced) => {
        if (announced) log.warn({ why }, `worker ${workerId} had been declared lost; it announced itself again`);
      })
      .catch((err: unknown) => log.warn({ err, why }, 'could not check whether this worker was declared lost'))
      .finally(() => (checking = undefined)));

  return {
    comeBackIfLost,
    /** For HeartbeatLoop's afterBeat. */
    afterBeat(sinceLastSuccessMs: number | null): void {
      if (sinceLastSuccessMs !== null && sinceLastSuccessMs > 2 * o.heartbeatIntervalMs) {
        checksLeft = 2;
      }
      if (checksLeft === 0) return;
      checksLeft--;
      void comeBackIfLost(`a heartbeat ${Math.round((sinceLastSuccessMs ?? 0) / 1000)} s after the previous one`);
    },
    /**
     * Record WorkerDraining or WorkerStopped. A stream that says Lost refuses them: announce again
     * first (a new incarnation), then record. Logs failures, never throws: a stop must go on.
     */
    async record<T extends 'WorkerDraining' | 'WorkerStopped'>(type: T, data: WorkerEventOf<T>['data']): Promise<void> {
      try {
        try {
          await recordWorkerEvent(store, workerId, type, data);
        } catch (err) {
          if (!(err instanceof WorkerEventRefusedError && err.state === 'Lost')) throw err;
          await comeBackIfLost(`recording ${type}`);
          await recordWorkerEvent(store, workerId, type, data);
        }
      } catch (err) {
        log.warn({ err }, `could not record ${type}`);
      }
    },
  };
}
