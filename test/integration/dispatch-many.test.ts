// Batched dispatches against the real Postgres store: the actor runtime's dispatchMany (the
// executor's scheduling pass) and the worker's coalescing queue (src/worker/dispatch-batcher.ts).
// Many actors go in one appendMany; each keeps its own outcome, and a conflict for one is that
// one's alone.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { statusOf } from '../../actors/execution.machine.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { RejectedCommandError } from '../../src/errors.ts';
import type { EventStore } from '../../src/eventstore/event-store.ts';
import { createExecutionRuntime, type ExecutionCommand, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { DispatchBatcher } from '../../src/worker/dispatch-batcher.ts';
import { runDelivery } from '../../src/worker/run-delivery.ts';
import { workMessage } from '../../src/executor/work-messages.ts';
import { builtinActions, createActionRegistry } from '../../src/actions/index.ts';
import type { Delivery } from '../../src/transport/work-transport.ts';
import pino from 'pino';
import { useTestStore } from '../support/test-store.ts';

const deadline = () => new Date(Date.now() + 30_000).toISOString();
const handOff = (workerId: string): ExecutionCommand[] => [
  { type: 'SchedulingStarted', data: {}, by: 'executor' },
  { type: 'ExecutionHandedOff', data: { workerId, attempt: 1, deadline: deadline() }, by: 'executor' },
];

describe('batched dispatches', () => {
  const t = useTestStore({ max: 10 });

  /** The store, counting its calls. */
  function counting(): { store: EventStore; calls: { append: number; appendMany: number; readStream: number } } {
    const calls = { append: 0, appendMany: 0, readStream: 0 };
    return {
      calls,
      store: {
        ...t.store,
        append: (...a) => (calls.append++, t.store.append(...a)),
        appendMany: (...a) => (calls.appendMany++, t.store.appendMany(...a)),
        readStream: (...a) => (calls.readStream++, t.store.readStream(...a)),
      },
    };
  }

  /** Submitted executions, held in the runtime's cache (as the executor's follower holds them). */
  async function submitted(runtime: ExecutionRuntime, n: number): Promise<string[]> {
    const ids = await Promise.all(Array.from({ length: n }, async () => (await runtime.submit({ action: 'core.noop', input: null })).executionId));
    for (const id of ids) await runtime.load(id);
    return ids;
  }

  it('stores many actors in one appendMany, decided on what it holds (no read), and tells the listeners of each', async () => {
    const { store: s, calls } = counting();
    const runtime = createExecutionRuntime(s);
    const ids = await submitted(runtime, 5);
    const heard: string[] = [];
    runtime.onChange((c) => heard.push(c.id));
    const before = { ...calls };
    const outcomes = await runtime.actors.dispatchMany(ids.map((id) => ({ id, commands: handOff('w1') })));
    expect(outcomes.every((o) => o.ok && o.value.appended && statusOf(o.value.snapshot) === 'Scheduled')).toBe(true);
    expect(calls.appendMany - before.appendMany).toBe(1);
    expect(calls.append - before.append).toBe(0);
    expect(calls.readStream - before.readStream).toBe(0);
    expect(heard).toEqual(ids);
  });

  it('lets a conflict or a refusal cost only its own actor: that one is decided again on what the store holds', async () => {
    const runtime = createExecutionRuntime(t.store);
    const other = createExecutionRuntime(t.store);
    const ids = await submitted(runtime, 4);
    // Another process hands ids[1] off first (runtime's cache still says Requested: a conflict),
    // and cancels ids[2] (a refusal, once the store is read).
    await other.dispatch(ids[1]!, handOff('w2'));
    await other.dispatch(ids[2]!, { type: 'ExecutionCancelled', data: { reason: 'test' }, by: 'executor' });
    const outcomes = await runtime.actors.dispatchMany(ids.map((id) => ({ id, commands: handOff('w1') })));
    expect(outcomes.map((o) => o.ok)).toEqual([true, false, false, true]);
    expect(outcomes[1]!.ok ? undefined : outcomes[1]!.error).toBeInstanceOf(RejectedCommandError);
    expect(outcomes[2]!.ok ? undefined : outcomes[2]!.error).toBeInstanceOf(RejectedCommandError);
    for (const id of [ids[0]!, ids[3]!]) expect((await t.store.readStream(executionStreamId(id))).map((e) => e.type)).toEqual(['ExecutionRequested', 'SchedulingStarted', 'ExecutionHandedOff']);
    expect((await t.store.readStream(executionStreamId(ids[1]!))).find((e) => e.type === 'ExecutionHandedOff')!.data).toMatchObject({ workerId: 'w2' });
  });

  it("applies one actor's requests in the order given, and a state-dependent command on the state the earlier one left", async () => {
    const runtime = createExecutionRuntime(t.store);
    const [id] = await submitted(runtime, 1);
    const outcomes = await runtime.actors.dispatchMany([
      { id: id!, commands: handOff('w1') },
      { id: id!, commands: (s) => (statusOf(s!) === 'Scheduled' ? { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' } : undefined) },
    ]);
    expect(outcomes.map((o) => o.ok && o.value.appended)).toEqual([true, true]);
    expect((await t.store.readStream(executionStreamId(id!))).map((e) => e.type)).toEqual(['ExecutionRequested', 'SchedulingStarted', 'ExecutionHandedOff', 'ExecutionStarted']);
  });

  it("passes its notice (othersWait) to the batch's appendMany and to a request that goes on alone", async () => {
    const notices: { call: string; othersWait: boolean | undefined }[] = [];
    const store: EventStore = {
      ...t.store,
      append: (streamId, events, o) => (notices.push({ call: 'append', othersWait: o.othersWait }), t.store.append(streamId, events, o)),
      appendMany: (requests, o) => (notices.push({ call: 'appendMany', othersWait: o?.othersWait }), t.store.appendMany(requests, o)),
    };
    const runtime = createExecutionRuntime(store);
    const [id] = await submitted(runtime, 1);
    notices.length = 0;
    // The actor's second request waits for its first: it goes on alone, through dispatch.
    const outcomes = await runtime.actors.dispatchMany(
      [
        { id: id!, commands: handOff('w1') },
        { id: id!, commands: (s) => (statusOf(s!) === 'Scheduled' ? { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' } : undefined) },
      ],
      { othersWait: false },
    );
    expect(outcomes.map((o) => o.ok && o.value.appended)).toEqual([true, true]);
    expect(notices).toEqual([
      { call: 'appendMany', othersWait: false },
      { call: 'append', othersWait: false },
    ]);
  });

  it('recognises a retried request whose first try was stored (same event ids), in a batch, as applied once', async () => {
    const runtime = createExecutionRuntime(t.store);
    const stale = createExecutionRuntime(t.store);
    const [id] = await submitted(runtime, 1);
    const loaded = await stale.load(id!); // Requested, as a try that never heard back would remember
    const commands = handOff('w1').map((c) => ({ ...c, eventId: randomUUID() }));
    await runtime.dispatch(id!, commands);
    const [again] = await stale.actors.dispatchMany([{ id: id!, commands, known: loaded }]);
    expect(again!.ok && again!.value.appended).toBe(false);
    expect(await t.store.readStream(executionStreamId(id!))).toHaveLength(3);
  });

  it("coalesces the worker's concurrent appends into few appendMany calls, each caller with its own result", async () => {
    const { store: s, calls } = counting();
    const runtime = createExecutionRuntime(s);
    const other = createExecutionRuntime(t.store);
    const ids = await submitted(runtime, 20);
    await runtime.actors.dispatchMany(ids.map((id) => ({ id, commands: handOff('w1') })));
    // One of them was reclaimed meanwhile: its start is refused, the others' are not.
    await other.dispatch(ids[7]!, { type: 'OwnershipReclaimed', data: { reason: 'worker-lost', workerId: 'w1', attempt: 1 }, by: 'executor' });
    const batcher = new DispatchBatcher(runtime, 8);
    const before = calls.appendMany;
    const results = await Promise.allSettled(ids.map((id) => batcher.dispatch(id, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' })));
    expect(results.map((r) => r.status)).toEqual(ids.map((_, i) => (i === 7 ? 'rejected' : 'fulfilled')));
    expect((results[7] as PromiseRejectedResult).reason).toBeInstanceOf(RejectedCommandError);
    expect(calls.appendMany - before).toBe(3); // 20 requests, at most 8 a batch
    for (const [i, r] of results.entries()) if (r.status === 'fulfilled') expect([i, statusOf(r.value.snapshot)]).toEqual([i, 'Running']);
  });

  it('acks a delivery only after the batch that recorded its outcome committed, and runs many deliveries with two appendMany', async () => {
    const log: string[] = [];
    const { store: s, calls } = counting();
    // The store says when each appendMany committed (its promise resolved), in the order of the log.
    const logged: EventStore = {
      ...s,
      appendMany: async (requests) => {
        const r = await s.appendMany(requests);
        log.push(`commit ${requests.map((q) => q.events.at(-1)!.type).join(',')}`);
        return r;
      },
    };
    const runtime = createExecutionRuntime(logged);
    const ids = await submitted(runtime, 6);
    const outcomes = await runtime.actors.dispatchMany(ids.map((id) => ({ id, commands: handOff('w1') })));
    const messages = outcomes.map((o, i) => {
      const r = o.ok ? o.value : undefined;
      return workMessage({ handoffEventId: randomUUID(), executionId: ids[i]!, workerId: 'w1', action: 'core.noop', attempt: 1, handoffRevision: r!.revision }, 'node', Date.now(), r!.snapshot);
    });
    const deps = { workerId: 'w1', runtime, appends: new DispatchBatcher(runtime), actions: createActionRegistry([...builtinActions]), log: pino({ level: 'silent' }), shutdown: new AbortController().signal, running: new Set<string>() };
    const delivery = (m: (typeof messages)[number]): Delivery => ({ message: m, deliveryCount: 1, ack: async () => void log.push('ack'), nak: async () => void log.push('nak'), term: async () => void log.push('term'), working: async () => undefined });
    const before = calls.appendMany;
    await Promise.all(messages.map((m) => runDelivery(delivery(m), deps)));
    const commit = (type: string) => `commit ${Array(6).fill(type).join(',')}`;
    expect(log).toEqual([commit('ExecutionHandedOff'), commit('ExecutionStarted'), commit('ExecutionCompleted'), ...Array(6).fill('ack')]);
    expect(calls.appendMany - before).toBe(2);
  });
});
