// A worker of the executor's own process frees its slot when its action ends, not when the
// outcome's commit comes back (src/executor/ending-runs.ts): the executor places the next
// execution there at once, and its handoff is stored after the outcome (with it, or in the next
// transaction), so the history never shows the worker holding more than its capacity; while the
// outcome cannot be stored (a lock on its stream's row here), neither is the handoff. The
// executor shares the worker's runtime, as in one process's hosts: that runtime's batcher orders
// the two.
import pino from 'pino';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActionRegistry, defineAction } from '../../src/actions/index.ts';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';
import { LocalWorkers } from '../../src/worker/eager-dispatch.ts';
import { batcherFor } from '../../src/worker/dispatch-batcher.ts';
import { startWorkerHost, type WorkerHost } from '../../src/worker/worker-host.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { useInProcessExecutor } from '../support/in-process-executor.ts';
import { until } from '../support/until.ts';

const log = pino({ level: 'silent' });
const types = (events: StoredEvent[]) => events.map((e) => e.type);

const gates = new Map<string, () => void>();
const actions = createActionRegistry([
  defineAction({
    name: 'er.gated',
    input: z.null(),
    run: (_, ctx) => new Promise((resolve) => gates.set(ctx.executionId, () => resolve('done'))),
  }),
]);

describe('a local worker whose action ended', () => {
  const localWorkers = new LocalWorkers();
  const x = useInProcessExecutor({ localWorkers, monitorEveryMs: 50, shareRuntime: true });
  let worker: WorkerHost;

  beforeAll(async () => {
    const { store, runtime, transport, liveness } = x();
    worker = await startWorkerHost({ workerId: 'er-1', store, runtime, transport, liveness, actions, capacity: 1, log, localWorkers, heartbeatIntervalMs: 200 });
  });
  afterAll(async () => {
    for (const open of gates.values()) open();
    await worker?.stop();
  });

  const historyOf = (id: string) => x().store.readStream(executionStreamId(id));
  async function untilLast(id: string, type: string): Promise<StoredEvent[]> {
    let events: StoredEvent[] = [];
    await until(`${id} to reach ${type}`, async () => (events = await historyOf(id)).at(-1)?.type === type, 10_000, { detail: () => types(events).join(' → ') });
    return events;
  }
  const gateOf = async (id: string) => {
    await until(`the run of ${id} to start its action`, () => gates.has(id));
    return gates.get(id)!;
  };

  const whole = ['ExecutionRequested', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCompleted'];
  const handoffOf = (events: StoredEvent[]) => events.find((e) => e.type === 'ExecutionHandedOff')!;

  it('hands the next execution to the slot after the ended run\'s outcome, never before it', { timeout: 30_000 }, async () => {
    const { runtime, executor } = x();
    const a = await runtime.submit({ action: 'er.gated', input: null });
    await untilLast(a.executionId, 'ExecutionStarted');
    const b = await runtime.submit({ action: 'er.gated', input: null });
    // Capacity 1: b waits while a runs.
    await until('b to wait', () => executor.waiting() === 1);
    (await gateOf(a.executionId))();
    const aEvents = await untilLast(a.executionId, 'ExecutionCompleted');
    const bStarted = await untilLast(b.executionId, 'ExecutionStarted');
    expect(handoffOf(bStarted).data).toMatchObject({ workerId: 'er-1' });
    // Stored after a's outcome (in its transaction or a later one): the history never shows the worker holding two at once.
    expect(handoffOf(bStarted).globalPosition).toBeGreaterThan(aEvents.at(-1)!.globalPosition);
    expect(types(aEvents)).toEqual(whole);
    (await gateOf(b.executionId))();
    expect(types(await untilLast(b.executionId, 'ExecutionCompleted'))).toEqual(whole);
  });

  it('places the next execution while the ended run\'s outcome is being stored, and stores it after', { timeout: 30_000 }, async () => {
    const { runtime, executor, db } = x();
    const a = await runtime.submit({ action: 'er.gated', input: null });
    await untilLast(a.executionId, 'ExecutionStarted');
    const b = await runtime.submit({ action: 'er.gated', input: null });
    await until('b to wait', () => executor.waiting() === 1);
    // Hold a's outcome: its stream row stays locked until this transaction ends.
    const lock = await db.pool.connect();
    try {
      await lock.query('BEGIN');
      await lock.query('SELECT 1 FROM baton_streams WHERE stream_id = $1 FOR UPDATE', [executionStreamId(a.executionId)]);
      (await gateOf(a.executionId))();
      // The slot is placed at once (a's outcome is not stored, so the view still counts a there)…
      await until("b's handoff to be asked for", () => batcherFor(runtime).holds(b.executionId));
      // … and nothing of it is stored while a's outcome waits.
      expect(types(await historyOf(a.executionId)).at(-1)).toBe('ExecutionStarted');
      expect(types(await historyOf(b.executionId))).toEqual(['ExecutionRequested']);
    } finally {
      await lock.query('COMMIT');
      lock.release();
    }
    const aEvents = await untilLast(a.executionId, 'ExecutionCompleted');
    const bStarted = await untilLast(b.executionId, 'ExecutionStarted');
    expect(handoffOf(bStarted).data).toMatchObject({ workerId: 'er-1' });
    expect(handoffOf(bStarted).globalPosition).toBeGreaterThan(aEvents.at(-1)!.globalPosition);
    (await gateOf(b.executionId))();
    expect(types(await untilLast(b.executionId, 'ExecutionCompleted'))).toEqual(whole);
  });
});
