// The one actor runtime (src/runtime/actor-runtime.ts) against the real Postgres store: two
// processes' runtimes on one store, each with its own snapshot cache. A cache only ever saves a
// read; it never makes a decision the store would not have made.
import { describe, expect, it } from 'vitest';
import { statusOf } from '../../actors/execution.machine.ts';
import { statusOf as workerStatusOf } from '../../actors/worker.machine.ts';
import { executionStreamId } from '../../schemas/events.ts';
import type { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createWorkerRuntime, recordWorkerEvent } from '../../src/runtime/worker-kind.ts';
import { useTestStore } from '../support/test-store.ts';

const deadline = () => new Date(Date.now() + 30_000).toISOString();
const announcement = { actions: ['core.noop'], runtimes: ['node'], capacity: 1 };

describe('the actor runtime', () => {
  const t = useTestStore({ max: 10 });

  /** How many stream reads a runtime makes, counted at the store. */
  function counting(): { store: PostgresEventStore; reads: () => number } {
    let reads = 0;
    // A load reads the stream through the snapshot store when it has one (one round trip for both).
    const snapshots = { ...t.store.snapshots!, readWithEvents: (...a: Parameters<NonNullable<typeof t.store.snapshots>['readWithEvents'] & {}>) => (reads++, t.store.snapshots!.readWithEvents!(...a)) };
    return { store: { ...t.store, snapshots, readStream: (...a: Parameters<PostgresEventStore['readStream']>) => (reads++, t.store.readStream(...a)) }, reads: () => reads };
  }

  it('decides on its own last append without reading the stream again', async () => {
    const { store: s, reads } = counting();
    const runtime = createExecutionRuntime(s);
    const { executionId } = await runtime.submit({ action: 'core.noop', input: null });
    await runtime.dispatch(executionId, [
      { type: 'SchedulingStarted', data: {}, by: 'executor' },
      { type: 'ExecutionHandedOff', data: { workerId: 'w1', attempt: 1, deadline: deadline() }, by: 'executor' },
    ]);
    const before = reads();
    await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
    const done = await runtime.dispatch(executionId, { type: 'ExecutionCompleted', data: { result: 1 }, by: 'worker:w1' });
    expect(statusOf(done.snapshot)).toBe('Completed');
    expect(reads() - before).toBe(0);
  });

  it('confirms a refusal decided on a stale cache against the store, and then decides right', async () => {
    const a = createExecutionRuntime(t.store);
    const b = createExecutionRuntime(t.store);
    const { executionId } = await a.submit({ action: 'core.noop', input: null });
    await a.dispatch(executionId, [
      { type: 'SchedulingStarted', data: {}, by: 'executor' },
      { type: 'ExecutionHandedOff', data: { workerId: 'w1', attempt: 1, deadline: deadline() }, by: 'executor' },
    ]); // a's cache: Scheduled
    await b.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' }); // the store: Running
    // In a's remembered Scheduled a completion is refused; the store says Running, where it fits.
    const r = await a.dispatch(executionId, { type: 'ExecutionCompleted', data: { result: 'ok' }, by: 'worker:w1' });
    expect(r.appended).toBe(true);
    expect((await t.store.readStream(executionStreamId(executionId))).map((e) => e.type)).toEqual([
      'ExecutionRequested',
      'SchedulingStarted',
      'ExecutionHandedOff',
      'ExecutionStarted',
      'ExecutionCompleted',
    ]);
  });

  it('confirms a "nothing to do" decided on a stale cache against the store (a worker declared lost meanwhile)', async () => {
    const mine = createWorkerRuntime(t.store);
    const executor = createWorkerRuntime(t.store);
    await recordWorkerEvent(mine, 'w-stale', 'WorkerStarted', announcement); // mine remembers Active
    await recordWorkerEvent(executor, 'w-stale', 'WorkerLost', { lastHeartbeatAt: new Date().toISOString(), reason: 'stale' }, { by: 'executor' });
    const announced = await recordWorkerEvent(mine, 'w-stale', 'WorkerStarted', announcement, { when: (s) => workerStatusOf(s) === 'Lost' });
    expect(announced).toBe(true);
    expect(workerStatusOf((await mine.load('w-stale')).snapshot)).toBe('Active');
  });

  it('folds each observed event once, whether its own append or the subscription brought it first, and tells listeners once', async () => {
    const runtime = createExecutionRuntime(t.store);
    const seen: string[] = [];
    runtime.onChange((c) => seen.push(...c.events.map((e) => `${c.source}:${e.event.type}`)));
    const { executionId } = await runtime.submit({ action: 'core.noop', input: null });
    const [requested] = await t.store.readStream(executionStreamId(executionId));
    await runtime.observe(requested!);
    await runtime.dispatch(executionId, { type: 'SchedulingStarted', data: {}, by: 'executor' });
    for (const e of await t.store.readStream(executionStreamId(executionId))) await runtime.observe(e); // the subscription catches up
    expect(seen).toEqual(['observed:ExecutionRequested', 'own:SchedulingStarted']);
  });

  it('tells listeners once when the subscription reads its own append back before the append answers, wholly or in part', async () => {
    // A follower woken by the commit can read the events before the append's answer is handled
    // (28% of completions in a bench): here the store's answer waits until they were observed.
    const store = t.store;
    let readBack: ((streamId: string) => Promise<void>) | undefined;
    const racing: PostgresEventStore = {
      ...store,
      append: async (...a: Parameters<PostgresEventStore['append']>) => {
        const r = await store.append(...a);
        await readBack?.(a[0]);
        return r;
      },
      appendMany: async (requests) => {
        const r = await store.appendMany(requests);
        for (const q of requests) await readBack?.(q.streamId);
        return r;
      },
    };
    const runtime = createExecutionRuntime(racing);
    const seen: string[] = [];
    runtime.onChange((c) => seen.push(...c.events.map((e) => `${c.source}:${e.event.type}`)));
    const { executionId } = await runtime.submit({ action: 'core.noop', input: null });
    // Only the first event of each append is read back before the answer: the rest is the append's to tell.
    readBack = async (streamId) => {
      const events = await store.readStream(streamId);
      const held = runtime.cached(executionId)?.revision ?? -1n;
      const next = events.find((e) => e.revision > held);
      if (next) await runtime.observe(next);
    };
    await runtime.dispatch(executionId, [
      { type: 'SchedulingStarted', data: {}, by: 'executor' },
      { type: 'ExecutionHandedOff', data: { workerId: 'w1', attempt: 1, deadline: deadline() }, by: 'executor' },
    ]);
    // Then whole appends, through dispatchMany (a worker's batches) as through dispatch.
    readBack = async (streamId) => {
      for (const e of await store.readStream(streamId)) await runtime.observe(e);
    };
    const [started] = await runtime.actors.dispatchMany([{ id: executionId, commands: { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' } }]);
    expect(started!.ok).toBe(true);
    const done = await runtime.dispatch(executionId, { type: 'ExecutionCompleted', data: { result: 1 }, by: 'worker:w1' });
    expect(statusOf(done.snapshot)).toBe('Completed');
    expect(done.appended).toBe(true);
    expect(seen).toEqual(['loaded:ExecutionRequested', 'observed:SchedulingStarted', 'own:ExecutionHandedOff', 'observed:ExecutionStarted', 'observed:ExecutionCompleted']);
  });

  it('recognises a final event arriving again after its own append ended the execution, without a read', async () => {
    const { store: s, reads } = counting();
    const runtime = createExecutionRuntime(s);
    const { executionId } = await runtime.submit({ action: 'core.noop', input: null });
    const first = (await t.store.readStream(executionStreamId(executionId)))[0]!;
    await runtime.observe(first);
    await runtime.dispatch(executionId, { type: 'ExecutionCancelled', data: { reason: 'no' }, by: 'executor' });
    const before = reads();
    const events: StoredEvent[] = await t.store.readStream(executionStreamId(executionId));
    for (const e of events) expect(await runtime.observe(e)).toBeUndefined();
    expect(reads() - before).toBe(0);
  });

  it('tells its listeners what a load brought into the cache, so an observe that finds it there already loses nothing', async () => {
    const runtime = createExecutionRuntime(t.store);
    const seen: string[] = [];
    runtime.onChange((c) => seen.push(...c.events.map((e) => `${c.source}:${e.event.type}`)));
    const other = createExecutionRuntime(t.store);
    const { executionId } = await other.submit({ action: 'core.noop', input: null });
    await other.dispatch(executionId, { type: 'SchedulingStarted', data: {}, by: 'executor' });
    await runtime.load(executionId); // e.g. the orchestrator asking about a step before the follower got there
    for (const e of await t.store.readStream(executionStreamId(executionId))) await runtime.observe(e); // then the follower
    expect(seen).toEqual(['loaded:ExecutionRequested', 'loaded:SchedulingStarted']);
    await other.dispatch(executionId, { type: 'ExecutionCancelled', data: { reason: 'r' }, by: 'executor' });
    await runtime.load(executionId);
    expect(seen.slice(2), 'only what it had not seen').toEqual(['loaded:ExecutionCancelled']);
  });

  it('loads from the store until a follower keeps it current, then from its cache', async () => {
    const { store: s, reads } = counting();
    const runtime = createExecutionRuntime(s);
    const { executionId } = await runtime.submit({ action: 'core.noop', input: null });
    await runtime.load(executionId);
    await runtime.load(executionId);
    expect(reads()).toBe(2);
    runtime.followed();
    await runtime.load(executionId);
    expect(reads()).toBe(2);
    await runtime.load(executionId, { fresh: true });
    expect(reads()).toBe(3);
  });
});
