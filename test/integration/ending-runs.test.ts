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
import { startExecutor, type Executor } from '../../src/executor/executor.ts';
import { createLivenessStore } from '../../src/liveness/liveness-store.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import type { WorkTransport } from '../../src/transport/work-transport.ts';
import { LocalWorkers } from '../../src/worker/eager-dispatch.ts';
import { startWorkerHost, type WorkerHost } from '../../src/worker/worker-host.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { useTestStore } from '../support/test-store.ts';

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
  const t = useTestStore({ max: 10 });
  let runtime: ExecutionRuntime;
  let transport: WorkTransport;
  let executor: Executor;
  let worker: WorkerHost;

  beforeAll(async () => {
    runtime = createExecutionRuntime(t.store);
    const liveness = createLivenessStore(t.db.pool);
    transport = createPostgresWorkTransport(t.db.pool);
    const localWorkers = new LocalWorkers();
    executor = startExecutor({ store: t.store, transport, workers: liveness, log, localWorkers, monitorEveryMs: 50 });
    await executor.ready;
    worker = await startWorkerHost({ workerId: 'er-1', store: t.store, runtime, transport, liveness, actions, capacity: 1, log, localWorkers, heartbeatIntervalMs: 200 });
  });
  afterAll(async () => {
    for (const open of gates.values()) open();
    await worker?.stop();
    await executor?.stop();
    await transport?.close();
  });

  async function until(id: string, done: (events: StoredEvent[]) => boolean, ms = 10_000): Promise<StoredEvent[]> {
    const end = Date.now() + ms;
    for (;;) {
      const events = await t.store.readStream(executionStreamId(id));
      if (done(events)) return events;
      if (Date.now() > end) throw new Error(`timed out: ${types(events).join(' → ')}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  const lastIs = (type: string) => (events: StoredEvent[]) => events.at(-1)?.type === type;
  const gateOf = async (id: string) => {
    for (let i = 0; i < 500 && !gates.has(id); i++) await new Promise((r) => setTimeout(r, 10));
    return gates.get(id)!;
  };

  it('takes the next execution while the outcome is being stored', { timeout: 30_000 }, async () => {
    const a = await runtime.submit({ action: 'er.gated', input: null });
    await until(a.executionId, lastIs('ExecutionStarted'));
    const b = await runtime.submit({ action: 'er.gated', input: null });
    // Capacity 1: b waits while a runs.
    for (let i = 0; i < 200 && executor.waiting() === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(executor.waiting()).toBe(1);

    // Hold a's outcome append: its stream row stays locked until this transaction ends.
    const lock = await t.db.pool.connect();
    try {
      await lock.query('BEGIN');
      await lock.query('SELECT 1 FROM baton_streams WHERE stream_id = $1 FOR UPDATE', [executionStreamId(a.executionId)]);
      (await gateOf(a.executionId))();
      const bStarted = await until(b.executionId, lastIs('ExecutionStarted'));
      expect(bStarted.find((e) => e.type === 'ExecutionHandedOff')).toMatchObject({ data: { workerId: 'er-1' } });
      // a's outcome is not stored yet: it is still Running in the history.
      expect(types(await t.store.readStream(executionStreamId(a.executionId))).at(-1)).toBe('ExecutionStarted');
    } finally {
      await lock.query('COMMIT');
      lock.release();
    }
    const aEvents = await until(a.executionId, lastIs('ExecutionCompleted'));
    expect(types(aEvents)).toEqual(['ExecutionRequested', 'SchedulingStarted', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCompleted']);
    (await gateOf(b.executionId))();
    const bEvents = await until(b.executionId, lastIs('ExecutionCompleted'));
    expect(types(bEvents)).toEqual(['ExecutionRequested', 'SchedulingStarted', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCompleted']);
  });
});
