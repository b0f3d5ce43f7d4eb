// An executor and one worker host in the test's process, on the Postgres work queue, with the
// file's own actions: the fixture of the end-to-end tests of what an action does while it runs
// (ctx.tag, ctx.heartbeat, unusual outcomes).
import { beforeAll } from 'vitest';
import pino from 'pino';
import type { ActionRegistry } from '../../src/actions/index.ts';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';
import { startExecutor, type Executor } from '../../src/executor/executor.ts';
import { createLivenessStore } from '../../src/liveness/liveness-store.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import type { WorkTransport } from '../../src/transport/work-transport.ts';
import { startWorkerHost, type WorkerHost } from '../../src/worker/worker-host.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { useTestStore, type TestStore } from './test-store.ts';
import { until } from './until.ts';

export interface OneWorker {
  t: TestStore;
  runtime: ExecutionRuntime;
  transport: WorkTransport;
  executor: Executor;
  worker: WorkerHost;
  /** The execution's events once its last is one of `ended` (Completed or Failed by default). */
  finished(executionId: string, ended?: readonly string[]): Promise<StoredEvent[]>;
}

/**
 * Started in beforeAll, stopped before the test store closes. `transport`: the work transport to
 * use (default: the Postgres queue on the test store's pool); `afterStop` closes what it needs.
 */
export function useOneWorker(o: { workerId: string; actions: ActionRegistry; max?: number; transport?: (t: TestStore) => WorkTransport; afterStop?: () => Promise<void> }): OneWorker {
  const hosts = {} as OneWorker;
  hosts.t = useTestStore({
    max: o.max ?? 12,
    beforeClose: async () => {
      await hosts.worker?.stop();
      await hosts.executor?.stop();
      await hosts.transport?.close();
      await o.afterStop?.();
    },
  });
  const log = pino({ level: 'silent' });
  beforeAll(async () => {
    const { t } = hosts;
    const liveness = createLivenessStore(t.db.pool);
    hosts.runtime = createExecutionRuntime(t.store);
    hosts.transport = o.transport?.(t) ?? createPostgresWorkTransport(t.db.pool);
    hosts.executor = startExecutor({ store: t.store, transport: hosts.transport, workers: liveness, log, monitorEveryMs: 50 });
    await hosts.executor.ready;
    hosts.worker = await startWorkerHost({ workerId: o.workerId, store: t.store, runtime: hosts.runtime, transport: hosts.transport, liveness, actions: o.actions, capacity: 2, log, heartbeatIntervalMs: 200 });
  });
  hosts.finished = async (executionId, ended = ['ExecutionCompleted', 'ExecutionFailed']) => {
    let events: StoredEvent[] = [];
    await until(`${executionId} to end`, async () => ended.includes((events = await hosts.t.store.readStream(executionStreamId(executionId))).at(-1)?.type ?? ''), 20_000, {
      detail: () => events.map((e) => e.type).join(' → '),
    });
    return events;
  };
  return hosts;
}
