// Placement (src/executor/placement.ts): which waiting execution goes to which worker, as a pure
// function of the waiting queue, the workers fit for work and what they hold.
import { describe, expect, it } from 'vitest';
import { plan, type PlacementWorker } from '../../src/executor/placement.ts';
import { slotBucket } from '../../src/executor/concurrency-slots.ts';
import { WaitingQueue, type WaitingExecution } from '../../src/executor/waiting-queue.ts';

let seq = 0;
function waiting(queue: WaitingQueue, o: Partial<WaitingExecution> & { id?: string } = {}): string {
  const action = o.action ?? 'a.x';
  const w: WaitingExecution = {
    executionId: o.id ?? `e${++seq}`,
    action,
    priority: o.priority ?? 0,
    seq: o.seq ?? seq,
    notBefore: o.notBefore ?? 0,
    since: 0,
    avoid: o.avoid ?? [],
    bucket: o.bucket ?? slotBucket(action, null),
    ...(o.namespace !== undefined && { namespace: o.namespace }),
  };
  queue.add(w);
  return w.executionId;
}

const worker = (workerId: string, actions: string[], capacity = 10): PlacementWorker => ({ workerId, actions, capacity });

function place(queue: WaitingQueue, workers: PlacementWorker[], o: { now?: number; load?: Record<string, number>; limits?: Record<string, number>; namespaceRoom?: Record<string, number> } = {}) {
  return plan({
    now: o.now ?? 0,
    queue,
    workers,
    loadOf: (id) => o.load?.[id] ?? 0,
    freeSlots: (_action, bucket) => o.limits?.[bucket] ?? Infinity,
    ...(o.namespaceRoom && { namespaceRoom: (ns: string) => o.namespaceRoom![ns] ?? Infinity }),
  }).map((p) => [p.execution.executionId, p.workerId]);
}

describe('plan', () => {
  it('starts no more of a namespace than its room, across actions; a full namespace holds back only its own', () => {
    const q = new WaitingQueue();
    const a1 = waiting(q, { namespace: 'team-a', action: 'a.x' });
    const b1 = waiting(q, { namespace: 'team-b', action: 'a.x' });
    const a2 = waiting(q, { namespace: 'team-a', action: 'b.y' });
    const a3 = waiting(q, { namespace: 'team-a', action: 'a.x' });
    const d1 = waiting(q, { action: 'b.y' });
    const w = worker('w', ['a.x', 'b.y']);
    expect(place(q, [w], { namespaceRoom: { 'team-a': 2 } }).map(([id]) => id)).toEqual([a1, b1, a2, d1]);
    expect(place(q, [w], { namespaceRoom: { 'team-a': 0, default: 0 } }).map(([id]) => id)).toEqual([b1]);
    expect(place(q, [w]).map(([id]) => id)).toEqual([a1, b1, a2, a3, d1]);
  });

  it('hands an execution only to a worker serving its namespace; a worker naming none serves all', () => {
    const q = new WaitingQueue();
    const a = waiting(q, { namespace: 'team-a' });
    const b = waiting(q, { namespace: 'team-b' });
    const d = waiting(q, {}); // recorded before namespaces: default
    const onlyA = { ...worker('wa', ['a.x']), namespaces: ['team-a'] };
    const onlyB = { ...worker('wb', ['a.x']), namespaces: ['team-b'] };
    expect(place(q, [onlyA, onlyB])).toEqual([[a, 'wa'], [b, 'wb']]);
    expect(place(q, [onlyA])).toEqual([[a, 'wa']]);
    expect(place(q, [onlyA, worker('any', ['a.x'], 1)]).sort()).toEqual([[a, 'wa'], [b, 'any']].sort());
    expect(place(q, [{ ...worker('wd', ['a.x']), namespaces: ['default'] }])).toEqual([[d, 'wd']]);
    // A worker the execution should avoid is still never one of another namespace.
    const q2 = new WaitingQueue();
    const c = waiting(q2, { namespace: 'team-b', avoid: ['wb'] });
    expect(place(q2, [onlyA, onlyB])).toEqual([[c, 'wb']]);
  });

  it('places by priority, then arrival, across actions and buckets', () => {
    const q = new WaitingQueue();
    const low = waiting(q, { action: 'a.x', priority: 0 });
    const high = waiting(q, { action: 'b.y', priority: 9 });
    const mid = waiting(q, { action: 'a.x', priority: 5 });
    const low2 = waiting(q, { action: 'b.y', priority: 0 });
    expect(place(q, [worker('w', ['a.x', 'b.y'])]).map(([id]) => id)).toEqual([high, mid, low, low2]);
  });

  it('gives a bucket no more than its free slots, and a full bucket holds back only its own', () => {
    const q = new WaitingQueue();
    const k1 = slotBucket('a.x', 'k1');
    const k2 = slotBucket('a.x', 'k2');
    const a = waiting(q, { bucket: k1 });
    const b = waiting(q, { bucket: k1 });
    const c = waiting(q, { bucket: k2 });
    const d = waiting(q, { bucket: k1 });
    expect(place(q, [worker('w', ['a.x'])], { limits: { [k1]: 1, [k2]: 5 } }).map(([id]) => id)).toEqual([a, c]);
    expect(place(q, [worker('w', ['a.x'])], { limits: { [k1]: 0 } }).map(([id]) => id)).toEqual([c]);
    expect(place(q, [worker('w', ['a.x'])], { limits: { [k1]: 3 } }).map(([id]) => id)).toEqual([a, b, c, d]);
  });

  it('fills no worker past its free capacity, least loaded first', () => {
    const q = new WaitingQueue();
    const ids = Array.from({ length: 6 }, () => waiting(q));
    const placed = place(q, [worker('busy', ['a.x'], 4), worker('idle', ['a.x'], 4)], { load: { busy: 3 } });
    expect(placed.map(([id]) => id)).toEqual(ids.slice(0, 5));
    const count = (w: string) => placed.filter(([, to]) => to === w).length;
    expect(count('busy')).toBe(1);
    expect(count('idle')).toBe(4);
    expect(placed[0]![1]).toBe('idle'); // least loaded first
  });

  it('sends work only to workers that offer its action', () => {
    const q = new WaitingQueue();
    const x = waiting(q, { action: 'a.x' });
    const y = waiting(q, { action: 'b.y' });
    expect(place(q, [worker('wx', ['a.x']), worker('wy', ['b.y'])])).toEqual([
      [x, 'wx'],
      [y, 'wy'],
    ]);
    expect(place(q, [worker('wx', ['a.x'])])).toEqual([[x, 'wx']]);
  });

  it('uses a worker the execution should avoid only when no other live worker offers the action', () => {
    const q = new WaitingQueue();
    const id = waiting(q, { avoid: ['flaky'] });
    expect(place(q, [worker('flaky', ['a.x']), worker('other', ['a.x'])])).toEqual([[id, 'other']]);
    expect(place(q, [worker('flaky', ['a.x']), worker('other', ['a.x'], 1)], { load: { other: 1 } })).toEqual([]); // other is full: wait for it
    expect(place(q, [worker('flaky', ['a.x'])])).toEqual([[id, 'flaky']]);
  });

  it('places a retry only once its time has come', () => {
    const q = new WaitingQueue();
    const id = waiting(q, { notBefore: 5_000 });
    expect(place(q, [worker('w', ['a.x'])], { now: 4_999 })).toEqual([]);
    expect(q.nextRetryAt(0)).toBe(5_000);
    expect(place(q, [worker('w', ['a.x'])], { now: 5_000 })).toEqual([[id, 'w']]);
  });

  it('leaves the queue as it was: a placed execution leaves it when its SchedulingStarted is applied', () => {
    const q = new WaitingQueue();
    const a = waiting(q);
    const b = waiting(q);
    expect(place(q, [worker('w', ['a.x'], 1)])).toEqual([[a, 'w']]);
    expect(place(q, [worker('w', ['a.x'], 2)])).toEqual([
      [a, 'w'],
      [b, 'w'],
    ]);
    q.remove(a);
    expect(place(q, [worker('w', ['a.x'], 1)])).toEqual([[b, 'w']]);
    expect(q.size).toBe(1);
  });

  it('costs what it places, not what waits: 20,000 waiting for an action no worker has room for are never visited', () => {
    const q = new WaitingQueue();
    for (let i = 0; i < 20_000; i++) waiting(q, { action: 'nobody.offers' });
    for (let i = 0; i < 20_000; i++) waiting(q, { action: 'busy.one' });
    const mine = Array.from({ length: 3 }, () => waiting(q, { action: 'a.x' }));
    let taken = 0;
    const take = q.take.bind(q);
    q.take = (bucket) => {
      taken++;
      return take(bucket);
    };
    const placed = place(q, [worker('w', ['a.x'], 5), worker('full', ['busy.one'], 4)], { load: { w: 2, full: 4 } });
    expect(placed.map(([id]) => id)).toEqual(mine);
    expect(taken).toBeLessThanOrEqual(10);
  });
});
