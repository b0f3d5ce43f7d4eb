// Retention with the events in EventStoreDB (here the adapter on its in-memory model of the
// server) and the read model in Postgres: the stream goes with the server's hard delete, after
// the read model's part committed; a crash between the two is finished by the next run.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { EventStoreDBClient } from '@eventstore/db-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { createEventStoreDbEventStore, type EventStoreDbEventStore } from '../../src/eventstore/eventstoredb.ts';
import { createPostgresSnapshotStore } from '../../src/eventstore/snapshots.ts';
import { catchUpReadModel } from '../../src/readmodel/group-follow.ts';
import { verifyReadModel } from '../../src/readmodel/verify.ts';
import { runRetention } from '../../src/retention/retention.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { FakeEventStoreDb } from '../support/fake-eventstoredb.ts';
import { createTestDatabase } from '../support/test-db.ts';

describe('retention with EventStoreDB', () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let fake: FakeEventStoreDb;
  let store: EventStoreDbEventStore;
  let archiveDir: string;
  beforeAll(async () => {
    db = await createTestDatabase({ max: 6 });
    fake = new FakeEventStoreDb();
    store = createEventStoreDbEventStore(fake as unknown as EventStoreDBClient, { snapshots: createPostgresSnapshotStore(db.pool) });
    archiveDir = await mkdtemp(path.join(os.tmpdir(), 'baton-archive-esdb-'));
  });
  afterAll(async () => {
    await store.close();
    await db.drop();
    await rm(archiveDir, { recursive: true, force: true });
  });

  it('tombstones archived streams, finishing after a crash between the read model and the server', async () => {
    const runtime = createExecutionRuntime(store);
    const run = async (worker: string, finish: boolean) => {
      const { executionId } = await runtime.submit({ action: 'core.noop', input: null });
      await runtime.dispatch(executionId, [
        { type: 'SchedulingStarted', data: {}, by: 'executor' },
        { type: 'ExecutionHandedOff', data: { workerId: worker, attempt: 1, deadline: new Date(Date.now() + 600_000).toISOString() }, by: 'executor' },
      ]);
      await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: `worker:${worker}` });
      if (finish) await runtime.dispatch(executionId, { type: 'ExecutionCompleted', data: { result: 1 }, by: `worker:${worker}` });
      return executionId;
    };
    const done = await run('w1', true);
    const inFlight = await run('w1', false);
    await catchUpReadModel({ pool: db.pool, store });
    const later = () => new Date(Date.now() + 3_600_000);

    // The "crash": the server is unreachable when the stream is to be deleted.
    const tombstone = fake.tombstoneStream.bind(fake);
    fake.tombstoneStream = () => Promise.reject(Object.assign(new Error('14 UNAVAILABLE'), { type: 'unavailable' }));
    await expect(runRetention({ pool: db.pool, store, olderThanMs: 60_000, archiveDir, now: later })).rejects.toThrow(/UNAVAILABLE/);
    const pending = await db.pool.query('SELECT pending_delete FROM baton_archived_streams WHERE stream_id = $1', [executionStreamId(done)]);
    expect(pending.rows).toEqual([{ pending_delete: true }]);
    expect((await db.pool.query('SELECT 1 FROM baton_read.executions WHERE execution_id = $1', [done])).rowCount).toBe(0);
    expect(await store.readStream(executionStreamId(done))).toHaveLength(5);

    fake.tombstoneStream = tombstone;
    const s = await runRetention({ pool: db.pool, store, olderThanMs: 60_000, archiveDir, now: later });
    expect(s.executions).toBe(0); // nothing new: the pending one was finished first
    expect(await store.readStream(executionStreamId(done))).toEqual([]);
    expect((await db.pool.query('SELECT pending_delete FROM baton_archived_streams WHERE stream_id = $1', [executionStreamId(done)])).rows).toEqual([{ pending_delete: false }]);
    expect(s.skipped.map((k) => k.id)).not.toContain(inFlight);
    expect(await store.readStream(executionStreamId(inFlight))).toHaveLength(4);
    // Its events are still in $all (no scavenge here), yet a rebuild leaves them out: the read
    // model still equals one.
    expect((await store.readAll({ after: 0n, limit: 1_000 })).some((e) => e.streamId === executionStreamId(done))).toBe(true);
    const verified = await verifyReadModel({ pool: db.pool, store });
    expect(verified.ok, JSON.stringify(verified.differences)).toBe(true);
    // The id is gone for good: the server refuses to write it again.
    await expect(store.append(executionStreamId(done), [{ eventId: crypto.randomUUID(), type: 'X', data: {}, metadata: {} }], { expectedRevision: 'no_stream' })).rejects.toThrow();
  });
});
