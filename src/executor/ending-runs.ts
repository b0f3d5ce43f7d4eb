// Runs of this process's workers whose action has ended and whose outcome is being stored: the
// executor places the next execution on their slot now, instead of after the outcome's commit
// comes back and the next scheduling pass has run. The next handoff is then stored with the
// outcome (in its transaction when the pass queues it before the outcome's batch leaves, else in
// the batch right after it), and a slot no longer sits empty for the outcome's commit, a pass
// and a handoff append in turn. Measured through ../shared/bench-peers (10,000 no-op jobs, C=50,
// four runs of each build, alternated), with the handoff not yet ordered after the outcome:
// JetStream 3,606–4,288 → 4,147–4,457 jobs/s (means 4,014 → 4,290), Postgres queue 3,382–4,192 →
// 3,575–4,553 (3,842 → 4,161). Ordered (2026-11-28, a slower machine, 10,000-execution drains of
// the peers' Postgres-queue setup, three of each alternated): not freed early 1,833–1,981/s (mean
// 1,896), freed early unordered 1,743–2,335 (2,031), freed early and ordered 1,945–2,162 (2,048).
//
// The history still never shows a worker holding more than its capacity: a handoff placed on such
// a slot goes through the worker's own batcher (src/worker/dispatch-batcher.ts) after the ended
// run's outcome, in the same transaction or a later one, so the outcome comes first in the
// store's order. Both are decided by the machine as before. Only when that outcome is not stored
// (refused because the execution moved on meanwhile, or a failure the worker retries later) can
// the handoff come first; the run then counts again once `recorded` settles, and until that
// execution's next change the placement sees its worker one over capacity and places nothing
// more there. Only a worker whose outcomes go through the executor's own execution runtime (one
// process's hosts: `baton dev`, an embedded worker with its executor, the benchmarks) is freed
// early; any other keeps its slot until its outcome's change arrives.
import type { ExecutionSnapshot } from '../../actors/execution.machine.ts';
import type { DispatchOutcome, DispatchRequest } from '../runtime/dispatch-many.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';
import type { ExecutionEvent } from '../../schemas/events.ts';
import { batcherFor } from '../worker/dispatch-batcher.ts';

export class EndingRuns {
  readonly #workerOf = new Map<string, string>();
  readonly #onWorker = new Map<string, Set<string>>();

  /** The run of `executionId` on `workerId` ended; returns false when it is counted already. */
  add(executionId: string, workerId: string): boolean {
    if (this.#workerOf.has(executionId)) return false;
    this.#workerOf.set(executionId, workerId);
    let ids = this.#onWorker.get(workerId);
    if (!ids) this.#onWorker.set(workerId, (ids = new Set()));
    ids.add(executionId);
    return true;
  }

  /** Its outcome was stored or given up, or the execution changed otherwise: the view says the rest. */
  drop(executionId: string): void {
    const workerId = this.#workerOf.get(executionId);
    if (workerId === undefined) return;
    this.#workerOf.delete(executionId);
    const ids = this.#onWorker.get(workerId)!;
    ids.delete(executionId);
    if (ids.size === 0) this.#onWorker.delete(workerId);
  }

  /** Ended runs on `workerId` that the view still counts in its load. */
  of(workerId: string): number {
    return this.#onWorker.get(workerId)?.size ?? 0;
  }

  /** Their executions: a handoff to `workerId` is stored after their outcomes, never before. */
  on(workerId: string): string[] {
    return [...(this.#onWorker.get(workerId) ?? [])];
  }
}

type HandoffRequest = DispatchRequest<ExecutionSnapshot, ExecutionEvent>;

/**
 * A pass's handoffs: those to a worker with ended runs through that worker's batcher, after
 * their outcomes; the rest in one dispatchMany of their own. Outcomes in the order given.
 */
export async function dispatchHandoffs(runtime: ExecutionRuntime, handoffs: readonly { request: HandoffRequest; after: readonly string[] }[]): Promise<DispatchOutcome<ExecutionSnapshot>[]> {
  const outcomes = new Array<DispatchOutcome<ExecutionSnapshot>>(handoffs.length);
  const direct = [...handoffs.keys()].filter((i) => handoffs[i]!.after.length === 0);
  const batcher = direct.length < handoffs.length ? batcherFor(runtime) : undefined;
  await Promise.all([
    // Nobody elsewhere waits for a handoff: its worker runs here (eager dispatch) or hears of it
    // through the transport, after this append (AppendNotice).
    direct.length > 0 && runtime.actors.dispatchMany(direct.map((i) => handoffs[i]!.request), { othersWait: false }).then((r) => r.forEach((o, k) => (outcomes[direct[k]!] = o))),
    ...handoffs.map(async (h, i) => {
      if (h.after.length > 0) outcomes[i] = await batcher!.dispatchAfter(h.request, h.after);
    }),
  ]);
  return outcomes;
}
