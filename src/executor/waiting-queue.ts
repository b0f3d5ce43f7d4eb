// The executions waiting in Requested for a worker or a concurrency slot: in priority, then
// arrival order, with a per-action view so the monitor can ask about one action cheaply.
import type { WaitingExecution } from './scheduling-entries.ts';

export class WaitingQueue {
  readonly #waiting = new Map<string, WaitingExecution>();
  readonly #byAction = new Map<string, Set<string>>();

  get size(): number {
    return this.#waiting.size;
  }

  add(w: WaitingExecution): void {
    this.remove(w.executionId);
    this.#waiting.set(w.executionId, w);
    let ids = this.#byAction.get(w.action);
    if (!ids) this.#byAction.set(w.action, (ids = new Set()));
    ids.add(w.executionId);
  }

  remove(executionId: string): void {
    const w = this.#waiting.get(executionId);
    if (!w) return;
    this.#waiting.delete(executionId);
    const ids = this.#byAction.get(w.action);
    ids?.delete(executionId);
    if (ids?.size === 0) this.#byAction.delete(w.action);
  }

  /** Its concurrency bucket became known (see SchedulingIndex's keying of waiting inputs). */
  rebucket(executionId: string, bucket: string): void {
    const w = this.#waiting.get(executionId);
    if (w) this.#waiting.set(executionId, { ...w, bucket });
  }

  values(): IterableIterator<WaitingExecution> {
    return this.#waiting.values();
  }

  /**
   * Ready to schedule at `now`, highest priority first, then oldest first; of each concurrency
   * bucket only as many as it has free slots (the first in that order), so a full bucket holds
   * back its own executions and nothing behind them.
   */
  ready(now: number, freeSlots: (action: string, bucket: string) => number): WaitingExecution[] {
    const sorted = [...this.#waiting.values()].filter((w) => w.notBefore <= now && freeSlots(w.action, w.bucket) > 0).sort((a, b) => b.priority - a.priority || a.seq - b.seq);
    const offered = new Map<string, number>();
    return sorted.filter((w) => {
      const n = offered.get(w.bucket) ?? 0;
      if (n >= freeSlots(w.action, w.bucket)) return false;
      offered.set(w.bucket, n + 1);
      return true;
    });
  }

  /** The earliest future notBefore among waiting retries, if any. */
  nextRetryAt(now: number): number | undefined {
    let next: number | undefined;
    for (const w of this.#waiting.values()) if (w.notBefore > now && (next === undefined || w.notBefore < next)) next = w.notBefore;
    return next;
  }

  /** The actions something waits for, and how many wait for each. */
  actions(): Map<string, number> {
    return new Map([...this.#byAction].map(([action, ids]) => [action, ids.size]));
  }

  /** The executions waiting for one action. */
  of(action: string): WaitingExecution[] {
    return [...(this.#byAction.get(action) ?? [])].map((id) => this.#waiting.get(id)!);
  }
}
