// The worker's appends on the pickup and completion paths (ExecutionStarted, the outcome, a
// release) go through one coalescing queue per execution runtime: whatever is asked while a
// batch is being stored waits and goes in the next one, one appendMany (one transaction where
// the store has them). No fixed delay: a request waits one turn of the event loop (so the
// deliveries one fetch or claim handed over together go in one batch), or, when MAX_IN_FLIGHT
// batches are being stored, until one of them is. Each request keeps its own outcome: a conflict for one
// execution is that execution's alone (the runtime reloads and decides it again by itself).
// Callers ack a delivery only after the request that recorded it resolved, i.e. after its commit.
// A request may name executions it goes `after` (the executor's handoff to a slot whose run just
// ended, src/executor/ending-runs.ts): it is stored in the same batch as their requests, after
// them, or in a later batch once theirs settled, never before.
import type { DispatchResult, ExecutionCommand, ExecutionRuntime } from '../runtime/execution-runtime.ts';
import type { DispatchOutcome, DispatchRequest } from '../runtime/dispatch-many.ts';
import type { ExecutionEvent } from '../../schemas/events.ts';
import type { ExecutionSnapshot } from '../../actors/execution.machine.ts';

/**
 * Requests per appendMany. A worker host holds at most `capacity` runs, each with at most one
 * request waiting here; the bench's 2 workers × 64 put up to 128 in a batch. Past that, batches
 * of 256 requests (~256 events, one INSERT of ~100 KB) keep one transaction short.
 */
export const MAX_BATCH = 256;

/**
 * Batches in flight at once. With one at a time (as the store's group committer does) the
 * worker's starts and outcomes queued behind each other: in `baton bench` on this machine (2
 * cores under load average ~12) a batch averaged 24 requests and 44 ms, so that queue alone
 * capped the run at ~545 requests/s, ~270 executions/s (it made 213). With 4, 2.1 were in
 * flight on average and the queue was no longer the bound.
 */
export const MAX_IN_FLIGHT = 4;

type Known = { snapshot: ExecutionSnapshot; revision: bigint };
type Request = DispatchRequest<ExecutionSnapshot, ExecutionEvent>;

interface Pending {
  id: string;
  request: Request;
  /** Executions whose requests, queued or in flight, are stored first (see the top). */
  after: readonly string[];
  settle(outcome: DispatchOutcome<ExecutionSnapshot>): void;
}

export class DispatchBatcher {
  #queue: Pending[] = [];
  #inFlight = 0;
  #scheduled = false;
  /** Executions with a request in a batch in flight: their next request waits for it (in order). */
  readonly #busy = new Set<string>();

  constructor(
    private readonly runtime: ExecutionRuntime,
    private readonly maxBatch = MAX_BATCH,
    private readonly maxInFlight = MAX_IN_FLIGHT,
  ) {}

  /** As ExecutionRuntime.dispatch (fixed commands only), stored with whatever else is asked meanwhile. */
  dispatch(executionId: string, commands: ExecutionCommand | ExecutionCommand[], o: { known?: Known } = {}): Promise<DispatchResult> {
    return this.dispatchAfter({ id: executionId, commands, ...(o.known && { known: o.known }) }, []).then((outcome) => {
      if (!outcome.ok) throw outcome.error;
      return { executionId, snapshot: outcome.value.snapshot, revision: outcome.value.revision, appended: outcome.value.appended };
    });
  }

  /** One request, stored after the requests of `after` (in their batch or a later one); its outcome as dispatchMany gives it. */
  dispatchAfter(request: Request, after: readonly string[]): Promise<DispatchOutcome<ExecutionSnapshot>> {
    return new Promise((settle) => {
      this.#queue.push({ id: request.id, request, after, settle });
      if (this.#scheduled || this.#inFlight >= this.maxInFlight) return; // a batch in flight takes it when it is stored
      // One turn of the event loop, for the requests made with this one (one fetch's deliveries).
      this.#scheduled = true;
      setImmediate(() => {
        this.#scheduled = false;
        this.#pump();
      });
    });
  }

  /** Whether a request for `executionId` is queued or being stored: asked for, not yet settled. */
  holds(executionId: string): boolean {
    return this.#busy.has(executionId) || this.#queue.some((p) => p.id === executionId);
  }

  #pump(): void {
    while (this.#inFlight < this.maxInFlight && this.#queue.length > 0) {
      const batch: Pending[] = [];
      const rest: Pending[] = [];
      const queued = new Set(this.#queue.map((p) => p.id));
      const taken = new Set<string>();
      // Stored first: in this batch already, or neither waiting nor in flight.
      const settledOrTaken = (id: string) => taken.has(id) || (!queued.has(id) && !this.#busy.has(id));
      for (const p of this.#queue) {
        if (batch.length < this.maxBatch && !this.#busy.has(p.id) && p.after.every(settledOrTaken)) {
          batch.push(p);
          taken.add(p.id);
          this.#busy.add(p.id);
        } else rest.push(p);
      }
      this.#queue = rest;
      if (batch.length === 0) return;
      this.#inFlight++;
      void this.#send(batch);
    }
  }

  async #send(batch: Pending[]): Promise<void> {
    try {
      const outcomes = await this.runtime.actors.dispatchMany(batch.map((p) => p.request));
      for (const [i, p] of batch.entries()) p.settle(outcomes[i]!);
    } catch (error) {
      for (const p of batch) p.settle({ ok: false, error });
    } finally {
      this.#inFlight--;
      for (const p of batch) this.#busy.delete(p.id);
      this.#pump();
    }
  }
}

const batchers = new WeakMap<ExecutionRuntime, DispatchBatcher>();

/** The one batcher of this runtime: worker hosts sharing a runtime (baton dev, the bench) share its batches. */
export function batcherFor(runtime: ExecutionRuntime): DispatchBatcher {
  let b = batchers.get(runtime);
  if (!b) batchers.set(runtime, (b = new DispatchBatcher(runtime)));
  return b;
}
