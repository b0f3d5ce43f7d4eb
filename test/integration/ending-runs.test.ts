// A worker of the executor's own process frees its slot when its action ends, not when the
// outcome's commit comes back (src/executor/ending-runs.ts): the executor hands the next
// execution to it while the outcome is still being stored. Here the outcome's append is held up
// by a lock on its stream's row; the next execution is handed off and started meanwhile, and
// both finish once the lock goes, each with its whole history.
import pino from 'pino';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActionRegistry, defineAction } from '../../src/actions/index.ts';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';
import { LocalWorkers } from '../../src/worker/eager-dispatch.ts';
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
  const x = useInProcessExecutor({ localWorkers, monitorEveryMs: 50 });
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

  it('takes the next execution while the outcome is being stored', { timeout: 30_000 }, async () => {
    const { runtime, executor, db } = x();
    const a = await runtime.submit({ action: 'er.gated', input: null });
    await untilLast(a.executionId, 'ExecutionStarted');
    const b = await runtime.submit({ action: 'er.gated', input: null });
    // Capacity 1: b waits while a runs.
    await until('b to wait', () => executor.waiting() === 1);

    // Hold a's outcome append: its stream row stays locked until this transaction ends.
    const lock = await db.pool.connect();
    try {
      await lock.query('BEGIN');
      await lock.query('SELECT 1 FROM baton_streams WHERE stream_id = $1 FOR UPDATE', [executionStreamId(a.executionId)]);
      (await gateOf(a.executionId))();
      const bStarted = await untilLast(b.executionId, 'ExecutionStarted');
      expect(bStarted.find((e) => e.type === 'ExecutionHandedOff')).toMatchObject({ data: { workerId: 'er-1' } });
      // a's outcome is not stored yet: it is still Running in the history.
      expect(types(await historyOf(a.executionId)).at(-1)).toBe('ExecutionStarted');
    } finally {
      await lock.query('COMMIT');
      lock.release();
    }
    const whole = ['ExecutionRequested', 'SchedulingStarted', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCompleted'];
    expect(types(await untilLast(a.executionId, 'ExecutionCompleted'))).toEqual(whole);
    (await gateOf(b.executionId))();
    expect(types(await untilLast(b.executionId, 'ExecutionCompleted'))).toEqual(whole);
  });
});
