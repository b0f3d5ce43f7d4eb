// Whether the process behind a worker's liveness row is known to be gone, though the row is fresh:
// what a worker id's claim (worker-host.ts) and `baton dev`'s start (dev.ts) both judge by.
import os from 'node:os';
import { isAlive } from '../process/identity.ts';
import type { WorkerLiveness } from './liveness-store.ts';

/**
 * The process behind a fresh liveness row is gone when it ran here and its pid is dead, or is our
 * pid but beat last before this process started (a restarted container, pid 1 again). A row of
 * our pid that beat since we started is a worker of this very process: the id is in use (two
 * startWorker calls with one id in one process took each other's work).
 */
export const holderIsGone = (holder: WorkerLiveness) =>
  holder.host === os.hostname() && holder.pid !== null && (holder.pid === process.pid ? holder.ageMs > process.uptime() * 1000 : !isAlive(holder.pid));
