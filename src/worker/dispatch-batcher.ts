// The worker's appends on the pickup and completion paths (ExecutionStarted, the outcome, a
// release) go through one coalescing queue per execution runtime: whatever is asked while a
// batch is being stored waits and goes in the next one, one appendMany (one transaction where
// the store has them). No fixed delay: a request waits one turn of the event loop (so the
// deliveries one fetch or claim handed over together go in one batch), or, when MAX_IN_FLIGHT
// batches are being stored, until one of them is. Each request keeps its own outcome: a conflict for one
// execution is that execution's alone (the runtime reloads and decides it again by itself).
// Callers ack a delivery only after the request that recorded it resolved, i.e. after its commit.
import type { DispatchResult, ExecutionCommand, ExecutionRuntime } from '../runtime/execution-runtime.ts';
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

interface Pending {
  id: string;
  commands: ExecutionCommand | ExecutionCommand[];
  known: Known | undefined;
  resolve(r: DispatchResult): void;
  reject(err: unknown): void;
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
    return new Promise<DispatchResult>((resolve, reject) => {
      this.#queue.push({ id: executionId, commands, known: o.known, resolve, reject });
      if (this.#scheduled || this.#inFlight >= this.maxInFlight) return; // a batch in flight takes it when it is stored
      // One turn of the event loop, for the requests made with this one (one fetch's deliveries).
      this.#scheduled = true;
      setImmediate(() => {
        this.#scheduled = false;
        this.#pump();
      });
    });
  }

  #pump(): void {
    while (this.#inFlight < this.maxInFlight && this.#queue.length > 0) {
      const batch: Pending[] = [];
      const rest: Pending[] = [];
      for (const p of this.#queue) {
        if (batch.length < this.maxBatch && !this.#busy.has(p.id)) {
          batch.push(p);
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
      const outcomes = await this.runtime.actors.dispatchMany(batch.map((p) => ({ id: p.id, commands: p.commands, ...(p.known && { known: p.known }) })));
      for (const [i, p] of batch.entries()) {
        const o = outcomes[i]!;
        if (o.ok) p.resolve({ executionId: p.id, snapshot: o.value.snapshot, revision: o.value.revision, appended: o.value.appended });
        else p.reject(o.error);
      }
    } catch (err) {
      for (const p of batch) p.reject(err);
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
