// The worker's appends on the pickup and completion paths (ExecutionStarted, the outcome, a
// release) go through one coalescing queue per execution runtime: whatever is asked while a
// batch is being stored waits and goes in the next one, one appendMany (one transaction where
// the store has them). No fixed delay: the first request waits one turn of the event loop (so
// the deliveries one fetch or claim handed over together are in it), and each next batch starts
// as soon as the previous one is stored. Each request keeps its own outcome: a conflict for one
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
  #flushing = false;

  constructor(
    private readonly runtime: ExecutionRuntime,
    private readonly maxBatch = MAX_BATCH,
  ) {}

  /** As ExecutionRuntime.dispatch (fixed commands only), stored with whatever else is asked meanwhile. */
  dispatch(executionId: string, commands: ExecutionCommand | ExecutionCommand[], o: { known?: Known } = {}): Promise<DispatchResult> {
    return new Promise<DispatchResult>((resolve, reject) => {
      this.#queue.push({ id: executionId, commands, known: o.known, resolve, reject });
      if (this.#flushing) return;
      this.#flushing = true;
      setImmediate(() => void this.#flush());
    });
  }

  async #flush(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0, this.maxBatch);
      try {
        const outcomes = await this.runtime.actors.dispatchMany(batch.map((p) => ({ id: p.id, commands: p.commands, ...(p.known && { known: p.known }) })));
        for (const [i, p] of batch.entries()) {
          const o = outcomes[i]!;
          if (o.ok) p.resolve({ executionId: p.id, snapshot: o.value.snapshot, revision: o.value.revision, appended: o.value.appended });
          else p.reject(o.error);
        }
      } catch (err) {
        for (const p of batch) p.reject(err);
      }
    }
    this.#flushing = false;
  }
}

const batchers = new WeakMap<ExecutionRuntime, DispatchBatcher>();

/** The one batcher of this runtime: worker hosts sharing a runtime (baton dev, the bench) share its batches. */
export function batcherFor(runtime: ExecutionRuntime): DispatchBatcher {
  let b = batchers.get(runtime);
  if (!b) batchers.set(runtime, (b = new DispatchBatcher(runtime)));
  return b;
}
