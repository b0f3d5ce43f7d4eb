// The executor's scheduling view (src/executor/scheduling-view.ts), fed as the executor feeds it:
// stored events folded by the actor runtimes, their changes applied. What waits, in which order,
// what holds a slot, what must be retried, what a worker holds: all read from the machine's state.
import { describe, expect, it } from 'vitest';
import { concurrencyKeyOf, slotBucket } from '../../src/executor/concurrency-slots.ts';
import { ev } from '../support/execution-paths.ts';
import { schedulingHarness, workerStarted } from '../support/scheduling-harness.ts';
import type { WorkerEvent } from '../../schemas/worker-events.ts';

const lost = (workerId: string): WorkerEvent =>
  ({ type: 'WorkerLost', data: { lastHeartbeatAt: new Date(0).toISOString(), reason: 'r' }, metadata: { by: 'executor', occurredAt: new Date(0).toISOString() } }) as WorkerEvent;

describe('SchedulingView', () => {
  it('lists waiting executions by priority, then first come first served', async () => {
    const h = schedulingHarness();
    const a = await h.requested();
    const b = await h.requested({ priority: 5 });
    const c = await h.requested();
    expect(h.ready().map((w) => w.executionId)).toEqual([b, a, c]);
  });

  it('follows the attempt limit SchedulingStarted records, as the machine does', async () => {
    const h = schedulingHarness();
    const lowered = await h.requested({ maxAttempts: 3 });
    await h.next(lowered, ev.schedulingStarted({ maxAttempts: 1 }));
    await h.next(lowered, ev.handedOff('w1', 1));
    await h.next(lowered, ev.started('w1', 1));
    expect((await h.next(lowered, ev.failed('w1', true))).terminal).toBe('Failed');
    const raised = await h.requested({ maxAttempts: 5 });
    await h.next(raised, ev.schedulingStarted({ maxAttempts: 5 }));
    await h.next(raised, ev.handedOff('w1', 1));
    await h.next(raised, ev.started('w1', 1));
    await h.next(raised, ev.reclaimed('w1', 1, 'worker-lost'));
    expect(h.view.retryPending()).toEqual([expect.objectContaining({ executionId: raised, maxAttempts: 5, limitRecorded: true })]);
  });

  it('tracks a handoff, the worker’s load, and frees it when the execution ends', async () => {
    const h = schedulingHarness();
    const id = await h.requested();
    expect((await h.next(id, ev.schedulingStarted())).unblocks).toBe(false);
    await h.next(id, ev.handedOff('w1', 1));
    expect(h.ready()).toEqual([]);
    expect(h.view.loadOf('w1')).toBe(1);
    expect(h.view.handoffOf(id)).toMatchObject({ workerId: 'w1', attempt: 1, handoffRevision: 2n });
    await h.next(id, ev.started('w1', 1));
    expect(h.view.handoffOf(id)).toBeUndefined();
    expect(h.view.loadOf('w1')).toBe(1);
    const done = await h.next(id, ev.completed('w1'));
    expect({ unblocks: done.unblocks, terminal: done.terminal }).toEqual({ unblocks: true, terminal: 'Completed' });
    expect(h.view.loadOf('w1')).toBe(0);
  });

  it('turns a retryable failure with attempts left into a retry decision, and the last one into a terminal failure', async () => {
    const h = schedulingHarness();
    const id = await h.requested({ maxAttempts: 2 });
    await h.next(id, ev.schedulingStarted());
    await h.next(id, ev.handedOff('w1', 1));
    await h.next(id, ev.started('w1', 1));
    expect((await h.next(id, ev.failed('w1', true, { message: 'boom' }))).terminal).toBeNull();
    expect(h.view.retryPending()).toEqual([{ executionId: id, action: 'core.noop', attempt: 1, maxAttempts: 2, limitRecorded: false, reason: 'attempt 1 failed: boom' }]);
    await h.next(id, ev.retryScheduled(2, { retryAt: new Date(5_000).toISOString() }));
    expect(h.view.retryPending()).toEqual([]);
    expect(h.ready(4_999)).toEqual([]);
    expect(h.view.nextRetryAt(0)).toBe(5_000);
    expect(h.ready(5_000).map((w) => w.executionId)).toEqual([id]);
    await h.next(id, ev.schedulingStarted());
    await h.next(id, ev.handedOff('w2', 2));
    await h.next(id, ev.started('w2', 2));
    expect((await h.next(id, ev.failed('w2', true, { message: 'again' }))).terminal).toBe('Failed');
    expect(h.view.retryPending()).toEqual([]);
    expect(h.view.loadOf('w2')).toBe(0);
  });

  it('asks for a decision after a reclaim, once, until another executor’s decision arrives', async () => {
    const h = schedulingHarness();
    const id = await h.requested();
    await h.next(id, ev.schedulingStarted());
    await h.next(id, ev.handedOff('w1', 1));
    await h.next(id, ev.started('w1', 1));
    await h.next(id, ev.reclaimed('w1', 1, 'worker-lost'));
    expect(h.view.retryPending()[0]).toMatchObject({ executionId: id, reason: expect.stringMatching(/^reclaimed: worker w1 /) });
    expect(h.view.loadOf('w1')).toBe(0);
    h.view.decided(id); // our append lost: another executor decided
    expect(h.view.retryPending()).toEqual([]);
    await h.next(id, ev.retryScheduled(2));
    expect(h.view.retryPending()).toEqual([]);
    expect(h.view.waitingCount()).toBe(1);
  });

  it('knows deadlines: expired handoffs, overdue runs, and what each worker holds', async () => {
    const h = schedulingHarness();
    const a = await h.requested();
    const b = await h.requested();
    for (const id of [a, b]) {
      await h.next(id, ev.schedulingStarted());
      await h.next(id, ev.handedOff('w1', 1, { deadline: new Date(1_000).toISOString() }));
    }
    await h.next(b, ev.started('w1', 1, { deadline: new Date(5_000).toISOString() }));
    expect(h.view.expiredHandoffs(999)).toEqual([]);
    expect(h.view.expiredHandoffs(1_000).map((x) => x.executionId)).toEqual([a]);
    expect(h.view.overdueRuns(5_999, 1_000)).toEqual([]);
    expect(h.view.overdueRuns(6_000, 1_000)).toEqual([{ executionId: b, workerId: 'w1', attempt: 1, deadline: new Date(5_000).toISOString() }]);
    expect(h.view.heldBy('w1').map((x) => x.executionId).sort()).toEqual([a, b].sort());
    await h.next(b, ev.completed('w1'));
    expect(h.view.overdueRuns(10_000, 0)).toEqual([]);
    expect(h.view.heldBy('w1').map((x) => x.executionId)).toEqual([a]);
  });

  it('a return past the 3 that keep an attempt asks for a decision whose reason says the attempt never started', async () => {
    const h = schedulingHarness();
    const id = await h.requested();
    for (const w of ['w1', 'w2', 'w3']) {
      await h.next(id, ev.handedOff(w, 1));
      await h.next(id, ev.reclaimed(w, 1, 'worker-restarted'));
      expect(h.view.retryPending()).toEqual([]);
    }
    await h.next(id, ev.handedOff('w1', 1));
    await h.next(id, ev.reclaimed('w1', 1, 'worker-restarted'));
    expect(h.view.retryPending()[0]!.reason).toMatch(/^reclaimed: worker w1 restarted while it held attempt 1 .* before it started \(the execution had used its 3 returns that keep an attempt\)$/);
  });

  it('avoids the worker that let a handoff expire, when the retry waits again', async () => {
    const h = schedulingHarness();
    const id = await h.requested();
    await h.next(id, ev.schedulingStarted());
    await h.next(id, ev.handedOff('w1', 1));
    await h.next(id, ev.reclaimed('w1', 1, 'schedule-to-start'));
    await h.next(id, ev.retryScheduled(2, { retryAt: new Date(0).toISOString() }));
    expect(h.ready(1)[0]).toMatchObject({ executionId: id, avoid: ['w1'] });
  });

  it('waits again at once, at the same attempt, when its worker was lost before it started (machine v8: no retry to decide)', async () => {
    const h = schedulingHarness();
    const id = await h.requested();
    await h.next(id, ev.handedOff('w1', 1));
    expect((await h.next(id, ev.reclaimed('w1', 1, 'worker-lost'))).unblocks).toBe(true);
    expect(h.view.retryPending()).toEqual([]);
    expect(h.view.loadOf('w1')).toBe(0);
    expect(h.ready(1)[0]).toMatchObject({ executionId: id });
    await h.next(id, ev.handedOff('w2', 1));
    expect(h.view.handoffOf(id)).toMatchObject({ workerId: 'w2', attempt: 1 });
  });

  it('follows worker streams: lifecycle status and advertised action policies', async () => {
    const h = schedulingHarness();
    const policy = { retry: { maxAttempts: 5, initialIntervalMs: 10, multiplier: 2, maxIntervalMs: 100 }, scheduleToStartTimeoutMs: 500 };
    expect((await h.worker('w1', workerStarted('w1', ['a.b'], { 'a.b': policy }))).unblocks).toBe(true);
    expect(h.view.workerStatus('w1')).toBe('active');
    expect(h.view.policyOf('a.b')).toEqual(policy);
    await h.worker('w1', lost('w1'));
    expect(h.view.workerStatus('w1')).toBe('lost');
    expect(h.view.workerStatus('w2')).toBeUndefined();
  });

  it('hands out, once, what a worker id held when a new process announced itself, but not what that process started since', async () => {
    const h = schedulingHarness();
    const announce = () => h.worker('w1', workerStarted('w1', ['core.noop'], {}, 4));
    const handOff = async (id: string) => {
      await h.next(id, ev.schedulingStarted());
      await h.next(id, ev.handedOff('w1', 1));
    };
    await announce();
    const [running, handed, later, done] = [await h.requested(), await h.requested(), await h.requested(), await h.requested()];
    for (const id of [running, handed, later, done]) await handOff(id);
    await h.next(running, ev.started('w1', 1));
    await h.next(done, ev.started('w1', 1));
    await h.next(done, ev.completed('w1'));
    expect(h.view.takeOrphans(), 'a first start leaves nothing behind').toEqual([]);

    await announce(); // the process died unannounced; a new one took the id
    await h.next(later, ev.started('w1', 1)); // the new process picked this one up
    const orphans = h.view.takeOrphans();
    expect(orphans.map((o) => o.executionId).sort()).toEqual([running, handed].sort());
    expect(orphans[0]).toMatchObject({ workerId: 'w1', attempt: 1 });
    expect(h.view.takeOrphans(), 'handed out once').toEqual([]);
  });

  it('lists the cancel requests on executions a worker holds, and forgets them once the baton leaves it', async () => {
    const h = schedulingHarness();
    const ids = [await h.requested(), await h.requested(), await h.requested(), await h.requested()];
    for (const id of ids) {
      await h.next(id, ev.schedulingStarted());
      await h.next(id, ev.handedOff('w1', 1));
    }
    const [held, running, reclaimed] = ids as [string, string, string, string]; // the fourth: held, no cancel request
    await h.next(running, ev.started('w1', 1));
    for (const id of [held, running, reclaimed]) await h.next(id, ev.cancelRequested(`stop ${id}`));
    await h.next(reclaimed, ev.reclaimed('w1', 1, 'worker-lost'));
    const listed = () => h.view.cancelRequestsHeld().map((r) => r.executionId).sort();
    expect(listed()).toEqual([held, running].sort());
    expect(h.view.cancelRequestsHeld().find((r) => r.executionId === running)).toEqual({ executionId: running, workerId: 'w1', attempt: 1, reason: `stop ${running}` });
    expect(h.view.retryPending().find((d) => d.executionId === reclaimed)?.cancelRequested).toBe(`stop ${reclaimed}`);
    await h.next(running, ev.cancelled('w1'));
    expect(listed()).toEqual([held]);
  });
});

describe('SchedulingView: concurrency limits and priorities', () => {
  /** A worker announcing `actions`, with a concurrency policy for some. */
  const announce = (h: ReturnType<typeof schedulingHarness>, workerId: string, actions: string[], concurrency: Record<string, { limit: number; key?: string }> = {}) =>
    h.worker(workerId, workerStarted(workerId, actions, Object.fromEntries(Object.entries(concurrency).map(([a, c]) => [a, { concurrency: c }]))));
  const schedule = async (h: ReturnType<typeof schedulingHarness>, id: string, attempt = 1) => {
    await h.next(id, ev.schedulingStarted());
    await h.next(id, ev.handedOff('w1', attempt, { deadline: new Date(60_000).toISOString() }));
  };
  const run = async (h: ReturnType<typeof schedulingHarness>, id: string, attempt = 1) => {
    await schedule(h, id, attempt);
    await h.next(id, ev.started('w1', attempt));
  };
  const readyIds = (h: ReturnType<typeof schedulingHarness>, now = 0) => h.ready(now).map((w) => w.executionId);
  const held = (h: ReturnType<typeof schedulingHarness>, action: string) => h.view.actionGauges().get(action)?.held ?? 0;

  it('offers at most `limit` executions of an action at once, in FIFO order, and the next when a slot frees', async () => {
    const h = schedulingHarness();
    await announce(h, 'w1', ['t.lim'], { 't.lim': { limit: 2 } });
    const ids = [];
    for (let i = 0; i < 4; i++) ids.push(await h.requested({ action: 't.lim' }));
    expect(readyIds(h)).toEqual([ids[0], ids[1]]);
    await run(h, ids[0]!);
    expect(readyIds(h)).toEqual([ids[1]]);
    await schedule(h, ids[1]!);
    expect(readyIds(h)).toEqual([]);
    expect(h.view.actionGauges().get('t.lim')).toEqual({ waiting: 2, atLimit: 2, held: 2, limit: 2 });
    await h.next(ids[0]!, ev.completed('w1'));
    expect(readyIds(h)).toEqual([ids[2]]);
    expect(h.view.actionGauges().get('t.lim')).toEqual({ waiting: 2, atLimit: 0, held: 1, limit: 2 });
  });

  it('limits per key: FIFO within a key, other keys run in parallel, inputs without the key share one bucket', async () => {
    const h = schedulingHarness();
    await announce(h, 'w1', ['t.key'], { 't.key': { limit: 1, key: 'tenant.id' } });
    const req = (input: unknown) => h.requested({ action: 't.key', input });
    const a1 = await req({ tenant: { id: 'a' } });
    const a2 = await req({ tenant: { id: 'a' } });
    const b1 = await req({ tenant: { id: 'b' } });
    const none1 = await req({ other: 1 });
    const none2 = await req(null);
    const nullId = await req({ tenant: { id: null } });
    expect(readyIds(h)).toEqual([a1, b1, none1]);
    expect(h.ready().find((w) => w.executionId === a1)!.bucket).toBe(slotBucket('t.key', 'a'));
    await run(h, a1);
    await run(h, none1);
    expect(readyIds(h)).toEqual([b1]);
    await h.next(a1, ev.completed('w1'));
    expect(readyIds(h)).toEqual([a2, b1]);
    await h.next(none1, ev.completed('w1'));
    expect(readyIds(h)).toEqual([a2, b1, none2]);
    await schedule(h, none2);
    await h.next(none2, ev.cancelled('w1'));
    expect(readyIds(h)).toEqual([a2, b1, nullId]);
  });

  // Each way an execution can give its slot back, with what follows it in a real history.
  type H = ReturnType<typeof schedulingHarness>;
  const endings: [string, (h: H, id: string) => Promise<unknown>, ((h: H, id: string) => Promise<unknown>) | null][] = [
    ['completed', (h, id) => h.next(id, ev.completed('w1')), null],
    ['failed (final)', (h, id) => h.next(id, ev.failed('w1', false)), null],
    ['cancelled', (h, id) => h.next(id, ev.cancelled('w1')), null],
    ['timed out', (h, id) => h.next(id, ev.timedOut('w1')), null],
    ['abandoned (dead letter)', async (h, id) => { await h.next(id, ev.reclaimed('w1', 1, 'dead-letter')); await h.next(id, ev.abandoned()); }, null],
    ['reclaimed', (h, id) => h.next(id, ev.reclaimed('w1', 1, 'worker-lost')), (h, id) => h.next(id, ev.abandoned('gave up'))],
    ['released', (h, id) => h.next(id, ev.released('w1')), (h, id) => h.next(id, ev.abandoned('gave up'))],
    ['failed (retryable)', (h, id) => h.next(id, ev.failed('w1', true, { message: 'flaky' })), (h, id) => h.next(id, ev.abandoned('gave up'))],
  ];

  it.each(endings)('releases the slot exactly once when the execution is %s', async (_, end, after) => {
    const h = schedulingHarness();
    await announce(h, 'w1', ['t.one'], { 't.one': { limit: 1 } });
    const x = await h.requested({ action: 't.one', maxAttempts: 3 });
    const y = await h.requested({ action: 't.one' });
    await run(h, x);
    expect(readyIds(h)).toEqual([]);
    expect(held(h, 't.one')).toBe(1);
    const last = (await end(h, x)) as { stored: { revision: bigint; type: string } } | undefined;
    expect(held(h, 't.one')).toBe(0);
    expect(readyIds(h)).toEqual([y]);
    await run(h, y); // y takes the freed slot
    expect(held(h, 't.one')).toBe(1);
    // What follows for x (its final event after a return, or its final event delivered again) frees nothing more.
    if (after) await after(h, x);
    else if (last) await h.again(x, ev.completed('w1'), Number(last.stored.revision));
    expect(held(h, 't.one')).toBe(1);
    expect(h.view.freeSlots('t.one', slotBucket('t.one', null))).toBe(0);
  });

  it('queues a retry again: it takes a new slot only when scheduled again, keeping its place in line', async () => {
    const h = schedulingHarness();
    await announce(h, 'w1', ['t.one'], { 't.one': { limit: 1 } });
    const x = await h.requested({ action: 't.one', maxAttempts: 3 });
    const y = await h.requested({ action: 't.one' });
    const z = await h.requested({ action: 't.one' });
    await run(h, x);
    await h.next(x, ev.failed('w1', true, { message: 'flaky' }));
    expect(readyIds(h)).toEqual([y]); // the retry is not waiting yet: its decision is pending
    await h.next(x, ev.retryScheduled(2, { retryAt: new Date(0).toISOString() }));
    expect(readyIds(h)).toEqual([x]); // older than y and z: first in line again
    expect(h.ready().length).toBe(1);
    await run(h, x, 2);
    expect(held(h, 't.one')).toBe(1);
    await h.next(x, ev.completed('w1'));
    expect(readyIds(h)).toEqual([y]);
    await run(h, y);
    await h.next(y, ev.completed('w1'));
    expect(readyIds(h)).toEqual([z]);
  });

  it('counts a slot once when the same event reaches it twice (an own append, then the subscription)', async () => {
    const h = schedulingHarness();
    await announce(h, 'w1', ['t.lim'], { 't.lim': { limit: 2 } });
    const [a, b, c] = [await h.requested({ action: 't.lim' }), await h.requested({ action: 't.lim' }), await h.requested({ action: 't.lim' })];
    await h.next(a, ev.schedulingStarted());
    expect(held(h, 't.lim')).toBe(1);
    expect(readyIds(h)).toEqual([b]);
    await h.again(a, ev.schedulingStarted(), 1); // the same revision again: nothing counted twice
    expect(held(h, 't.lim')).toBe(1);
    await schedule(h, b);
    await h.again(b, ev.schedulingStarted(), 1);
    expect(held(h, 't.lim')).toBe(2);
    await h.next(a, ev.handedOff('w1', 1));
    await h.next(a, ev.started('w1', 1));
    await h.next(a, ev.completed('w1'));
    expect(readyIds(h)).toEqual([c]);
    // A late duplicate, after the view has seen that attempt returned and queued again, changes nothing.
    await h.next(b, ev.reclaimed('w1', 1, 'worker-lost')); // unstarted: it waits again at once
    await h.again(b, ev.schedulingStarted(), 1);
    expect(held(h, 't.lim')).toBe(0);
    expect(readyIds(h)).toEqual([b, c]);
  });

  it('computes keys once a policy is learned after the executions were requested', async () => {
    const h = schedulingHarness();
    const req = (tenantId?: string) => h.requested({ action: 't.late', input: tenantId ? { tenantId } : {} });
    const a1 = await req('a');
    const a2 = await req('a');
    const a3 = await req('a');
    const b1 = await req('b');
    const none = await req();
    expect(readyIds(h)).toEqual([a1, a2, a3, b1, none]); // no policy known: nothing limits them
    await schedule(h, a1); // (an executor that saw a worker before its policy) — it holds a slot
    await announce(h, 'w1', ['t.late'], { 't.late': { limit: 1, key: 'tenantId' } });
    expect(readyIds(h)).toEqual([b1, none]); // a1 holds tenant a's only slot
    expect(h.view.actionGauges().get('t.late')).toMatchObject({ waiting: 4, atLimit: 2, held: 1, limit: 1 });
    await h.next(a1, ev.started('w1', 1));
    await h.next(a1, ev.completed('w1'));
    expect(readyIds(h)).toEqual([a2, b1, none]);
    // Requests after the policy are keyed at once.
    const b2 = await req('b');
    await schedule(h, b1);
    expect(readyIds(h)).toEqual([a2, none]);
    expect(b2).toBeDefined();
  });

  it('takes the latest advertised policy: a limit can be raised or removed', async () => {
    const h = schedulingHarness();
    await announce(h, 'w1', ['t.lim'], { 't.lim': { limit: 1 } });
    const ids = [await h.requested({ action: 't.lim' }), await h.requested({ action: 't.lim' }), await h.requested({ action: 't.lim' })];
    expect(readyIds(h)).toEqual([ids[0]]);
    await announce(h, 'w2', ['t.lim'], { 't.lim': { limit: 2 } });
    expect(readyIds(h)).toEqual([ids[0], ids[1]]);
    await announce(h, 'w3', ['t.lim']);
    expect(h.view.concurrencyLimitOf('t.lim')).toBeUndefined();
    expect(readyIds(h)).toEqual(ids);
  });

  it('orders by priority, then arrival; a blocked high-priority bucket does not hold back a free lower-priority one', async () => {
    const h = schedulingHarness();
    await announce(h, 'w1', ['t.hot', 't.cold'], { 't.hot': { limit: 1 } });
    const low1 = await h.requested({ action: 't.cold', priority: 0 });
    const hot1 = await h.requested({ action: 't.hot', priority: 10 });
    const hot2 = await h.requested({ action: 't.hot', priority: 10 });
    const low2 = await h.requested({ action: 't.cold', priority: 0 });
    const mid = await h.requested({ action: 't.cold', priority: 5 });
    const neg = await h.requested({ action: 't.cold', priority: -3 });
    expect(readyIds(h)).toEqual([hot1, mid, low1, low2, neg]);
    await run(h, hot1);
    expect(readyIds(h)).toEqual([mid, low1, low2, neg]); // hot2 waits for hot's slot, the rest go
    await h.next(hot1, ev.completed('w1'));
    expect(readyIds(h)[0]).toBe(hot2);
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
