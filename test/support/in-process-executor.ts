// An executor in this process over a fresh database and the Postgres work queue, for tests of
// what it decides and publishes; workers are whatever the test puts in the liveness table and
// the worker streams. Created in beforeAll, stopped and dropped in afterAll.
import pino from 'pino';
import { afterAll, beforeAll } from 'vitest';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { startExecutor, type Executor, type ExecutorActors, type ExecutorOptions } from '../../src/executor/executor.ts';
import { followActors } from '../../src/runtime/follow-actors.ts';
import { createWorkerRuntime } from '../../src/runtime/worker-kind.ts';
import { createLivenessStore, type LivenessStore } from '../../src/liveness/liveness-store.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import type { WorkTransport } from '../../src/transport/work-transport.ts';
import { createTestDatabase, type TestDatabase } from './test-db.ts';

export interface InProcessExecutor {
  db: TestDatabase;
  store: PostgresEventStore;
  runtime: ExecutionRuntime;
  liveness: LivenessStore;
  transport: WorkTransport;
  executor: Executor;
}

type Options = Partial<Omit<ExecutorOptions, 'store' | 'runtime' | 'transport' | 'workers'>> & {
  /** Wrap the real transport (to record what the executor publishes, say). */
  transport?: (real: WorkTransport) => WorkTransport;
  /** The executor works on the fixture's own `runtime`, as in one process's hosts (`baton dev`), not on one of its own. */
  shareRuntime?: boolean;
};

function sharedActors(store: PostgresEventStore, executions: ExecutionRuntime, log: pino.Logger): ExecutorActors {
  const workerStreams = createWorkerRuntime(store);
  return { executions, workerStreams, follower: followActors({ store, runtimes: [executions.actors, workerStreams], log, who: 'executor' }) };
}

export function useInProcessExecutor(options: Options = {}): () => InProcessExecutor {
  let fixture: InProcessExecutor | undefined;
  let shared: ExecutorActors | undefined;
  beforeAll(async () => {
    const { transport: wrap = (t: WorkTransport) => t, shareRuntime = false, ...executorOptions } = options;
    const db = await createTestDatabase();
    const store = createPostgresEventStore(db.pool);
    const runtime = createExecutionRuntime(store);
    const liveness = createLivenessStore(db.pool);
    const transport = wrap(createPostgresWorkTransport(db.pool));
    const log = pino({ level: 'silent' });
    shared = shareRuntime ? sharedActors(store, runtime, log) : undefined;
    const executor = startExecutor({ store, transport, workers: liveness, log, ...(shared && { actors: shared }), ...executorOptions });
    await executor.ready;
    fixture = { db, store, runtime, liveness, transport, executor };
  });
  afterAll(async () => {
    const f = fixture;
    fixture = undefined;
    await f?.executor.stop();
    await shared?.follower.stop(); // shared: the executor leaves it to its owner
    await f?.transport.close();
    await f?.store.close();
    await f?.db.drop();
  });
  return () => {
    if (!fixture) throw new Error('useInProcessExecutor(): only inside tests and hooks');
    return fixture;
  };
}
