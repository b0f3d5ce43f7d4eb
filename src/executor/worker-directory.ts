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

/**
 * The directory as the scheduling pass reads it: one query per `maxAgeMs` at most instead of one
 * per pass (a pass runs per burst of changes; at light load that query was one of the ~8 round
 * trips between a submit and the action's start). Ages are carried forward by the local clock.
 * `invalidate` when a worker's own events say it changed (started, draining, stopped), so a new
 * worker gets work at once.
 */
export function cachedDirectory(inner: WorkerDirectory, maxAgeMs: number, now: () => number = Date.now): WorkerDirectory & { invalidate(): void } {
  let held: { at: number; workers: LiveWorker[] } | undefined;
  let inFlight: Promise<LiveWorker[]> | undefined;
  let generation = 0;
  async function refresh(): Promise<LiveWorker[]> {
    const asked = generation;
    const at = now();
    const workers = await inner.list();
    if (asked === generation) held = { at, workers };
    return workers;
  }
  return {
    async list() {
      const t = now();
      if (held && t - held.at < maxAgeMs) {
        const passed = t - held.at;
        return held.workers.map((w) => ({ ...w, ageMs: w.ageMs + passed }));
      }
      inFlight ??= refresh().finally(() => (inFlight = undefined));
      return inFlight;
    },
    invalidate() {
      generation++;
      held = undefined;
    },
  };
}
