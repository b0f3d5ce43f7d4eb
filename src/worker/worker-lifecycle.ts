// A live worker process's watch over its own stream (`worker-<id>`, on the actor runtime:
// src/runtime/worker-kind.ts): announcing itself again when the executor declared it lost, and
// recording its drain and stop even then.
import type { Logger } from 'pino';
import { statusOf } from '../../actors/worker.machine.ts';
import type { WorkerEventOf } from '../../schemas/worker-events.ts';
import { WorkerEventRefusedError } from '../errors.ts';
import { recordWorkerEvent, type WorkerRuntime } from '../runtime/worker-kind.ts';

/**
 * A process that finds its stream says Lost (the executor declared it gone while it was paused
 * or cut off, and reclaimed what it held) announces itself again: a new incarnation, after which
 * it gets work again and may drain and stop. Only from Lost, checked on the state the append is
 * decided on, so two triggers at once announce once (the loser's append conflicts, and it finds
 * Active). Returns whether it announced.
 */
export const announceAgainIfLost = (workers: WorkerRuntime, workerId: string, announcement: WorkerEventOf<'WorkerStarted'>['data']): Promise<boolean> =>
  recordWorkerEvent(workers, workerId, 'WorkerStarted', announcement, { when: (s) => statusOf(s) === 'Lost' });

export interface LifecycleOptions {
  workers: WorkerRuntime;
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
  const { workers, workerId, announcement, log } = o;
  let checking: Promise<void> | undefined;
  let checksLeft = 0;

  /** Announce again if the stream says Lost; one check at a time; logs, never throws. */
  const comeBackIfLost = (why: string): Promise<void> =>
    (checking ??= announceAgainIfLost(workers, workerId, announcement)
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
          await recordWorkerEvent(workers, workerId, type, data);
        } catch (err) {
          if (!(err instanceof WorkerEventRefusedError && err.state === 'Lost')) throw err;
          await comeBackIfLost(`recording ${type}`);
          await recordWorkerEvent(workers, workerId, type, data);
        }
      } catch (err) {
        log.warn({ err }, `could not record ${type}`);
      }
    },
  };
}
