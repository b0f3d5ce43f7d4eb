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
  /** Its namespace: only a worker serving it may take it (absent: `default`). */
  namespace?: string;
}

/** One waiting execution as the heaps hold it; `live` is false once it left the queue. */
export interface Waiting {
  readonly w: WaitingExecution;
  live: boolean;
  /** In its bucket's heap (due), or still in the delayed one. */
  due: boolean;
}

/** Higher priority first, then the earlier arrival. */
export const ahead = (a: WaitingExecution, b: WaitingExecution): boolean => a.priority > b.priority || (a.priority === b.priority && a.seq < b.seq);

interface Bucket {
  action: string;
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
      const b = this.#buckets.get(entry.w.bucket)!;
      // An emptied bucket goes, with whatever dead entries its heap still held (a key per tenant adds up).
      if (--b.due === 0) this.#buckets.delete(entry.w.bucket);
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

  /** Buckets with due executions, and their action. */
  *dueBuckets(): Iterable<[bucket: string, action: string]> {
    for (const [bucket, b] of this.#buckets) if (b.due > 0) yield [bucket, b.action];
  }

  /** Take the bucket's first due execution out of its heap (the planner puts back what it took). */
  take(bucket: string): Waiting | undefined {
    const b = this.#buckets.get(bucket);
    for (let top = b?.heap.pop(); top; top = b!.heap.pop()) if (top.live) return top;
    return undefined;
  }

  /** Return what `take` took: it waits on, in its place, unless it left the queue meanwhile. */
  putBack(entry: Waiting): void {
    if (entry.live && entry.due) this.#buckets.get(entry.w.bucket)?.heap.push(entry);
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
    let b = this.#buckets.get(entry.w.bucket);
    if (!b) this.#buckets.set(entry.w.bucket, (b = { action: entry.w.action, heap: new Heap((x, y) => ahead(x.w, y.w)), due: 0 }));
    entry.due = true;
    b.due++;
    b.heap.push(entry);
  }
}
