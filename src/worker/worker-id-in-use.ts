// Kept apart from worker-host.ts, whose imports reach pg: the package root exports this class, and
// its declarations must not need @types/pg in a project that installs the package.
import { BatonError } from '../errors.ts';

/** The live worker that holds an id (a row of the liveness table, as far as this message needs it). */
export interface WorkerIdHolder {
  pid: number | null;
  host: string | null;
  ageMs: number;
}

/** A live process already runs a worker with this id; nothing was announced. */
export class WorkerIdInUseError extends BatonError {
  constructor(
    readonly workerId: string,
    readonly holder: WorkerIdHolder,
  ) {
    super(
      `worker id "${workerId}" is in use by a live worker (pid ${holder.pid ?? '?'} on ${holder.host ?? 'an unknown host'}, ` +
        `last heartbeat ${(holder.ageMs / 1000).toFixed(1)} s ago): give this worker another id (--id, or startWorker's id option), or stop that one first`,
    );
  }
}
