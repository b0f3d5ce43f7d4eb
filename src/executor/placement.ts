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
//   - an action no fit worker has room for is skipped whole, without visiting its executions.
//   - an execution `admits` refuses (no rate-limit token for it) is skipped, and its room goes to
//     the next one (test/unit/placement-admits.test.ts).
// Cost: O(buckets with due work + placed × log), not O(waiting): the queue's heaps hand out
// executions in order, and a pass stops taking from a bucket or an action as soon as it is full.
import { Heap } from './heap.ts';
import { ahead, type Waiting, type WaitingExecution, type WaitingQueue } from './waiting-queue.ts';

/** A worker that may take work now: not draining, heartbeating, announced (src/executor/worker-directory.ts). */
export interface PlacementWorker {
  workerId: string;
  actions: readonly string[];
  capacity: number;
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
  /**
   * Whether this execution may be placed in this pass (false: its rate-limit bucket has no token
   * as far as the executor knows: rate-limits.ts). Asked in placement order, once per execution
   * placed; a bucket's executions refused more than MAX_REFUSED times in a pass are left for the next.
   */
  admits?(execution: WaitingExecution): boolean;
}

/** Refusals by `admits` one bucket may take in a pass before the rest of it waits for the next (keeps a pass O(placed), not O(waiting)). */
const MAX_REFUSED = 1_024;

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

  const placed: Placement[] = [];
  const refused = new Map<string, number>();
  for (let c = cursors.pop(); c; c = cursors.pop()) {
    if (input.admits && !input.admits(c.head.w)) {
      // Not this one (no token for it): the next of its bucket may have one (another key).
      const n = (refused.get(c.bucket) ?? 0) + 1;
      refused.set(c.bucket, n);
      if (n < MAX_REFUSED && c.left > 0 && hasRoom(c.action)) takeNext({ bucket: c.bucket, action: c.action, left: c.left });
      continue;
    }
    const worker = chooseWorker(c.head.w, offering.get(c.action) ?? [], room);
    if (!worker) {
      // No room for this one (its workers are full, or only ones it must avoid have room); the
      // next of its bucket may still fit elsewhere.
      if (c.left > 0 && hasRoom(c.action)) takeNext({ bucket: c.bucket, action: c.action, left: c.left });
      continue;
    }
    placed.push({ execution: c.head.w, workerId: worker.workerId });
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
  const others = execution.avoid.length === 0 ? offering : offering.filter((w) => !execution.avoid.includes(w.workerId));
  let best: PlacementWorker | undefined;
  let bestLoad = Infinity;
  for (const w of others.length > 0 ? others : offering) {
    const free = room.get(w.workerId)!;
    if (free <= 0) continue;
    const load = (w.capacity - free) / w.capacity;
    if (load < bestLoad) [best, bestLoad] = [w, load];
  }
  return best;
}
