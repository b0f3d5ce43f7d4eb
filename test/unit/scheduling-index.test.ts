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
    expect(index.retryPending()[0]).toMatchObject({ executionId: id, reason: 'reclaimed: schedule-to-start' });
    expect(index.loadOf('w1')).toBe(0);
    expect(index.apply({ ...stored(id, 0, 'WorkerStarted'), streamId: 'worker-w1' })).toEqual({ unblocks: false, terminal: null });
  });
});
