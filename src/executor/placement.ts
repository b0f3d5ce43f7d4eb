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
//   - an execution goes only to a worker offering the version it runs: its pin, else the newest
//     a fit worker offers (version-choice.ts); the queue keeps each pin in a heap of its own, so
//     executions pinned to a version no fit worker offers are skipped whole, like an action's,
//     while the bucket's free slots are shared by all its heaps;
//   - an execution goes only to a worker serving its namespace (serves(), below), and only while
//     its namespace is under its concurrency limit (namespaceRoom);
//   - an execution `admits` refuses (no rate-limit token for it) is skipped, and its room goes to
//     the next one (test/unit/placement-admits.test.ts).
// Cost: O(buckets with due work + placed × log), not O(waiting): the queue's heaps hand out
// executions in order, and a pass stops taking from a bucket or an action as soon as it is full.
import { Heap } from './heap.ts';
import { versionChooser } from './version-choice.ts';
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
  /** The action version it runs there (version-choice.ts). */
  actionVersion: number;
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
  /** The heap it takes from (WaitingQueue.dueBuckets). */
  key: string;
  bucket: string;
  action: string;
  version: number | undefined;
  head: Waiting;
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
  const versionFor = versionChooser((action) => offering.get(action) ?? []);
  // A bucket's heaps (one per pinned version) share its free slots within the pass.
  const left = new Map<string, number>();
  const slotsLeft = (action: string, bucket: string): number => {
    let n = left.get(bucket);
    if (n === undefined) left.set(bucket, (n = input.freeSlots(action, bucket)));
    return n;
  };
  /** Some worker offering the version such an execution runs on has room (none for a pin nobody offers). */
  const hasRoom = (action: string, version: number | undefined) => versionFor(action, version)?.workers.some((w) => room.get(w.workerId)! > 0) ?? false;
  const mayTake = (c: Omit<Cursor, 'head'>) => slotsLeft(c.action, c.bucket) > 0 && hasRoom(c.action, c.version);

  const cursors = new Heap<Cursor>((a, b) => ahead(a.head.w, b.head.w));
  const taken: Waiting[] = [];
  const takeNext = (c: Omit<Cursor, 'head'>) => {
    const head = queue.take(c.key);
    if (!head) return;
    taken.push(head);
    cursors.push({ ...c, head });
  };
  for (const [key, action, bucket, version] of queue.dueBuckets()) {
    const c = { key, action, bucket, version };
    if (mayTake(c)) takeNext(c);
  }

  // A namespace at its limit holds back only its own executions, like a full bucket.
  const namespaceLeft = new Map<string, number>();
  const roomIn = (namespace: string) => {
    let n = namespaceLeft.get(namespace);
    if (n === undefined) namespaceLeft.set(namespace, (n = input.namespaceRoom ? input.namespaceRoom(namespace) : Infinity));
    return n;
  };

  const placed: Placement[] = [];
  const refused = new Map<string, number>();
  for (let c = cursors.pop(); c; c = cursors.pop()) {
    const { head, ...from } = c;
    // Another heap of its bucket (another pin) may have filled the bucket since this was taken.
    if (slotsLeft(c.action, c.bucket) <= 0) continue;
    // Its namespace at its limit: not this one, but the next of its heap may be of another namespace.
    const namespace = head.w.namespace ?? DEFAULT_NAMESPACE;
    if (roomIn(namespace) <= 0) {
      if (mayTake(from)) takeNext(from);
      continue;
    }
    if (input.admits && !input.admits(head.w)) {
      // Not this one (no token for it): the next of its heap may have one (another key).
      const n = (refused.get(c.key) ?? 0) + 1;
      refused.set(c.key, n);
      if (n < MAX_REFUSED && mayTake(from)) takeNext(from);
      continue;
    }
    const choice = versionFor(c.action, c.version);
    const worker = choice && chooseWorker(head.w, choice.workers, room);
    if (!worker || !choice) {
      // No room for this one (its workers are full, or only ones it must avoid have room); the
      // next of its bucket may still fit elsewhere.
      if (mayTake(from)) takeNext(from);
      continue;
    }
    placed.push({ execution: head.w, workerId: worker.workerId, actionVersion: choice.version });
    namespaceLeft.set(namespace, roomIn(namespace) - 1);
    room.set(worker.workerId, room.get(worker.workerId)! - 1);
    left.set(c.bucket, slotsLeft(c.action, c.bucket) - 1);
    if (mayTake(from)) takeNext(from);
  }
  // Nothing leaves the queue here: a placed execution leaves when its handoff is applied.
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
