// A write transaction held open in ANOTHER database on the same server holds back the server-wide
// snapshot horizon. The executor's follower (src/runtime/follow-actors.ts, `stream` order) must
// still see new executions as they commit; a `global`-order follower (the projector's) must keep
// its gapless commit order: nothing past the horizon while that transaction is open, then every
// event, in order, once it ends.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXECUTION_STREAM_PREFIX, executionStreamId } from '../../schemas/events.ts';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';
import { catchUpAndFollow } from '../../src/eventstore/follow.ts';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { silentLogger } from '../../src/log.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { followActors } from '../../src/runtime/follow-actors.ts';
import { oldestUnapplied } from '../../src/readmodel/lag.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';
import { until as untilWithin } from '../support/until.ts';

const until = (what: string, check: () => boolean, ms = 10_000) => untilWithin(what, check, ms);


describe('followers while a write transaction is open in another database', () => {
  let db: TestDatabase;
  let other: TestDatabase;
  let submitterPool: pg.Pool;
  let followerStore: PostgresEventStore;
  let submitterStore: PostgresEventStore;
  beforeAll(async () => {
    db = await createTestDatabase();
    other = await createTestDatabase({ max: 2 });
    // The submitter is another process: its own pool and store (so its appends reach the
    // follower through the database, not through an in-process wake-up).
    submitterPool = new pg.Pool({ connectionString: db.url, max: 4 });
    followerStore = createPostgresEventStore(db.pool);
    submitterStore = createPostgresEventStore(submitterPool);
  });
  afterAll(async () => {
    await followerStore?.close();
    await submitterStore?.close();
    await submitterPool?.end();
    await other?.drop();
    await db?.drop();
  });

  it('the executor’s follower sees new executions at once; the projector’s order waits for the horizon, then delivers all in order', { timeout: 30_000 }, async () => {
    const log = silentLogger();
    const runtime = createExecutionRuntime(followerStore, { followsStore: true });
    const follower = followActors({ store: followerStore, runtimes: [runtime.actors], log, who: 'test executor' });
    const ac = new AbortController();
    const inOrder: StoredEvent[] = [];
    const projectorStyle = catchUpAndFollow(
      { store: followerStore, streamPrefixes: [EXECUTION_STREAM_PREFIX], signal: ac.signal, log, who: 'test projector', order: 'global' },
      { onEvent: (e) => void inOrder.push(e) },
    );
    const holder = await other.pool.connect();
    try {
      await follower.ready;
      await holder.query('BEGIN');
      await holder.query('SELECT pg_current_xact_id()'); // a write transaction: it has an id, so it holds the horizon
      const submitter = createExecutionRuntime(submitterStore);
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await submitter.submit({ action: 'core.noop', input: { i } })).executionId);

      await until('the executor-style follower to hold the three new executions', () => ids.every((id) => runtime.cached(id) !== undefined));
      const streams = new Set(ids.map(executionStreamId));
      // The projector's order cannot deliver past the other database's open transaction.
      expect(inOrder.filter((e) => streams.has(e.streamId))).toEqual([]);

      await holder.query('ROLLBACK');
      await until('the projector-style follower to deliver the three executions', () => inOrder.filter((e) => streams.has(e.streamId)).length >= 3);
      const delivered = inOrder.filter((e) => streams.has(e.streamId));
      expect(delivered.map((e) => e.streamId)).toEqual(ids.map(executionStreamId)); // submission (commit) order
      expect(delivered.map((e) => e.type)).toEqual(['ExecutionRequested', 'ExecutionRequested', 'ExecutionRequested']);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
      ac.abort();
      await projectorStyle;
      await follower.stop();
    }
  });

  it('a projection\'s lag counts what the horizon holds back: readAll delivers nothing, oldestUnapplied names the first event held', { timeout: 30_000 }, async () => {
    const [before] = (await followerStore.readAll({ after: 0n, limit: 1_000_000 })).slice(-1);
    const at = before?.globalPosition ?? 0n;
    const holder = await other.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_current_xact_id()');
      const { executionId } = await createExecutionRuntime(submitterStore).submit({ action: 'core.noop', input: null });
      expect(await followerStore.readAll({ after: at, limit: 10, streamPrefixes: [EXECUTION_STREAM_PREFIX] })).toEqual([]);
      const held = await oldestUnapplied(followerStore, at, [EXECUTION_STREAM_PREFIX]);
      const [stored] = await followerStore.readStream(executionStreamId(executionId));
      expect(held).toEqual(stored!.recordedAt);
      expect(await oldestUnapplied(followerStore, stored!.globalPosition, [EXECUTION_STREAM_PREFIX])).toBeUndefined();
      // A prefix none of the held events has: nothing to wait for there.
      expect(await oldestUnapplied(followerStore, at, ['schedule-'])).toBeUndefined();
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
    }
  });
});
