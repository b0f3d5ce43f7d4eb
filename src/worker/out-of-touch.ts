// A worker that cannot store its heartbeats (its database unreachable) stops its runs before the
// executor may count it lost: the executor then reclaims what it holds and starts the next attempt
// on another worker, and a run still going here would overlap that one (QA saw three executions run
// twice at once this way). Fenced one heartbeat interval before the staleness limit, so that its
// actions' abort signals fire while the baton is still this worker's.
import type { Logger } from 'pino';
import type { HeartbeatLoop } from '../liveness/heartbeat-loop.ts';
import { OutOfTouch } from './run-stops.ts';

export interface OutOfTouchWatch {
  heartbeat: Pick<HeartbeatLoop, 'status'>;
  /** The runs to stop, by execution (RunDeliveryDeps.fences). */
  fences: ReadonlyMap<string, (reason: OutOfTouch) => void>;
  workerId: string;
  /** After this long without a stored heartbeat, executors count the worker lost. */
  staleAfterMs: number;
  heartbeatIntervalMs: number;
  log: Logger;
  now?: () => number;
}

/** Starts watching; returns the function that stops it. */
export function watchOutOfTouch(o: OutOfTouchWatch): () => void {
  const now = o.now ?? Date.now;
  const fenceAfterMs = Math.max(o.heartbeatIntervalMs, o.staleAfterMs - o.heartbeatIntervalMs);
  const timer = setInterval(() => {
    const { lastSuccessAt, consecutiveFailures } = o.heartbeat.status();
    if (consecutiveFailures === 0 || lastSuccessAt === null || o.fences.size === 0) return;
    const silentMs = now() - lastSuccessAt.getTime();
    if (silentMs < fenceAfterMs) return;
    const seconds = Math.round(silentMs / 1000);
    o.log.error({ runs: o.fences.size, silentMs }, `worker ${o.workerId} has stored no heartbeat for ${seconds} s: stopping its runs before executors count it lost and retry them elsewhere`);
    const reason = new OutOfTouch(`worker ${o.workerId} stored no heartbeat for ${seconds} s (its database out of reach) and stopped the run, so that it could not overlap a retry elsewhere`);
    for (const fence of [...o.fences.values()]) fence(reason);
  }, Math.min(o.heartbeatIntervalMs, 1_000));
  timer.unref();
  return () => clearInterval(timer);
}
