import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SchedulingIndex } from '../../src/executor/scheduling-index.ts';
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

function requested(index: SchedulingIndex, o: { priority?: number; maxAttempts?: number; action?: string } = {}) {
  const id = randomUUID();
  index.apply(stored(id, 0, 'ExecutionRequested', { action: o.action ?? 'core.noop', input: null, maxAttempts: o.maxAttempts ?? 3, priority: o.priority }));
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
    expect(index.retryPending()).toEqual([{ executionId: id, action: 'core.noop', attempt: 1, maxAttempts: 2, reason: 'attempt 1 failed: boom' }]);
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
});
