// Runs of this process's workers whose action has ended and whose outcome is being stored: the
// executor places the next execution on their slot now, instead of after the outcome's commit
// comes back and the next scheduling pass has run. The next handoff's append then goes to the
// store while the outcome's is in flight (two transactions at once), and a slot no longer sits
// empty for an outcome append, a pass and a handoff append in turn. Measured through ../shared/bench-peers (10,000 no-op jobs, C=50, four runs of
// each build, alternated): JetStream 3,606–4,288 → 4,147–4,457 jobs/s (means 4,014 → 4,290),
// Postgres queue 3,382–4,192 → 3,575–4,553 (3,842 → 4,161); `baton bench`, three pairs,
// 3,438–3,596 → 3,617–3,739 executions/s.
//
// Only the placement's room per worker sees this; the history does not: the outcome and the
// handoff are each decided by the machine as before. Nothing runs beyond capacity, because the
// ended run's action no longer runs. Should its outcome not be stored (refused, or a failure the
// worker gives up on), the run counts again once `recorded` settles: until that execution's
// next change reaches the view, the placement may see its worker one over capacity and
// places nothing more there.
export class EndingRuns {
  readonly #workerOf = new Map<string, string>();
  readonly #perWorker = new Map<string, number>();

  /** The run of `executionId` on `workerId` ended; returns false when it is counted already. */
  add(executionId: string, workerId: string): boolean {
    if (this.#workerOf.has(executionId)) return false;
    this.#workerOf.set(executionId, workerId);
    this.#perWorker.set(workerId, (this.#perWorker.get(workerId) ?? 0) + 1);
    return true;
  }

  /** Its outcome was stored or given up, or the execution changed otherwise: the view says the rest. */
  drop(executionId: string): void {
    const workerId = this.#workerOf.get(executionId);
    if (workerId === undefined) return;
    this.#workerOf.delete(executionId);
    const n = this.#perWorker.get(workerId)! - 1;
    if (n > 0) this.#perWorker.set(workerId, n);
    else this.#perWorker.delete(workerId);
  }

  /** Ended runs on `workerId` that the view still counts in its load. */
  of(workerId: string): number {
    return this.#perWorker.get(workerId) ?? 0;
  }
}
