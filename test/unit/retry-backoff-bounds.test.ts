// Retry backoff stays inside MAX_RETRY_INTERVAL_MS at every door that takes one (defineAction,
// a worker's WorkerStarted announcement), stored announcements from before the bound still read,
// and the executor's delay computation never leaves the Date range, whatever the policy says.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { foldWorker, statusOf } from '../../actors/worker.machine.ts';
import { MAX_RETRY_INTERVAL_MS, WorkerEvent, WorkerStarted, backoffDelayMs, type ActionPolicy } from '../../schemas/worker-events.ts';
import { InvalidActionDefinitionError, defineAction, retryDelayMs } from '../../src/actions/action.ts';
import { MAX_TIMER_MS } from '../../src/async/sleep.ts';
import { retryCommand, retryDelay } from '../../src/executor/retry-policy.ts';
import type { RetryDecision } from '../../src/executor/scheduling-entries.ts';
import { workerKind } from '../../src/runtime/worker-kind.ts';

const minimal = { name: 'qa.huge-backoff', input: z.any(), run: () => null };
const refusal = (f: () => unknown): string => {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidActionDefinitionError);
    return (err as Error).message;
  }
  throw new Error('expected a refusal');
};

describe('retry backoff bounds', () => {
  it('is the longest Node timer', () => {
    expect(MAX_RETRY_INTERVAL_MS).toBe(MAX_TIMER_MS);
  });

  it('defineAction refuses a backoff past the bound, naming the field', () => {
    expect(refusal(() => defineAction({ ...minimal, retry: { maxAttempts: 1000, maxIntervalMs: Number.MAX_SAFE_INTEGER } }))).toBe(
      'invalid action definition "qa.huge-backoff": retry.maxIntervalMs: must be at most 2147483647 ms (about 24.8 days), the longest wait between attempts',
    );
    const both = refusal(() => defineAction({ ...minimal, retry: { maxAttempts: 3, initialIntervalMs: 9e15, maxIntervalMs: 9e15 } }));
    expect(both).toMatch(/retry\.initialIntervalMs: must be at most 2147483647 ms/);
    expect(both).toMatch(/retry\.maxIntervalMs: must be at most 2147483647 ms/);
    // The bound itself is fine, and a first delay that long raises the default cap to it.
    const longest = defineAction({ ...minimal, retry: { maxAttempts: 3, initialIntervalMs: MAX_RETRY_INTERVAL_MS } });
    expect(longest.retry).toMatchObject({ initialIntervalMs: MAX_RETRY_INTERVAL_MS, maxIntervalMs: MAX_RETRY_INTERVAL_MS });
  });

  it('a new WorkerStarted announcing a backoff past the bound is refused; a stored one still folds and reads', () => {
    const huge: ActionPolicy = { runtime: 'node', retry: { maxAttempts: 3, initialIntervalMs: 9e15, multiplier: 2, maxIntervalMs: 9e15 } };
    const started = { type: 'WorkerStarted', data: { actions: ['qa.huge-backoff'], runtimes: ['node'], capacity: 1, policies: { 'qa.huge-backoff': huge } }, metadata: { by: 'worker:w1', occurredAt: new Date().toISOString() } };
    const r = WorkerStarted.safeParse(started);
    expect(r.success).toBe(false);
    expect(r.error!.issues.map((i) => i.path.join('.'))).toEqual(['data.policies.qa.huge-backoff.retry.initialIntervalMs', 'data.policies.qa.huge-backoff.retry.maxIntervalMs']);
    // Stored before the bound: read back as stored (the runtime does not re-check history) and folded.
    const stored = workerKind.read({ type: started.type, data: started.data, metadata: started.metadata } as never);
    expect(statusOf(foldWorker('w1', [stored as WorkerEvent]))).toBe('Active');
  });

  it('computes delays inside the bound for any attempt and any numbers', () => {
    const noCap = { maxAttempts: 1000, initialIntervalMs: 1_000, multiplier: 2, maxIntervalMs: Number.MAX_SAFE_INTEGER };
    expect(retryDelayMs(noCap, 2)).toBe(1_000);
    expect(retryDelayMs(noCap, 45)).toBe(MAX_RETRY_INTERVAL_MS);
    expect(retryDelayMs(noCap, 1000)).toBe(MAX_RETRY_INTERVAL_MS);
    // 0 × Infinity is NaN; a stored policy missing a field gives undefined: the cap, not NaN.
    expect(backoffDelayMs(0, 1e300, 60_000, 5)).toBe(60_000);
    expect(backoffDelayMs(1_000, 2, undefined as unknown as number, 3)).toBe(4_000);
    expect(backoffDelayMs(Number.NaN, 2, 60_000, 3)).toBe(60_000);
  });

  it('retryCommand gives a valid retryAt at huge attempt numbers, under stored unbounded policies', () => {
    const now = Date.parse('2030-01-01T00:00:00.000Z');
    const decision = (attempt: number): RetryDecision => ({ executionId: 'e1', action: 'qa.huge-backoff', attempt, maxAttempts: 100_000, limitRecorded: true, reason: 'fail once' });
    const policies: ActionPolicy[] = [
      { retry: { maxAttempts: 1000, initialIntervalMs: 9e15, multiplier: 2, maxIntervalMs: 9e15 } },
      { retry: { maxAttempts: 1000, initialIntervalMs: 1_000, multiplier: 2, maxIntervalMs: Number.MAX_SAFE_INTEGER } },
      { retry: { maxAttempts: 1000, initialIntervalMs: 0, multiplier: 1e300, maxIntervalMs: 9e15 } },
    ];
    for (const policy of policies) {
      for (const attempt of [1, 44, 45, 999, 99_999]) {
        const c = retryCommand(decision(attempt), policy, now);
        expect(c.type).toBe('ExecutionRetryScheduled');
        const retryAt = Date.parse((c.data as { retryAt: string }).retryAt);
        expect(retryAt - now).toBeGreaterThanOrEqual(0);
        expect(retryAt - now).toBeLessThanOrEqual(MAX_RETRY_INTERVAL_MS);
        expect(retryDelay(policy, attempt)).toBe(retryAt - now);
      }
    }
  });
});
