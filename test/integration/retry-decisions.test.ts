// The executor's retry decisions against a real Postgres store and work queue: a retry policy
// stored before backoffs were bounded still schedules a retry inside the bound, and one
// execution whose decision throws never keeps the scheduling pass from handing off the others.
import { Writable } from 'node:stream';
import pino from 'pino';
import { z } from 'zod';
import { beforeAll, describe, expect, it } from 'vitest';
import { WORKER_MACHINE_VERSION } from '../../actors/worker.machine.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { MAX_RETRY_INTERVAL_MS, workerStreamId } from '../../schemas/worker-events.ts';
import { builtinActions, createActionRegistry, defineAction } from '../../src/actions/index.ts';
import { startExecutor, type Executor } from '../../src/executor/executor.ts';
import type { RetryBackoffDefaults } from '../../src/executor/retry-policy.ts';
import { newId } from '../../src/ids.ts';
import { createLivenessStore, type LivenessStore } from '../../src/liveness/liveness-store.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import type { WorkTransport } from '../../src/transport/work-transport.ts';
import { startWorkerHost, type WorkerHost } from '../../src/worker/worker-host.ts';
import { useTestStore, type TestStore } from '../support/test-store.ts';
import { until } from '../support/until.ts';

const quiet = pino({ level: 'silent' });

/** An executor, a Postgres work queue and one real worker offering `actions`, for the enclosing describe. */
function useCluster(o: { actions: ReturnType<typeof createActionRegistry>; log?: pino.Logger; retryBackoff?: RetryBackoffDefaults }) {
  const parts = {} as { runtime: ExecutionRuntime; liveness: LivenessStore; transport: WorkTransport; executor: Executor; worker: WorkerHost };
  const t: TestStore = useTestStore({
    beforeClose: async () => {
      await parts.worker?.stop();
      await parts.executor?.stop();
      await parts.transport?.close();
    },
  });
  beforeAll(async () => {
    parts.runtime = createExecutionRuntime(t.store);
    parts.liveness = createLivenessStore(t.db.pool);
    parts.transport = createPostgresWorkTransport(t.db.pool);
    parts.executor = startExecutor({
      store: t.store,
      transport: parts.transport,
      workers: parts.liveness,
      log: o.log ?? quiet,
      scheduleToStartMs: 300,
      monitorEveryMs: 50,
      ...(o.retryBackoff && { retryBackoff: o.retryBackoff }),
    });
    await parts.executor.ready;
    parts.worker = await startWorkerHost({ workerId: 'real', store: t.store, runtime: parts.runtime, transport: parts.transport, liveness: parts.liveness, actions: o.actions, capacity: 4, log: quiet, heartbeatIntervalMs: 200 });
  });
  const types = async (id: string) => (await t.store.readStream(executionStreamId(id))).map((e) => e.type);
  const completes = (id: string) => until(`execution ${id} to complete`, async () => (await types(id)).includes('ExecutionCompleted'), 15_000);
  return { t, parts, types, completes };
}

describe('a retry policy stored before backoffs were bounded', () => {
  const { t, parts, types, completes } = useCluster({ actions: createActionRegistry(builtinActions) });

  it('schedules the retry inside the bound, and other work still flows', async () => {
    // A worker announced a backoff no announcement may carry now (stored raw, as an older Baton stored it), then went quiet.
    const policy = { runtime: 'node', retry: { maxAttempts: 3, initialIntervalMs: 9e15, multiplier: 2, maxIntervalMs: 9e15 } };
    await t.store.append(
      workerStreamId('ghost'),
      [{ eventId: newId(), type: 'WorkerStarted', data: { actions: ['qa.huge-backoff'], runtimes: ['node'], capacity: 10, policies: { 'qa.huge-backoff': policy } }, metadata: { by: 'worker:ghost', occurredAt: new Date().toISOString(), machineVersion: WORKER_MACHINE_VERSION } }],
      { expectedRevision: 'no_stream' },
    );
    await parts.liveness.beat({ workerId: 'ghost', actions: ['qa.huge-backoff'], runtimes: ['node'], capacity: 10, inFlight: 0, draining: false }, { starting: true });
    const { executionId: stuck } = await parts.runtime.submit({ action: 'qa.huge-backoff', input: null, maxAttempts: 3 });
    // The ghost never starts it: reclaimed after its schedule-to-start deadline, then a retry is decided.
    await until('the retry decision', async () => (await types(stuck)).includes('ExecutionRetryScheduled'), 15_000);
    const retry = (await t.store.readStream(executionStreamId(stuck))).find((e) => e.type === 'ExecutionRetryScheduled')!;
    const delay = Date.parse((retry.data as { retryAt: string }).retryAt) - Date.parse(retry.metadata.occurredAt as string);
    expect(delay).toBeGreaterThan(MAX_RETRY_INTERVAL_MS - 60_000);
    expect(delay).toBeLessThanOrEqual(MAX_RETRY_INTERVAL_MS + 1_000);

    const { executionId } = await parts.runtime.submit({ action: 'core.noop', input: null });
    await completes(executionId);
  });
});

describe('one execution whose retry decision throws', () => {
  const lines: string[] = [];
  const log = pino({ level: 'error' }, new Writable({ write: (chunk, _enc, done) => void (lines.push(String(chunk)), done()) }));
  const failing = defineAction({ name: 'qa.fails', input: z.null(), run: () => { throw new Error('fail once'); } });
  // The default backoff (for actions that advertise none) throws when asked: a stand-in for any bug in one decision.
  const retryBackoff = { initialMs: 10, multiplier: 2, get maxMs(): number { throw new Error('decision blew up'); } };
  const { parts, types, completes } = useCluster({ actions: createActionRegistry([...builtinActions, failing]), log, retryBackoff });

  it('does not keep the scheduling pass from handing off another execution, and says which one failed', async () => {
    const { executionId: broken } = await parts.runtime.submit({ action: 'qa.fails', input: null, maxAttempts: 3 });
    await until('the failure', async () => (await types(broken)).includes('ExecutionFailed'), 15_000);
    const { executionId } = await parts.runtime.submit({ action: 'core.noop', input: null });
    await completes(executionId);

    expect(await types(broken)).not.toContain('ExecutionRetryScheduled');
    await until('the decision failure logged', () => lines.some((l) => l.includes(broken)));
    const logged = JSON.parse(lines.find((l) => l.includes(broken))!) as { executionId: string; err: { message: string }; msg: string };
    expect(logged).toMatchObject({ executionId: broken, err: { message: 'decision blew up' } });
    expect(logged.msg).toBe(`could not decide the retry of execution ${broken}; will try again`);
  });
});
