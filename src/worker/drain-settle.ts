// A draining worker keeps taking what is addressed to it for a moment. Handoffs an executor
// committed before it saw the worker drain still arrive after WorkerDraining: its directory of
// workers may be 250 ms old and its follow of the worker's stream behind under load (QA, 1,500
// queued runs of 30 ms: one handoff 11 ms after WorkerDraining, one 75 ms after WorkerStopped).
// They are this worker's to run; a consumer stopped at once left them to a reclaim at their
// schedule-to-start deadline, which costs an attempt (with maxAttempts 1 the execution was
// abandoned). So the consumer stays at least `minMs`, and then until deliveries have been quiet
// for `quietMs`: an idle worker stops after the minimum, a busy one once executors have stopped
// sending to it. What still comes later is reclaimed from the stopped worker by the executor.
import { sleep } from '../async/sleep.ts';

export interface DrainSettle {
  /** Default 200 ms: a pass that had read the directory before the drain appends within it. */
  minMs?: number;
  /** Default 500 ms. */
  quietMs?: number;
  /** Default 3 s, however busy. */
  maxMs?: number;
}

/** Resolves once deliveries (`lastDeliveryAt()`, performance.now()) have settled as DrainSettle says, or when `signal` aborts. */
export async function untilDeliveriesQuiet(lastDeliveryAt: () => number, signal: AbortSignal, o: DrainSettle = {}): Promise<void> {
  const { minMs = 200, quietMs = 500, maxMs = 3_000 } = o;
  const start = performance.now();
  const deadline = start + Math.max(minMs, maxMs);
  for (;;) {
    const now = performance.now();
    // The minimum counts as a delivery at start + minMs - quietMs: quiet from then means minMs passed.
    const last = Math.max(lastDeliveryAt(), start + minMs - quietMs);
    const wait = Math.min(quietMs - (now - last), deadline - now);
    if (wait <= 0 || signal.aborted) return;
    await sleep(wait, signal);
  }
}
