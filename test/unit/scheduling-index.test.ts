import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SchedulingIndex, concurrencyKeyOf, slotBucket } from '../../src/executor/scheduling-index.ts';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';

let position = 0n;
const stored = (executionId: string, revision: number, type: string, data: Record<string, unknown> = {}): StoredEvent => ({
  eventId: randomUUID(),
  streamId: `execution-${executionId}`,
  revision: BigInt(revision),
  globalPosition: ++position,
  type,
  data,
  metadata: {},
  recordedAt: new Date(1_000),
});

function requested(index: SchedulingIndex, o: { priority?: number; maxAttempts?: number; action?: string; input?: unknown } = {}) {
  const id = randomUUID();
  index.apply(stored(id, 0, 'ExecutionRequested', { action: o.action ?? 'core.noop', input: o.input ?? null, maxAttempts: o.maxAttempts ?? 3, priority: o.priority }));
  return id;
}

describe('SchedulingIndex', () => {
  it('lists waiting executions by priority, then first come first served', () => {
    const index = new SchedulingIndex();
    const a = requested(index);
    const b = requested(index, { priority: 5 });
    const c = requested(index);
    expect(index.ready(0).map((w) => w.executionId)).toEqual([b, a, c]);
  });

  it('follows the attempt limit SchedulingStarted records, as the machine does', () => {
    const index = new SchedulingIndex();
    const lowered = requested(index, { maxAttempts: 3 });
    index.apply(stored(lowered, 1, 'SchedulingStarted', { maxAttempts: 1 }));
    index.apply(stored(lowered, 2, 'ExecutionHandedOff', { workerId: 'w1', attempt: 1, deadline: 'x' }));
    index.apply(stored(lowered, 3, 'ExecutionStarted', { attempt: 1 }));
    expect(index.apply(stored(lowered, 4, 'ExecutionFailed', { error: { message: 'boom' }, retryable: true })).terminal).toBe('Failed');
    const raised = requested(index, { maxAttempts: 1 });
    index.apply(stored(raised, 1, 'SchedulingStarted', { maxAttempts: 5 }));
    index.apply(stored(raised, 2, 'ExecutionHandedOff', { workerId: 'w1', attempt: 1, deadline: 'x' }));
    index.apply(stored(raised, 3, 'OwnershipReclaimed', { reason: 'worker-lost', workerId: 'w1', attempt: 1 }));
    expect(index.retryPending()).toEqual([expect.objectContaining({ executionId: raised, maxAttempts: 5, limitRecorded: true })]);
  });

  it('tracks a handoff, the worker’s load, and frees it when the execution ends', () => {
    const index = new SchedulingIndex();
    const id = requested(index);
    expect(index.apply(stored(id, 1, 'SchedulingStarted')).unblocks).toBe(false);
    index.apply(stored(id, 2, 'ExecutionHandedOff', { workerId: 'w1', attempt: 1, deadline: 'x' }));
    expect(index.ready(0)).toEqual([]);
    expect(index.loadOf('w1')).toBe(1);
    expect(index.handoffOf(id)).toMatchObject({ workerId: 'w1', attempt: 1, handoffRevision: 2n });
    index.apply(stored(id, 3, 'ExecutionStarted', { attempt: 1 }));
    expect(index.handoffOf(id)).toBeUndefined();
    expect(index.loadOf('w1')).toBe(1);
    const done = index.apply(stored(id, 4, 'ExecutionCompleted', { result: null }));
    expect(done).toEqual({ unblocks: true, terminal: 'Completed' });
    expect(index.loadOf('w1')).toBe(0);
  });

  it('turns a retryable failure with attempts left into a retry decision, and the last one into a terminal failure', () => {
    const index = new SchedulingIndex();
    const id = requested(index, { maxAttempts: 2 });
    index.apply(stored(id, 1, 'SchedulingStarted'));
    index.apply(stored(id, 2, 'ExecutionHandedOff', { workerId: 'w1', attempt: 1, deadline: 'x' }));
    index.apply(stored(id, 3, 'ExecutionStarted', { attempt: 1 }));
    expect(index.apply(stored(id, 4, 'ExecutionFailed', { error: { message: 'boom' }, retryable: true })).terminal).toBeNull();
    expect(index.retryPending()).toEqual([{ executionId: id, action: 'core.noop', attempt: 1, maxAttempts: 2, limitRecorded: false, reason: 'attempt 1 failed: boom' }]);
    index.apply(stored(id, 5, 'ExecutionRetryScheduled', { attempt: 2, retryAt: new Date(5_000).toISOString(), reason: 'r' }));
    expect(index.retryPending()).toEqual([]);
    expect(index.ready(4_999)).toEqual([]);
    expect(index.nextRetryAt(0)).toBe(5_000);
    expect(index.ready(5_000).map((w) => w.executionId)).toEqual([id]);
    index.apply(stored(id, 6, 'SchedulingStarted'));
    index.apply(stored(id, 7, 'ExecutionHandedOff', { workerId: 'w2', attempt: 2, deadline: 'x' }));
    index.apply(stored(id, 8, 'ExecutionStarted', { attempt: 2 }));
    expect(index.apply(stored(id, 9, 'ExecutionFailed', { error: { message: 'again' }, retryable: true })).terminal).toBe('Failed');
    expect(index.retryPending()).toEqual([]);
    expect(index.loadOf('w2')).toBe(0);
  });

  it('asks for a decision after a reclaim, and ignores other streams', () => {
    const index = new SchedulingIndex();
    const id = requested(index);
    index.apply(stored(id, 1, 'SchedulingStarted'));
    index.apply(stored(id, 2, 'ExecutionHandedOff', { workerId: 'w1', attempt: 1, deadline: 'x' }));
    index.apply(stored(id, 3, 'OwnershipReclaimed', { reason: 'schedule-to-start', workerId: 'w1', attempt: 1 }));
    expect(index.retryPending()[0]).toMatchObject({ executionId: id, reason: 'reclaimed: worker w1 did not start attempt 1 before its schedule-to-start deadline' });
    expect(index.loadOf('w1')).toBe(0);
    expect(index.apply({ ...stored(id, 0, 'SomethingElse'), streamId: 'other-w1' })).toEqual({ unblocks: false, terminal: null });
  });

  it('knows deadlines: expired handoffs, overdue runs, and what each worker holds', () => {
    const index = new SchedulingIndex();
    const a = requested(index);
    const b = requested(index);
    for (const [id, w] of [[a, 'w1'], [b, 'w1']] as const) {
      index.apply(stored(id, 1, 'SchedulingStarted'));
      index.apply(stored(id, 2, 'ExecutionHandedOff', { workerId: w, attempt: 1, deadline: new Date(1_000).toISOString() }));
    }
    index.apply(stored(b, 3, 'ExecutionStarted', { attempt: 1, deadline: new Date(5_000).toISOString() }));
    expect(index.expiredHandoffs(999)).toEqual([]);
    expect(index.expiredHandoffs(1_000).map((h) => h.executionId)).toEqual([a]);
    expect(index.overdueRuns(5_999, 1_000)).toEqual([]);
    expect(index.overdueRuns(6_000, 1_000)).toEqual([{ executionId: b, workerId: 'w1', attempt: 1, deadline: new Date(5_000).toISOString() }]);
    expect(index.heldBy('w1').map((x) => x.executionId).sort()).toEqual([a, b].sort());
    index.apply(stored(b, 4, 'ExecutionCompleted', { result: null }));
    expect(index.overdueRuns(10_000, 0)).toEqual([]);
    expect(index.heldBy('w1').map((x) => x.executionId)).toEqual([a]);
  });

  it('avoids the worker that let a handoff expire, when the retry waits again', () => {
    const index = new SchedulingIndex();
    const id = requested(index);
    index.apply(stored(id, 1, 'SchedulingStarted'));
    index.apply(stored(id, 2, 'ExecutionHandedOff', { workerId: 'w1', attempt: 1, deadline: 'x' }));
    index.apply(stored(id, 3, 'OwnershipReclaimed', { reason: 'schedule-to-start', workerId: 'w1', attempt: 1 }));
    index.apply(stored(id, 4, 'ExecutionRetryScheduled', { attempt: 2, retryAt: new Date(0).toISOString(), reason: 'r' }));
    expect(index.ready(1)[0]).toMatchObject({ executionId: id, avoid: ['w1'] });
  });

  it('follows worker streams: lifecycle status and advertised action policies', () => {
    const index = new SchedulingIndex();
    const policy = { retry: { maxAttempts: 5, initialIntervalMs: 10, multiplier: 2, maxIntervalMs: 100 }, scheduleToStartTimeoutMs: 500 };
    const started = { ...stored('x', 0, 'WorkerStarted', { actions: ['a.b'], runtimes: ['node'], capacity: 1, policies: { 'a.b': policy } }), streamId: 'worker-w1' };
    expect(index.apply(started)).toEqual({ unblocks: true, terminal: null });
    expect(index.workerStatus('w1')).toBe('active');
    expect(index.policyOf('a.b')).toEqual(policy);
    index.apply({ ...stored('x', 1, 'WorkerLost', { lastHeartbeatAt: new Date(0).toISOString(), reason: 'r' }), streamId: 'worker-w1' });
    expect(index.workerStatus('w1')).toBe('lost');
    expect(index.workerStatus('w2')).toBeUndefined();
  });

  it('hands out, once, what a worker id held when a new process announced itself, but not what that process started since', () => {
    const index = new SchedulingIndex();
    let workerRevision = 0;
    const announce = () => index.apply({ ...stored('x', workerRevision++, 'WorkerStarted', { actions: ['core.noop'], runtimes: ['node'], capacity: 4 }), streamId: 'worker-w1' });
    const handOff = (id: string) => {
      index.apply(stored(id, 1, 'SchedulingStarted'));
      index.apply(stored(id, 2, 'ExecutionHandedOff', { workerId: 'w1', attempt: 1, deadline: 'x' }));
    };
    announce();
    const [running, handed, later, done] = [requested(index), requested(index), requested(index), requested(index)];
    for (const id of [running, handed, later, done]) handOff(id);
    index.apply(stored(running, 3, 'ExecutionStarted', { attempt: 1 }));
    index.apply(stored(done, 3, 'ExecutionStarted', { attempt: 1 }));
    index.apply(stored(done, 4, 'ExecutionCompleted', { result: null }));
    expect(index.takeOrphans(), 'a first start leaves nothing behind').toEqual([]);

    announce(); // the process died unannounced; a new one took the id
    index.apply(stored(later, 3, 'ExecutionStarted', { attempt: 1 })); // the new process picked this one up
    const orphans = index.takeOrphans();
    expect(orphans.map((o) => o.executionId).sort()).toEqual([running, handed].sort());
    expect(orphans[0]).toMatchObject({ workerId: 'w1', attempt: 1, announcedAt: expect.any(BigInt) });
    expect(index.takeOrphans(), 'handed out once').toEqual([]);
  });

  it('lists the cancel requests on executions a worker holds, and forgets them once the baton leaves it', () => {
    const index = new SchedulingIndex();
    const ids = Array.from({ length: 4 }, () => requested(index));
    for (const id of ids) {
      index.apply(stored(id, 1, 'SchedulingStarted'));
      index.apply(stored(id, 2, 'ExecutionHandedOff', { workerId: 'w1', attempt: 1, deadline: 'x' }));
    }
    const [held, running, reclaimed] = ids as [string, string, string, string]; // the fourth: held, no cancel request
    index.apply(stored(running, 3, 'ExecutionStarted', { attempt: 1 }));
    for (const id of [held, running, reclaimed]) index.apply(stored(id, 4, 'ExecutionCancelRequested', { reason: `stop ${id}` }));
    index.apply(stored(reclaimed, 5, 'OwnershipReclaimed', { reason: 'worker-lost', workerId: 'w1', attempt: 1 }));
    const listed = () => index.cancelRequestsHeld().map((r) => r.executionId).sort();
    expect(listed()).toEqual([held, running].sort());
    expect(index.cancelRequestsHeld().find((r) => r.executionId === running)).toEqual({ executionId: running, workerId: 'w1', attempt: 1, reason: `stop ${running}` });
    expect(index.retryPending().find((d) => d.executionId === reclaimed)?.cancelRequested).toBe(`stop ${reclaimed}`);
    index.apply(stored(running, 5, 'ExecutionCancelled', { reason: 'r' }));
    expect(listed()).toEqual([held]);
  });
});

describe('SchedulingIndex: concurrency limits and priorities', () => {
  /** A worker announcing `actions`, with a concurrency policy for some. */
  const workerStarted = (index: SchedulingIndex, workerId: string, actions: string[], concurrency: Record<string, { limit: number; key?: string }> = {}) =>
    index.apply({
      ...stored('x', 0, 'WorkerStarted', {
        actions,
        runtimes: ['node'],
        capacity: 100,
        policies: Object.fromEntries(Object.entries(concurrency).map(([a, c]) => [a, { concurrency: c }])),
      }),
      streamId: `worker-${workerId}`,
    });

  /** Stream revisions per execution, so each helper appends the next one. */
  const revisions = new Map<string, number>();
  const next = (index: SchedulingIndex, id: string, type: string, data: Record<string, unknown> = {}) => {
    const revision = (revisions.get(id) ?? 0) + 1;
    revisions.set(id, revision);
    return index.apply(stored(id, revision, type, data));
  };
  const schedule = (index: SchedulingIndex, id: string, workerId = 'w1', attempt = 1) => {
    next(index, id, 'SchedulingStarted');
    next(index, id, 'ExecutionHandedOff', { workerId, attempt, deadline: new Date(60_000).toISOString() });
  };
  const run = (index: SchedulingIndex, id: string, attempt = 1) => {
    schedule(index, id, 'w1', attempt);
    next(index, id, 'ExecutionStarted', { attempt });
  };
  const readyIds = (index: SchedulingIndex, now = 0) => index.ready(now).map((w) => w.executionId);
  const held = (index: SchedulingIndex, action: string) => index.actionGauges().get(action)?.held ?? 0;

  it('offers at most `limit` executions of an action at once, in FIFO order, and the next when a slot frees', () => {
    const index = new SchedulingIndex();
    workerStarted(index, 'w1', ['t.lim'], { 't.lim': { limit: 2 } });
    const ids = Array.from({ length: 4 }, () => requested(index, { action: 't.lim' }));
    expect(readyIds(index)).toEqual([ids[0], ids[1]]);
    run(index, ids[0]!);
    expect(readyIds(index)).toEqual([ids[1]]);
    schedule(index, ids[1]!);
    expect(readyIds(index)).toEqual([]);
    expect(index.actionGauges().get('t.lim')).toEqual({ waiting: 2, atLimit: 2, held: 2, limit: 2 });
    next(index, ids[0]!, 'ExecutionCompleted', { result: null });
    expect(readyIds(index)).toEqual([ids[2]]);
    expect(index.actionGauges().get('t.lim')).toEqual({ waiting: 2, atLimit: 0, held: 1, limit: 2 });
  });

  it('limits per key: FIFO within a key, other keys run in parallel, inputs without the key share one bucket', () => {
    const index = new SchedulingIndex();
    workerStarted(index, 'w1', ['t.key'], { 't.key': { limit: 1, key: 'tenant.id' } });
    const req = (input: unknown) => requested(index, { action: 't.key', input });
    const a1 = req({ tenant: { id: 'a' } });
    const a2 = req({ tenant: { id: 'a' } });
    const b1 = req({ tenant: { id: 'b' } });
    const none1 = req({ other: 1 });
    const none2 = req(null);
    const nullId = req({ tenant: { id: null } });
    expect(readyIds(index)).toEqual([a1, b1, none1]);
    expect(index.ready(0).find((w) => w.executionId === a1)!.bucket).toBe(slotBucket('t.key', 'a'));
    run(index, a1!);
    run(index, none1!);
    expect(readyIds(index)).toEqual([b1]);
    next(index, a1!, 'ExecutionCompleted', { result: null });
    expect(readyIds(index)).toEqual([a2, b1]);
    next(index, none1!, 'ExecutionCompleted', { result: null });
    expect(readyIds(index)).toEqual([a2, b1, none2]);
    schedule(index, none2!);
    next(index, none2!, 'ExecutionCancelled', { reason: 'r' });
    expect(readyIds(index)).toEqual([a2, b1, nullId]);
  });

  // Each way an execution can give its slot back, with what follows it in a real history.
  const endings: [string, (index: SchedulingIndex, id: string) => void, ((index: SchedulingIndex, id: string) => void) | null][] = [
    ['completed', (i, id) => next(i, id, 'ExecutionCompleted', { result: null }), null],
    ['failed (final)', (i, id) => next(i, id, 'ExecutionFailed', { error: { message: 'no' }, retryable: false }), null],
    ['cancelled', (i, id) => next(i, id, 'ExecutionCancelled', { reason: 'r' }), null],
    ['timed out', (i, id) => next(i, id, 'ExecutionTimedOut', { limit: 'start-to-close', deadline: new Date(0).toISOString() }), null],
    ['abandoned', (i, id) => next(i, id, 'ExecutionAbandoned', { reason: 'r' }), null],
    ['abandoned (dead letter)', (i, id) => { next(i, id, 'OwnershipReclaimed', { reason: 'dead-letter', workerId: 'w1', attempt: 1 }); next(i, id, 'ExecutionAbandoned', { reason: 'r' }); }, null],
    ['reclaimed', (i, id) => next(i, id, 'OwnershipReclaimed', { reason: 'worker-lost', workerId: 'w1', attempt: 1 }), (i, id) => next(i, id, 'ExecutionAbandoned', { reason: 'gave up' })],
    ['released', (i, id) => next(i, id, 'OwnershipReleased', { reason: 'draining', attempt: 1 }), (i, id) => next(i, id, 'ExecutionAbandoned', { reason: 'gave up' })],
    ['failed (retryable)', (i, id) => next(i, id, 'ExecutionFailed', { error: { message: 'flaky' }, retryable: true }), (i, id) => next(i, id, 'ExecutionAbandoned', { reason: 'gave up' })],
  ];

  it.each(endings)('releases the slot exactly once when the execution is %s', (_, end, after) => {
    const index = new SchedulingIndex();
    workerStarted(index, 'w1', ['t.one'], { 't.one': { limit: 1 } });
    const x = requested(index, { action: 't.one', maxAttempts: 3 });
    const y = requested(index, { action: 't.one' });
    run(index, x);
    expect(readyIds(index)).toEqual([]);
    expect(held(index, 't.one')).toBe(1);
    end(index, x);
    expect(held(index, 't.one')).toBe(0);
    expect(readyIds(index)).toEqual([y]);
    run(index, y); // y takes the freed slot
    expect(held(index, 't.one')).toBe(1);
    // What follows for x (its final event after a return, or a replayed final event) frees nothing more.
    if (after) after(index, x);
    else end(index, x);
    expect(held(index, 't.one')).toBe(1);
    expect(index.freeSlots('t.one', slotBucket('t.one', null))).toBe(0);
  });

  it('queues a retry again: it takes a new slot only when scheduled again, keeping its place in line', () => {
    const index = new SchedulingIndex();
    workerStarted(index, 'w1', ['t.one'], { 't.one': { limit: 1 } });
    const x = requested(index, { action: 't.one', maxAttempts: 3 });
    const y = requested(index, { action: 't.one' });
    const z = requested(index, { action: 't.one' });
    run(index, x);
    next(index, x, 'ExecutionFailed', { error: { message: 'flaky' }, retryable: true });
    expect(readyIds(index)).toEqual([y]); // the retry is not waiting yet: its decision is pending
    next(index, x, 'ExecutionRetryScheduled', { attempt: 2, retryAt: new Date(0).toISOString(), reason: 'r' });
    expect(readyIds(index)).toEqual([x]); // older than y and z: first in line again
    expect(index.ready(0).length).toBe(1);
    run(index, x, 2);
    expect(held(index, 't.one')).toBe(1);
    next(index, x, 'ExecutionCompleted', { result: null });
    expect(readyIds(index)).toEqual([y]);
    run(index, y);
    next(index, y, 'ExecutionCompleted', { result: null });
    expect(readyIds(index)).toEqual([z]);
  });

  it('counts a slot the executor just took once, whether its own note or the event comes first', () => {
    const index = new SchedulingIndex();
    workerStarted(index, 'w1', ['t.lim'], { 't.lim': { limit: 2 } });
    const [a, b, c] = [requested(index, { action: 't.lim' }), requested(index, { action: 't.lim' }), requested(index, { action: 't.lim' })];
    index.scheduling(a!, 1n); // appended SchedulingStarted at revision 1; the event has not come back yet
    expect(held(index, 't.lim')).toBe(1);
    expect(readyIds(index)).toEqual([b]);
    schedule(index, a!); // the events arrive: nothing counted twice
    expect(held(index, 't.lim')).toBe(1);
    schedule(index, b!);
    index.scheduling(b!, 1n); // the note after the event: nothing more
    expect(held(index, 't.lim')).toBe(2);
    next(index, a!, 'ExecutionCompleted', { result: null });
    expect(readyIds(index)).toEqual([c]);
    // A late note, after the index has already seen that attempt returned and queued again, changes nothing.
    next(index, b!, 'OwnershipReclaimed', { reason: 'worker-lost', workerId: 'w1', attempt: 1 });
    next(index, b!, 'ExecutionRetryScheduled', { attempt: 2, retryAt: new Date(0).toISOString(), reason: 'r' });
    index.scheduling(b!, 1n);
    expect(held(index, 't.lim')).toBe(0);
    expect(readyIds(index)).toEqual([b, c]);
  });

  it('computes keys once a policy is learned after the executions were requested', () => {
    const index = new SchedulingIndex();
    const req = (tenantId?: string) => requested(index, { action: 't.late', input: tenantId ? { tenantId } : {} });
    const a1 = req('a');
    const a2 = req('a');
    const a3 = req('a');
    const b1 = req('b');
    const none = req();
    expect(readyIds(index)).toEqual([a1, a2, a3, b1, none]); // no policy known: nothing limits them
    schedule(index, a1!); // (an executor that saw a worker before its policy) — it holds a slot
    workerStarted(index, 'w1', ['t.late'], { 't.late': { limit: 1, key: 'tenantId' } });
    expect(readyIds(index)).toEqual([b1, none]); // a1 holds tenant a's only slot
    expect(index.actionGauges().get('t.late')).toMatchObject({ waiting: 4, atLimit: 2, held: 1, limit: 1 });
    next(index, a1!, 'ExecutionCompleted', { result: null });
    expect(readyIds(index)).toEqual([a2, b1, none]);
    // Requests after the policy are keyed at once.
    const b2 = req('b');
    schedule(index, b1!);
    expect(readyIds(index)).toEqual([a2, none]);
    expect(b2).toBeDefined();
  });

  it('takes the latest advertised policy: a limit can be raised or removed', () => {
    const index = new SchedulingIndex();
    workerStarted(index, 'w1', ['t.lim'], { 't.lim': { limit: 1 } });
    const ids = Array.from({ length: 3 }, () => requested(index, { action: 't.lim' }));
    expect(readyIds(index)).toEqual([ids[0]]);
    workerStarted(index, 'w2', ['t.lim'], { 't.lim': { limit: 2 } });
    expect(readyIds(index)).toEqual([ids[0], ids[1]]);
    workerStarted(index, 'w3', ['t.lim']);
    expect(index.concurrencyLimitOf('t.lim')).toBeUndefined();
    expect(readyIds(index)).toEqual(ids);
  });

  it('orders by priority, then arrival; a blocked high-priority bucket does not hold back a free lower-priority one', () => {
    const index = new SchedulingIndex();
    workerStarted(index, 'w1', ['t.hot', 't.cold'], { 't.hot': { limit: 1 } });
    const low1 = requested(index, { action: 't.cold', priority: 0 });
    const hot1 = requested(index, { action: 't.hot', priority: 10 });
    const hot2 = requested(index, { action: 't.hot', priority: 10 });
    const low2 = requested(index, { action: 't.cold', priority: 0 });
    const mid = requested(index, { action: 't.cold', priority: 5 });
    const neg = requested(index, { action: 't.cold', priority: -3 });
    expect(readyIds(index)).toEqual([hot1, mid, low1, low2, neg]);
    run(index, hot1!);
    expect(readyIds(index)).toEqual([mid, low1, low2, neg]); // hot2 waits for hot's slot, the rest go
    next(index, hot1!, 'ExecutionCompleted', { result: null });
    expect(readyIds(index)[0]).toBe(hot2);
  });
});

describe('concurrencyKeyOf', () => {
  it('reads a dotted path; missing or null is the shared null key; non-strings are their JSON; long values are digested', () => {
    expect(concurrencyKeyOf(undefined, { tenantId: 'a' })).toBeNull();
    expect(concurrencyKeyOf('tenantId', { tenantId: 'a' })).toBe('a');
    expect(concurrencyKeyOf('customer.id', { customer: { id: 42 } })).toBe('42');
    expect(concurrencyKeyOf('customer.id', { customer: { id: '42' } })).toBe('42');
    expect(concurrencyKeyOf('items.0.sku', { items: [{ sku: 'x' }] })).toBe('x');
    expect(concurrencyKeyOf('flag', { flag: false })).toBe('false');
    expect(concurrencyKeyOf('o', { o: { b: 1 } })).toBe('{"b":1}');
    for (const input of [null, 'str', 7, {}, { customer: null }, { customer: 'x' }, { customer: { id: null } }]) {
      expect(concurrencyKeyOf('customer.id', input)).toBeNull();
    }
    expect(concurrencyKeyOf('toString', {})).toBeNull(); // own properties only
    const long = concurrencyKeyOf('k', { k: 'x'.repeat(1_000) })!;
    expect(long).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(concurrencyKeyOf('k', { k: 'x'.repeat(1_000) })).toBe(long);
  });
});
