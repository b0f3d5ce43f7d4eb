// The live workers the executor schedules to, as the liveness table reports them, and the one
// rule for which of them may get new work now (scheduling and the monitor both ask it).
import type { Logger } from 'pino';
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
  /** The work transport it pulls from (WorkTransport.kind); null or absent: not said. */
  transport?: string | null;
}

/**
 * Whether a worker pulls from the transport an executor publishes to (`kind`): one on the other
 * transport never sees the work, and each handoff to it would wait out its schedule-to-start
 * deadline. A worker (or transport) that does not say is taken at its word, as before.
 */
export const reachableOver = (kind: string | undefined) => (w: LiveWorker): boolean => !kind || !w.transport || w.transport === kind;

/** reachableOver, saying once per worker id that one on another transport gets no work. */
export function reachableSaying(kind: string | undefined, log: Logger): (w: LiveWorker) => boolean {
  const reachable = reachableOver(kind);
  const said = new Set<string>();
  return (w) => {
    if (reachable(w)) return true;
    if (!said.has(w.workerId)) {
      said.add(w.workerId);
      log.warn({ workerId: w.workerId, workerTransport: w.transport, transport: kind }, `worker ${w.workerId} pulls from the ${w.transport} transport, but this executor publishes to ${kind}: no work is placed on it (start both with the same --transport)`);
    }
    return false;
  };
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
 * How long after a pass found the list old its background query starts: after that pass's handoff
 * append rather than beside it (on 2 cores the two queries' backends raced for the CPU at the
 * moment the pickup waited). Peers harness latency phase at 3 submits/s, four pairs alternated:
 * pickup mean 3.3–5.9 ms at once, 3.3–4.2 ms 8 ms later (lower in three pairs of four).
 */
const BACKGROUND_ASK_DELAY_MS = 8;

/**
 * The directory as the scheduling pass reads it: one query per `maxAgeMs` at most instead of one
 * per pass (at light load that query was one of the ~8 round trips between a submit and the
 * action's start).
 *
 * - Ages are carried forward by the local clock, so a worker that stopped beating still goes stale
 *   on time: a held list can only make a worker look older than it is, never fitter. Past
 *   `maxAgeMs` the list is asked again in the background while the pass goes on with the one held,
 *   up to `staleLimitMs`; past that the pass waits for the query. The executor sets the limit to a
 *   third of its staleness limit, so a worker whose last beat was a heartbeat interval old when
 *   asked still looks live in a list that old. (With a limit of 1 s, every pass more than a second
 *   after the last waited for the query, 1–9 ms: with one submit every 1.2 s, `baton bench` pickup
 *   p50 was 7.2–8.2 ms, and 6.6–7.0 without the wait, two pairs.)
 * - `invalidate` when a worker's own events say it changed (started, draining, stopped): the next
 *   pass waits for a fresh list, so a new worker gets work at once and a draining one none. Not
 *   asked ahead of that pass: a worker records WorkerStarted before its first beat, and such an
 *   answer missed the worker or showed it draining.
 * - `leftWaiting` after a pass that placed nothing: ask again once the held list is `maxAgeMs` old
 *   (at once if it is; that pass appended nothing for the query to wait behind). `onChanged` hears
 *   of an answer that differs from the one before in who may get work (ids, draining, capacity,
 *   offers), and the executor runs another pass. A new worker's row says draining until its first
 *   beat, which is no event: work that waited for a worker was placed only by the executor's 1 s
 *   safety pass (803–807 ms after the worker was up; now 8–55 ms).
 */
export function cachedDirectory(
  inner: WorkerDirectory,
  maxAgeMs: number,
  o: { now?: () => number; staleLimitMs?: number; onChanged?: () => void } = {},
): WorkerDirectory & { invalidate(): void; leftWaiting(): void } {
  const now = o.now ?? Date.now;
  const staleLimitMs = o.staleLimitMs ?? 4 * maxAgeMs;
  let held: { at: number; workers: LiveWorker[] } | undefined;
  let lastKey: string | undefined;
  let inFlight: Promise<LiveWorker[]> | undefined;
  let generation = 0;
  let recheck: { timer: ReturnType<typeof setTimeout>; due: number } | undefined;
  async function refresh(): Promise<LiveWorker[]> {
    const asked = generation;
    const at = now();
    const workers = await inner.list();
    const key = JSON.stringify(workers.map((w) => [w.workerId, w.draining, w.capacity, w.actions, w.runtimes]));
    if (asked === generation) held = { at, workers };
    if (lastKey !== undefined && key !== lastKey) o.onChanged?.();
    lastKey = key;
    return workers;
  }
  /** Ask in the background in `ms`, unless a query is due sooner already. */
  function askSoon(ms: number): void {
    const due = performance.now() + Math.max(0, ms);
    if (recheck && recheck.due <= due) return;
    if (recheck) clearTimeout(recheck.timer);
    const timer = setTimeout(() => {
      recheck = undefined;
      asking().catch(() => undefined);
    }, Math.max(0, ms));
    timer.unref?.();
    recheck = { timer, due };
  }
  function asking(): Promise<LiveWorker[]> {
    if (inFlight) return inFlight;
    const asked: Promise<LiveWorker[]> = refresh().finally(() => {
      if (inFlight === asked) inFlight = undefined;
    });
    return (inFlight = asked);
  }
  return {
    async list() {
      const t = now();
      if (held) {
        const passed = t - held.at;
        // In the background, after this pass's appends: a failure shows in the pass that next has to wait for a list.
        if (passed >= maxAgeMs) askSoon(BACKGROUND_ASK_DELAY_MS);
        if (passed < staleLimitMs) return held.workers.map((w) => ({ ...w, ageMs: w.ageMs + passed }));
      }
      return asking();
    },
    invalidate() {
      generation++;
      held = undefined;
      inFlight = undefined; // a query asked before the change may not show it
      // Nor one due to start in the background now, before the worker's first beat: the next pass asks.
      if (recheck) clearTimeout(recheck.timer);
      recheck = undefined;
    },
    leftWaiting() {
      askSoon(maxAgeMs - (held ? now() - held.at : maxAgeMs));
    },
  };
}
