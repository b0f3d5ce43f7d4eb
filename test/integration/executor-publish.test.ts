// What the executor puts on the wire: each work message carries the runtime tag its action's
// workers advertise (WorkerStarted.policies), on the first publish and on every re-publish.
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { startExecutor, type Executor } from '../../src/executor/executor.ts';
import { createLivenessStore, type LivenessStore } from '../../src/liveness/liveness-store.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres.ts';
import type { WorkMessage, WorkTransport } from '../../src/transport/work-transport.ts';
import { recordWorkerEvent } from '../../src/worker/worker-lifecycle.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const log = pino({ level: 'silent' });

describe('work messages the executor publishes', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;
  let runtime: ExecutionRuntime;
  let liveness: LivenessStore;
  let transport: WorkTransport;
  let executor: Executor;
  /** Every message the executor handed to the transport, in order. */
  const published: WorkMessage[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    store = createPostgresEventStore(db.pool);
    runtime = createExecutionRuntime(store);
    liveness = createLivenessStore(db.pool);
    const real = createPostgresWorkTransport(db.pool);
    transport = {
      ...real,
      async publish(messages) {
        published.push(...messages);
        await real.publish(messages);
      },
    };
    executor = startExecutor({ store, runtime, transport, workers: liveness, log, scheduleToStartMs: 20_000, republishAfterMs: 100, monitorEveryMs: 50 });
    await executor.ready;
  });
  afterAll(async () => {
    await executor.stop();
    await transport.close();
    await store.close();
    await db.drop();
  });

  it('labels the message with the action\'s advertised runtime, not the worker\'s first one, and keeps it on re-publish', async () => {
    // A worker with two runtimes whose action runs on the second; it takes no work, so the
    // handoff stays unstarted and the monitor re-publishes it.
    const runtimes = ['node', 'gpu'];
    await recordWorkerEvent(store, 'two-runtimes', 'WorkerStarted', { actions: ['render.frame'], runtimes, capacity: 4, policies: { 'render.frame': { runtime: 'gpu' } } });
    await liveness.beat({ workerId: 'two-runtimes', actions: ['render.frame'], runtimes, capacity: 4, inFlight: 0, draining: false }, { starting: true });
    const { executionId } = await runtime.submit({ action: 'render.frame', input: null });
    const deadline = Date.now() + 10_000;
    const mine = () => published.filter((m) => m.executionId === executionId);
    while (mine().length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    expect(mine().length, 'first publish and a re-publish').toBeGreaterThanOrEqual(2);
    expect(mine().map((m) => m.runtime)).toEqual(mine().map(() => 'gpu'));
    expect(new Set(mine().map((m) => m.messageId)).size, 'a re-publish keeps the message id').toBe(1);
  });
});
