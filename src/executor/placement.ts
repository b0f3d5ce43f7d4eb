// Placement: which waiting execution goes to which worker now. Pure: the waiting queue, the
// workers fit for work and what each holds in, handoffs out; the executor appends them.
//
// Rules (each a test in test/unit/placement.test.ts):
//   - higher priority first, then first come first served, across every action and bucket;
//   - a concurrency bucket gets no more than its free slots; a full bucket holds back only its
//     own executions, never the ones behind them;
//   - a worker gets no more than its free capacity; the least loaded worker that offers the
//     action is chosen; one that let an earlier attempt expire unstarted only when no other
//     live worker offers the action;
//   - an action no fit worker has room for is skipped whole, without visiting its executions;
//   - an execution goes only to a worker serving its namespace (serves(), below), and only while
//     its namespace is under its concurrency limit (namespaceRoom).
// Cost: O(buckets with due work + placed × log), not O(waiting): the queue's heaps hand out
// executions in order, and a pass stops taking from a bucket or an action as soon as it is full.
import { Heap } from './heap.ts';
import { DEFAULT_NAMESPACE } from '../input/namespace.ts';
import { ahead, type Waiting, type WaitingExecution, type WaitingQueue } from './waiting-queue.ts';

/** A worker that may take work now: not draining, heartbeating, announced (src/executor/worker-directory.ts). */
export interface PlacementWorker {
  workerId: string;
  actions: readonly string[];
  capacity: number;
  /** The namespaces whose executions it runs (its WorkerStarted); undefined: every namespace. */
  namespaces?: readonly string[];
}

export interface Placement {
  execution: WaitingExecution;
  workerId: string;
}

export interface PlanInput {
  now: number;
  queue: WaitingQueue;
  workers: readonly PlacementWorker[];
  /** Executions a worker holds now (handed off or running). */
  loadOf(workerId: string): number;
  /** Slots the bucket has free now; Infinity when its action has no limit. */
  freeSlots(action: string, bucket: string): number;
  /** Executions of the namespace that may still start now (BATON_NAMESPACE_CONCURRENCY); absent: no namespace limits. */
  namespaceRoom?(namespace: string): number;
}

interface Cursor {
  bucket: string;
  action: string;
  head: Waiting;
  /** Slots of the bucket this pass may still fill. */
  left: number;
}

export function plan(input: PlanInput): Placement[] {
  const { queue } = input;
  queue.promote(input.now);
  const room = new Map<string, number>();
  const offering = new Map<string, PlacementWorker[]>();
  for (const w of input.workers) {
    room.set(w.workerId, w.capacity - input.loadOf(w.workerId));
    for (const action of w.actions) {
      let list = offering.get(action);
      if (!list) offering.set(action, (list = []));
      list.push(w);
    }
  }
  const hasRoom = (action: string) => offering.get(action)?.some((w) => room.get(w.workerId)! > 0) ?? false;

  const cursors = new Heap<Cursor>((a, b) => ahead(a.head.w, b.head.w));
  const taken: Waiting[] = [];
  const takeNext = (c: Omit<Cursor, 'head'>) => {
    const head = queue.take(c.bucket);
    if (!head) return;
    taken.push(head);
    cursors.push({ ...c, head });
  };
  for (const [bucket, action] of queue.dueBuckets()) {
    const left = input.freeSlots(action, bucket);
    if (left > 0 && hasRoom(action)) takeNext({ bucket, action, left });
  }

  // A namespace at its limit holds back only its own executions, like a full bucket.
  const namespaceLeft = new Map<string, number>();
  const roomIn = (namespace: string) => {
    let n = namespaceLeft.get(namespace);
    if (n === undefined) namespaceLeft.set(namespace, (n = input.namespaceRoom ? input.namespaceRoom(namespace) : Infinity));
    return n;
  };

  const placed: Placement[] = [];
  for (let c = cursors.pop(); c; c = cursors.pop()) {
    const namespace = c.head.w.namespace ?? DEFAULT_NAMESPACE;
    const worker = roomIn(namespace) > 0 ? chooseWorker(c.head.w, offering.get(c.action) ?? [], room) : undefined;
    if (!worker) {
      // No room for this one (its workers are full, or only ones it must avoid have room); the
      // next of its bucket may still fit elsewhere.
      if (c.left > 0 && hasRoom(c.action)) takeNext({ bucket: c.bucket, action: c.action, left: c.left });
      continue;
    }
    placed.push({ execution: c.head.w, workerId: worker.workerId });
    namespaceLeft.set(namespace, roomIn(namespace) - 1);
    room.set(worker.workerId, room.get(worker.workerId)! - 1);
    if (c.left - 1 > 0 && hasRoom(c.action)) takeNext({ bucket: c.bucket, action: c.action, left: c.left - 1 });
  }
  // Nothing leaves the queue here: a placed execution leaves when its SchedulingStarted is applied.
  for (const w of taken) queue.putBack(w);
  return placed;
}

/**
 * The least loaded worker with room among those offering the action; a worker the execution
 * should avoid (it let an earlier attempt expire unstarted) only when no other live worker
 * offers the action at all (README: retried on a different worker).
 */
function chooseWorker(execution: WaitingExecution, offering: readonly PlacementWorker[], room: ReadonlyMap<string, number>): PlacementWorker | undefined {
  const namespace = execution.namespace ?? DEFAULT_NAMESPACE;
  const serving = offering.every((w) => w.namespaces === undefined) ? offering : offering.filter((w) => serves(w, namespace));
  const others = execution.avoid.length === 0 ? serving : serving.filter((w) => !execution.avoid.includes(w.workerId));
  let best: PlacementWorker | undefined;
  let bestLoad = Infinity;
  for (const w of others.length > 0 ? others : serving) {
    const free = room.get(w.workerId)!;
    if (free <= 0) continue;
    const load = (w.capacity - free) / w.capacity;
    if (load < bestLoad) [best, bestLoad] = [w, load];
  }
  return best;
}

/** Whether `worker` runs executions of `namespace`: a worker that names none runs every namespace's. */
export const serves = (worker: Pick<PlacementWorker, 'namespaces'>, namespace: string): boolean =>
  worker.namespaces === undefined || worker.namespaces.includes(namespace);
