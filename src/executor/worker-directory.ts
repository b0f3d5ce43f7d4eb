// The live workers the executor schedules to, as the liveness table reports them, and the one
// rule for which of them may get new work now (scheduling and the monitor both ask it).
import type { WorkerStatus } from './scheduling-entries.ts';

export interface LiveWorker {
  workerId: string;
  actions: string[];
  runtimes: string[];
  capacity: number;
  draining: boolean;
  /** now − last heartbeat, by the database's clock. */
  ageMs: number;
  heartbeatAt: Date;
}

/** What the executor needs to know about live workers (the liveness table provides it). */
export interface WorkerDirectory {
  list(): Promise<LiveWorker[]>;
}

/**
 * May get new work now: it beats within the staleness limit, is not draining, and its stream
 * says Active. A worker whose WorkerStarted the view has not applied yet (its liveness row can
 * be a moment ahead of the subscription) is not: its policies, concurrency limits included, are
 * not known yet, and applying that event runs another pass. Nor is one whose stream says Lost,
 * even if it beats again (SIGCONT): it must announce itself again first.
 */
export function fitForWork(w: LiveWorker, status: WorkerStatus | undefined, staleAfterMs: number): boolean {
  return !w.draining && w.ageMs < staleAfterMs && status === 'active';
}
