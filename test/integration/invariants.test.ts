// The invariant checker against the Postgres event store and read model: histories made by the
// runtime pass; a terminal event written behind the runtime's back, a submitted id that never
// made it, and a read-model row the events do not produce are each reported.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { checkInvariants, describeReport } from '../../src/verify/invariants.ts';
import { catchUpFully } from '../support/read-model.ts';
import { useTestDatabase } from '../support/test-db.ts';

describe('invariant checker on Postgres', () => {
  const db = useTestDatabase({ max: 4 });
  let store: PostgresEventStore;
  let runtime: ExecutionRuntime;
  const ids = { completed: '', retried: '', running: '', keyed: '' };

  async function handOffAndStart(id: string, worker: string, attempt: number) {
    await runtime.dispatch(id, [
      { type: 'SchedulingStarted', data: {}, by: 'executor' },
      { type: 'ExecutionHandedOff', data: { workerId: worker, attempt, deadline: new Date(Date.now() + 30_000).toISOString() }, by: 'executor' },
    ]);
    await runtime.dispatch(id, { type: 'ExecutionStarted', data: { attempt }, by: `worker:${worker}` });
  }

  beforeAll(async () => {
    store = createPostgresEventStore(db().pool);
    runtime = createExecutionRuntime(store);
    ids.completed = (await runtime.submit({ action: 'core.noop' })).executionId;
    await handOffAndStart(ids.completed, 'w1', 1);
    await runtime.dispatch(ids.completed, { type: 'ExecutionCompleted', data: { result: 1 }, by: 'worker:w1' });

    ids.retried = (await runtime.submit({ action: 'core.noop', maxAttempts: 2 })).executionId;
    await handOffAndStart(ids.retried, 'w1', 1);
    await runtime.dispatch(ids.retried, { type: 'ExecutionFailed', data: { error: { message: 'flaky' }, retryable: true }, by: 'worker:w1' });
    await runtime.dispatch(ids.retried, { type: 'ExecutionRetryScheduled', data: { attempt: 2, retryAt: new Date().toISOString(), reason: 'flaky' }, by: 'executor' });
    await handOffAndStart(ids.retried, 'w2', 2);
    await runtime.dispatch(ids.retried, { type: 'ExecutionCompleted', data: { result: 2 }, by: 'worker:w2' });

    ids.running = (await runtime.submit({ action: 'core.sleep', input: { ms: 1 } })).executionId;
    await handOffAndStart(ids.running, 'w2', 1);

    ids.keyed = (await runtime.submit({ action: 'core.noop', idempotencyKey: `k-${randomUUID()}` })).executionId;
    await runtime.dispatch(ids.keyed, { type: 'ExecutionCancelled', data: { reason: 'test' }, by: 'executor' });
  });
  afterAll(async () => {
    await store?.close();
  });

  it('passes histories the runtime wrote, the read model included; a running one is in flight, or stuck when all must be final', async () => {
    await catchUpFully(db().pool, store);
    const expected = Object.values(ids);
    const r = await checkInvariants(store, { expectedExecutionIds: expected, pool: db().pool });
    expect(r.ok, describeReport(r)).toBe(true);
    expect(r).toMatchObject({ executions: 4, terminal: 3, inFlight: 1, stuck: [], lost: [], duplicatedRuns: 0, violations: [] });
    expect(r.readModel?.ok).toBe(true);

    const strict = await checkInvariants(store, { expectedExecutionIds: expected, requireTerminal: true });
    expect(strict).toMatchObject({ ok: false, stuck: [ids.running], violations: [] });
  });

  it('reports a submitted id with no stream as lost', async () => {
    const missing = randomUUID();
    const r = await checkInvariants(store, { expectedExecutionIds: [...Object.values(ids), missing] });
    expect(r).toMatchObject({ ok: false, lost: [missing], executions: 4 });
  });

  it('reports a read-model row the events do not produce (invariant 5)', async () => {
    await db().pool.query(`UPDATE baton_read.action_stats SET completed = completed + 1 WHERE action = 'core.noop'`);
    try {
      const r = await checkInvariants(store, { pool: db().pool });
      expect(r.ok).toBe(false);
      expect(r.violations).toEqual([{ invariant: 5, executionId: null, message: expect.stringContaining('executions.action_stats: 1 differing') }]);
    } finally {
      await db().pool.query(`UPDATE baton_read.action_stats SET completed = completed - 1 WHERE action = 'core.noop'`);
    }
  });

  it('reports a second terminal event written behind the runtime (invariant 2)', async () => {
    // What a fencing bug would leave: the same worker's outcome appended again, past the CAS.
    const [last] = (await store.readStream(executionStreamId(ids.completed))).slice(-1);
    await db().pool.query(
      `INSERT INTO baton_events (event_id, stream_id, revision, type, data, metadata) VALUES ($1, $2, $3, $4, $5, $6)`,
      [randomUUID(), last!.streamId, String(last!.revision + 1n), last!.type, JSON.stringify(last!.data), JSON.stringify(last!.metadata)],
    );
    const r = await checkInvariants(store, { expectedExecutionIds: Object.values(ids) });
    expect(r.ok).toBe(false);
    expect(r.violations).toEqual([{ invariant: 2, executionId: ids.completed, message: expect.stringMatching(/^2 terminal events/) }]);
  });
});
