// Placement with a rate-limit hint (PlanInput.admits, from src/executor/rate-limits.ts): an
// execution refused is skipped, the ones behind it in its bucket still go, the worker's room goes
// to what may run, and nothing refused leaves the queue.
import { describe, expect, it } from 'vitest';
import { slotBucket } from '../../src/executor/concurrency-slots.ts';
import { plan } from '../../src/executor/placement.ts';
import { WaitingQueue, type WaitingExecution } from '../../src/executor/waiting-queue.ts';

let seq = 0;
function waiting(queue: WaitingQueue, action: string): string {
  const w: WaitingExecution = { executionId: `e${++seq}`, action, priority: 0, seq, notBefore: 0, since: 0, avoid: [], bucket: slotBucket(action, null) };
  queue.add(w);
  return w.executionId;
}

describe('plan with admits', () => {
  it('skips refused executions and gives their room to the next that may run', () => {
    const q = new WaitingQueue();
    const limited = Array.from({ length: 5 }, () => waiting(q, 'mail.send'));
    const free = Array.from({ length: 3 }, () => waiting(q, 'core.noop'));
    const allowed = new Set([limited[3]]);
    const placed = plan({
      now: 0,
      queue: q,
      workers: [{ workerId: 'w', actions: ['mail.send', 'core.noop'], capacity: 4 }],
      loadOf: () => 0,
      freeSlots: () => Infinity,
      admits: (e) => e.action !== 'mail.send' || allowed.has(e.executionId),
    }).map((p) => p.execution.executionId);
    expect(placed).toEqual([limited[3], ...free]);
    expect(q.size).toBe(8); // placement never takes anything out of the queue
  });
});
