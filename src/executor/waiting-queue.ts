// The executions waiting in Requested for a worker or a concurrency slot. Each concurrency bucket
// keeps its due executions in a heap (higher priority first, then first come first served), and
// retries whose backoff has not passed wait in one more heap by their time, so the scheduler
// (placement.ts) takes exactly the executions it can place, in order, without sorting or even
// visiting the rest. Removal is lazy: an entry leaves its heap when it comes to the top.
import { Heap } from './heap.ts';

export interface WaitingExecution {
  executionId: string;
  action: string;
  priority: number;
  /** Order of arrival, for first come first served within a priority; kept across retries. */
  seq: number;
  /** Earliest time a retry may be scheduled (ms since epoch); 0 when none. */
  notBefore: number;
  /** Since when it could have been scheduled (ms since epoch): its request, or its retry's time. */
  since: number;
  /** Workers that let an earlier attempt pass its schedule-to-start deadline: try others first. */
  avoid: readonly string[];
  /** The concurrency bucket (action and key) whose slot scheduling it takes. */
  bucket: string;
  /** The action version the submission pinned; absent: the newest a live worker offers. */
  version?: number;
}

/** One waiting execution as the heaps hold it; `live` is false once it left the queue. */
export interface Waiting {
  readonly w: WaitingExecution;
  live: boolean;
  /** In its bucket's heap (due), or still in the delayed one. */
  due: boolean;
}

/**
 * The heap an execution waits in: its concurrency bucket, split by pinned version, so a pass
 * skips executions pinned to a version no worker offers without visiting them one by one.
 */
const queueKey = (w: WaitingExecution): string => (w.version === undefined ? w.bucket : `${w.bucket}\u0000@${w.version}`);

/** Higher priority first, then the earlier arrival. */
export const ahead = (a: WaitingExecution, b: WaitingExecution): boolean => a.priority > b.priority || (a.priority === b.priority && a.seq < b.seq);

interface Bucket {
  action: string;
  /** The concurrency bucket whose slots its executions take. */
  bucket: string;
  /** The version its executions are pinned to; undefined: unpinned. */
  version: number | undefined;
  heap: Heap<Waiting>;
  /** Live entries in the heap. */
  due: number;
}

export class WaitingQueue {
  readonly #entries = new Map<string, Waiting>();
  readonly #buckets = new Map<string, Bucket>();
  readonly #delayed = new Heap<Waiting>((a, b) => a.w.notBefore < b.w.notBefore);
  readonly #byAction = new Map<string, Set<string>>();

  get size(): number {
    return this.#entries.size;
  }

  add(w: WaitingExecution): void {
    this.remove(w.executionId);
    const entry: Waiting = { w, live: true, due: false };
    this.#entries.set(w.executionId, entry);
    let ids = this.#byAction.get(w.action);
    if (!ids) this.#byAction.set(w.action, (ids = new Set()));
    ids.add(w.executionId);
    if (w.notBefore > 0) this.#delayed.push(entry);
    else this.#makeDue(entry);
  }

  remove(executionId: string): void {
    const entry = this.#entries.get(executionId);
    if (!entry) return;
    entry.live = false;
    if (entry.due) {
      const key = queueKey(entry.w);
      const b = this.#buckets.get(key)!;
      // An emptied bucket goes, with whatever dead entries its heap still held (a key per tenant adds up).
      if (--b.due === 0) this.#buckets.delete(key);
    }
    this.#entries.delete(executionId);
    const ids = this.#byAction.get(entry.w.action);
    ids?.delete(executionId);
    if (ids?.size === 0) this.#byAction.delete(entry.w.action);
  }

  /** Its concurrency bucket became known (its action's policy arrived after it was requested). */
  rebucket(executionId: string, bucket: string): void {
    const entry = this.#entries.get(executionId);
    if (entry && entry.w.bucket !== bucket) this.add({ ...entry.w, bucket });
  }

  /** Retries whose time has come join their bucket. */
  promote(now: number): void {
    for (let top = this.#delayed.peek(); top && (!top.live || top.w.notBefore <= now); top = this.#delayed.peek()) {
      this.#delayed.pop();
      if (top.live) this.#makeDue(top);
    }
  }

  /** The earliest retry time still to come, if any. */
  nextRetryAt(now: number): number | undefined {
    for (let top = this.#delayed.peek(); top; top = this.#delayed.peek()) {
      if (top.live) return top.w.notBefore > now ? top.w.notBefore : now;
      this.#delayed.pop();
    }
    return undefined;
  }

  /** Heaps with due executions: the key `take` takes from, their action, concurrency bucket and pinned version. */
  *dueBuckets(): Iterable<[key: string, action: string, bucket: string, version: number | undefined]> {
    for (const [key, b] of this.#buckets) if (b.due > 0) yield [key, b.action, b.bucket, b.version];
  }

  /** Take the first due execution of a heap (a key from dueBuckets) out of it (the planner puts back what it took). */
  take(key: string): Waiting | undefined {
    const b = this.#buckets.get(key);
    for (let top = b?.heap.pop(); top; top = b!.heap.pop()) if (top.live) return top;
    return undefined;
  }

  /** Return what `take` took: it waits on, in its place, unless it left the queue meanwhile. */
  putBack(entry: Waiting): void {
    if (entry.live && entry.due) this.#buckets.get(queueKey(entry.w))?.heap.push(entry);
  }

  values(): IterableIterator<Waiting> {
    return this.#entries.values();
  }

  /** The actions something waits for, and how many wait for each. */
  actions(): Map<string, number> {
    return new Map([...this.#byAction].map(([action, ids]) => [action, ids.size]));
  }

  /** The executions waiting for one action. */
  of(action: string): WaitingExecution[] {
    return [...(this.#byAction.get(action) ?? [])].map((id) => this.#entries.get(id)!.w);
  }

  #makeDue(entry: Waiting): void {
    const key = queueKey(entry.w);
    let b = this.#buckets.get(key);
    if (!b) this.#buckets.set(key, (b = { action: entry.w.action, bucket: entry.w.bucket, version: entry.w.version, heap: new Heap((x, y) => ahead(x.w, y.w)), due: 0 }));
    entry.due = true;
    b.due++;
    b.heap.push(entry);
  }
}
