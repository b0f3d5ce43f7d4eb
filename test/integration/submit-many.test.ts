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

  it('a default-namespace key spelled like another namespace\'s execution id is an execution of its own (event ids never clash)', async () => {
    const other = await runtime.submit({ action: 'core.noop', namespace: 'team-a', idempotencyKey: `k-${randomUUID()}` });
    // Before, the default namespace derived ExecutionRequested's id from the key text and other
    // namespaces from the execution id: this key took team-a's event id and its append failed.
    const single = await runtime.submit({ action: 'core.echo', input: 1, idempotencyKey: other.executionId });
    expect(single).toMatchObject({ created: true });
    expect(single.executionId).not.toBe(other.executionId);
    const batch = await runtime.submitMany([{ action: 'core.noop' }, { action: 'core.echo', input: 2, idempotencyKey: other.executionId, namespace: 'team-b' }, { action: 'core.noop' }]);
    expect(batch.map((o) => ok(o).created)).toEqual([true, true, true]);
    expect(await runtime.submit({ action: 'core.echo', input: 1, idempotencyKey: other.executionId })).toMatchObject({ executionId: single.executionId, created: false });
  });

  it('an unkeyed request the store stored although its answer was lost (the store retried it) is reported created, once', async () => {
    // What a lost connection does to appendMany: the statement committed, the answer never came,
    // and the store's retry of the same events finds them stored (an idempotent replay).
    const store = t.store;
    const answerLost = { ...store, appendMany: async (requests: Parameters<typeof store.appendMany>[0]) => (await store.appendMany(requests), store.appendMany(requests)), append: async (...a: Parameters<typeof store.append>) => (await store.append(...a), store.append(...a)) };
    const lossy = createExecutionRuntime(answerLost as typeof store);
    const outcomes = await lossy.submitMany([{ action: 'core.noop' }, { action: 'core.echo', input: 1 }]);
    expect(outcomes.map((o) => ok(o).created)).toEqual([true, true]);
    expect(await lossy.submit({ action: 'core.noop' })).toMatchObject({ created: true, revision: 0n });
    for (const o of outcomes) expect(await t.store.readStream(executionStreamId(ok(o).executionId))).toHaveLength(1);
  });

  it('an empty batch writes nothing', async () => {
    expect(await runtime.submitMany([])).toEqual([]);
  });
});
