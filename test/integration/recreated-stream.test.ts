// An execution retention archived (its stream removed) and then submitted again under the same
// idempotency key starts a new stream under the same id. A host that saw the first one end must
// take the new one for new (src/runtime/snapshot-cache.ts, endedAt): it passed over its
// ExecutionRequested as the end it had already seen, and the execution was never scheduled until
// the executor restarted.
import pg from 'pg';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { statusOf } from '../../actors/execution.machine.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { followActors } from '../../src/runtime/follow-actors.ts';
import { until } from '../support/until.ts';
import { useTestStore } from '../support/test-store.ts';

describe('a stream removed and started again under the same id', () => {
  const t = useTestStore({ max: 6 });
  const closers: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const c of closers.reverse()) await c();
  });

  it('is news to a host that saw the first one end: it hears the new request', { timeout: 30_000 }, async () => {
    // The host (as the executor): its own runtime, fed by its follower.
    const host = createExecutionRuntime(t.store);
    const follower = followActors({ store: t.store, runtimes: [host.actors], log: pino({ level: 'silent' }), who: 'test host' });
    closers.push(() => follower.stop());
    await follower.ready;
    const heard: string[] = [];
    host.onChange((c) => heard.push(`${c.id}@${statusOf(c.after)}`));
    // Submissions come from another process: another pool and store.
    const otherPool = new pg.Pool({ connectionString: t.db.url, max: 2 });
    const other = createPostgresEventStore(otherPool);
    closers.push(async () => (await other.close(), await otherPool.end()));
    const submitter = createExecutionRuntime(other);

    const key = `archived-${Date.now()}`;
    const first = await submitter.submit({ action: 'core.noop', idempotencyKey: key });
    await until('the host to hear the request', () => heard.includes(`${first.executionId}@Requested`));
    // The host runs it to its end with appends of its own.
    await host.dispatch(first.executionId, { type: 'ExecutionCancelled', data: { reason: 'done with it' }, by: 'executor' });
    expect(host.cached(first.executionId)).toBeUndefined(); // final: out of the cache, its end remembered
    // Retention removes the stream; the same key then starts it again under the same id.
    await t.store.deleteStream(executionStreamId(first.executionId), { expectedRevision: 1n });
    heard.length = 0;
    const again = await submitter.submit({ action: 'core.noop', idempotencyKey: key });
    expect(again).toMatchObject({ executionId: first.executionId, created: true });
    await until('the host to hear the new request', () => heard.includes(`${first.executionId}@Requested`), 10_000, { detail: () => `heard: ${heard.join(', ') || 'nothing'}` });
    expect(host.cached(first.executionId)).toMatchObject({ revision: 0n });
  });
});
