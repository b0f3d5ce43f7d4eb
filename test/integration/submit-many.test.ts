// The runtime's submitMany against the real Postgres store: one appendMany for the batch, each
// request with its own outcome, idempotency keys inside a batch and across batches (the
// library's own callers get a conflicting repeat as that item's outcome, not a refused batch).
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { statusOf } from '../../actors/execution.machine.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { IdempotencyKeyConflictError } from '../../src/errors.ts';
import { createExecutionRuntime, type ExecutionRuntime, type SubmitOutcome } from '../../src/runtime/execution-runtime.ts';
import { useTestStore } from '../support/test-store.ts';

const ok = (o: SubmitOutcome) => {
  if (!o.ok) throw o.error;
  return o.result;
};

describe('submitMany', () => {
  const t = useTestStore({ max: 20 });
  let runtime: ExecutionRuntime;
  beforeAll(async () => {
    runtime = createExecutionRuntime(t.store);
  });

  it('creates every request with one appendMany, in order, as submit would', async () => {
    const appendMany = vi.spyOn(t.store, 'appendMany');
    const outcomes = await runtime.submitMany(Array.from({ length: 300 }, (_, i) => ({ action: 'core.echo', input: { i }, tags: { n: String(i % 7) } })));
    expect(appendMany).toHaveBeenCalledTimes(1);
    appendMany.mockRestore();
    expect(outcomes).toHaveLength(300);
    const results = outcomes.map(ok);
    expect(new Set(results.map((r) => r.executionId)).size).toBe(300);
    for (const [i, r] of results.entries()) {
      expect(r).toMatchObject({ created: true, revision: 0n });
      expect(statusOf(r.snapshot)).toBe('Requested');
      expect(r.snapshot.context).toMatchObject({ input: { i }, tags: { n: String(i % 7) }, maxAttempts: 3 });
    }
    const loaded = await runtime.load(results[299]!.executionId, { fresh: true });
    expect(loaded.snapshot.context).toEqual(results[299]!.snapshot.context);
  });

  it('keys: a repeat in the batch answers the first; a conflicting repeat is refused alone; a later batch finds them', async () => {
    const key = `k-${randomUUID()}`;
    const outcomes = await runtime.submitMany([
      { action: 'core.echo', input: { n: 1 }, idempotencyKey: key },
      { action: 'core.echo', input: { n: 1 }, idempotencyKey: key },
      { action: 'core.echo', input: { n: 2 }, idempotencyKey: key },
      { action: 'core.noop' },
    ]);
    const first = ok(outcomes[0]!);
    expect(first.created).toBe(true);
    expect(ok(outcomes[1]!)).toMatchObject({ executionId: first.executionId, created: false });
    expect(outcomes[2]).toMatchObject({ ok: false, error: expect.any(IdempotencyKeyConflictError) });
    expect((outcomes[2] as { error: Error }).error.message).toMatch(/differs in input from the batch's item 0/);
    expect(ok(outcomes[3]!).created).toBe(true);
    expect(await t.store.readStream(executionStreamId(first.executionId))).toHaveLength(1);

    const later = await runtime.submitMany([{ action: 'core.echo', input: { n: 1 }, idempotencyKey: key }, { action: 'core.echo', input: { n: 3 }, idempotencyKey: key }]);
    expect(ok(later[0]!)).toMatchObject({ executionId: first.executionId, created: false, revision: 0n });
    expect(later[1]).toMatchObject({ ok: false, error: expect.any(IdempotencyKeyConflictError) });
    // And the single submit agrees with the batch's ids.
    expect(await runtime.submit({ action: 'core.echo', input: { n: 1 }, idempotencyKey: key })).toMatchObject({ executionId: first.executionId, created: false });
  });

  it('a request the event catalog refuses rejects the batch before anything is written', async () => {
    const before = (await t.db.pool.query('SELECT count(*)::int AS n FROM baton_events')).rows[0].n;
    await expect(runtime.submitMany([{ action: 'core.noop' }, { action: 'core.noop', tags: { 'bad key': 'x' } }])).rejects.toThrow(/data\.tags\.bad key/);
    await expect(runtime.submitMany([{ action: 'core.noop' }, { action: '' }])).rejects.toThrow(/data\.action/);
    expect((await t.db.pool.query('SELECT count(*)::int AS n FROM baton_events')).rows[0].n).toBe(before);
  });

  it('an empty batch writes nothing', async () => {
    expect(await runtime.submitMany([])).toEqual([]);
  });
});
