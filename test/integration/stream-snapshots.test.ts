// Snapshots of long streams (src/runtime/stream-snapshots.ts) against the real Postgres store: a
// load folds from the stored snapshot and gives exactly what the whole stream folds to; a
// snapshot of another machine version or of another stream is ignored and rebuilt; a retried
// command stored before the snapshot is still recognised; time-travel still reads everything.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MACHINE_VERSION, foldExecution, persistExecution, statusOf } from '../../actors/execution.machine.ts';
import { executionStreamId } from '../../schemas/events.ts';
import type { NewEvent } from '../../src/eventstore/event-store.ts';
import type { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { asExecutionEvent } from '../../src/replay/history.ts';
import { executionTimeline } from '../../src/replay/execution-history.ts';
import { useTestStore } from '../support/test-store.ts';

const EVERY = 100;
const meta = (by: string) => ({ by, occurredAt: new Date().toISOString(), machineVersion: MACHINE_VERSION });

/** A running execution with `count` events (progress reports after the start). */
async function longExecution(store: PostgresEventStore, count: number): Promise<{ id: string; events: NewEvent[] }> {
  const id = randomUUID();
  const events: NewEvent[] = [
    { eventId: randomUUID(), type: 'ExecutionRequested', data: { action: 'core.noop', input: null, maxAttempts: 1 }, metadata: meta('executor') },
    { eventId: randomUUID(), type: 'SchedulingStarted', data: {}, metadata: meta('executor') },
    { eventId: randomUUID(), type: 'ExecutionHandedOff', data: { workerId: 'w1', attempt: 1, deadline: new Date(Date.now() + 600_000).toISOString() }, metadata: meta('executor') },
    { eventId: randomUUID(), type: 'ExecutionStarted', data: { attempt: 1 }, metadata: meta('worker:w1') },
    ...Array.from({ length: count - 4 }, (_, i) => ({ eventId: randomUUID(), type: 'ExecutionProgressed', data: { details: { step: i } }, metadata: meta('worker:w1') })),
  ];
  await store.append(executionStreamId(id), events, { expectedRevision: 'no_stream' });
  return { id, events };
}

const plain = (s: { value: unknown; context: unknown; status: unknown }) => JSON.parse(JSON.stringify({ value: s.value, context: s.context, status: s.status })) as unknown;

describe('snapshots of long streams', () => {
  const t = useTestStore({ max: 6 });

  async function storedSnapshot(id: string, revision: bigint, eventId?: string, version = MACHINE_VERSION) {
    for (let i = 0; i < 200; i++) {
      const s = await t.store.snapshots!.read(executionStreamId(id));
      if (s && s.revision >= revision && (eventId === undefined || s.eventId === eventId) && s.machineVersion === version) return s;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`no snapshot of ${id} at ${revision}`);
  }

  it('writes a snapshot after folding a long stream, and the next load folds only what came after it', async () => {
    const { id } = await longExecution(t.store, 350);
    const runtime = createExecutionRuntime(t.store, { snapshotEvery: EVERY });
    await runtime.load(id); // folds 350 events: queues a snapshot
    const snap = await storedSnapshot(id, 349n);
    expect(snap.machineVersion).toBe(MACHINE_VERSION);
    await t.store.append(executionStreamId(id), [{ eventId: randomUUID(), type: 'ExecutionProgressed', data: { details: { step: 'after' } }, metadata: meta('worker:w1') }], { expectedRevision: 349n });
    const again = await createExecutionRuntime(t.store).load(id);
    expect(again.events!.map((e) => e.revision)).toEqual([349n, 350n]); // the snapshot's event and the one after
    expect(again.revision).toBe(350n);
    const wholeNow = await createExecutionRuntime(t.store).load(id, { whole: true });
    expect(plain(again.snapshot)).toEqual(plain(wholeNow.snapshot));
    // Deciding from it works like deciding from the whole fold.
    const done = await createExecutionRuntime(t.store).dispatch(id, { type: 'ExecutionCompleted', data: { result: 'ok' }, by: 'worker:w1' });
    expect(statusOf(done.snapshot)).toBe('Completed');
  });

  it('queues a snapshot from its own appends each time the stream crosses a multiple of the interval', async () => {
    const runtime = createExecutionRuntime(t.store);
    const { executionId: id } = await runtime.submit({ action: 'core.noop', input: null });
    await runtime.dispatch(id, [
      { type: 'SchedulingStarted', data: {}, by: 'executor' },
      { type: 'ExecutionHandedOff', data: { workerId: 'w1', attempt: 1, deadline: new Date(Date.now() + 600_000).toISOString() }, by: 'executor' },
    ]);
    const worker = createExecutionRuntime(t.store, { snapshotEvery: EVERY });
    await worker.dispatch(id, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
    for (let i = 0; i < EVERY; i++) await worker.dispatch(id, { type: 'ExecutionProgressed', data: { details: { i } }, by: 'worker:w1' });
    const snap = await storedSnapshot(id, 99n);
    expect(snap.revision).toBe(99n); // revision 99 is the 100th event
  });

  it('ignores a snapshot of another machine version or of another stream, and rebuilds it', async () => {
    const { id, events } = await longExecution(t.store, 1_200);
    const streamId = executionStreamId(id);
    const truth = plain((await createExecutionRuntime(t.store).load(id, { whole: true })).snapshot);
    await storedSnapshot(id, 1_199n); // the whole fold of 1,200 events wrote one
    const stale = foldExecution(events.slice(0, 10).map(asExecutionEvent)); // folded here: no runtime to write a snapshot meanwhile
    // An unknown version, with a state that would be wrong if it were used.
    await t.db.pool.query('UPDATE baton_snapshots SET machine_version = $2, state = $3 WHERE stream_id = $1', [streamId, '999', JSON.stringify(persistExecution(stale))]);
    const a = await createExecutionRuntime(t.store).load(id);
    expect(a.from).toBeUndefined();
    expect(plain(a.snapshot)).toEqual(truth);
    expect((await storedSnapshot(id, 1_199n)).machineVersion).toBe(MACHINE_VERSION); // rebuilt
    // The right version, but naming an event that is not the stream's at that revision.
    await t.db.pool.query('UPDATE baton_snapshots SET event_id = $2 WHERE stream_id = $1', [streamId, randomUUID()]);
    const b = await createExecutionRuntime(t.store).load(id);
    expect(b.from).toBeUndefined();
    expect(plain(b.snapshot)).toEqual(truth);
    // Time-travel to a revision before the snapshot reads the whole history.
    await storedSnapshot(id, 1_199n, events[1_199]!.eventId); // rebuilt
    const c = await createExecutionRuntime(t.store).load(id);
    expect(c.from).toBe(1_199n);
    const steps = await executionTimeline(t.store, id);
    expect(steps).toHaveLength(1_200);
    expect(steps[2]!.state).toBe('Scheduled');
    expect(events).toHaveLength(1_200);
  });

  it('still recognises a retried command whose events were stored before the snapshot', async () => {
    const { id, events } = await longExecution(t.store, 300);
    await createExecutionRuntime(t.store, { snapshotEvery: EVERY }).load(id);
    await storedSnapshot(id, 299n);
    // ExecutionStarted (revision 3) again, as a worker retrying it would: refused in Running by
    // the state from the snapshot, then found in the whole stream.
    const started = events[3]!;
    const retry = await createExecutionRuntime(t.store).dispatch(id, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1', eventId: started.eventId });
    expect(retry.appended).toBe(false);
    expect(statusOf(retry.snapshot)).toBe('Running');
  });
});
