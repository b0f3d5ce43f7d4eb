// A worker declared lost after its run's start-to-close deadline passed: the run timed out, and
// the executor records that (ExecutionTimedOut), not a reclaim and a retry. With the default
// settings (10 s heartbeats, lost after 30 s, the timeout due two heartbeats after the deadline)
// the lost-worker duty comes first for a worker that dies up to 30 s before its run's deadline.
import pino from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startExecutor, type Executor } from '../../src/executor/executor.ts';
import { createLivenessStore, type LivenessStore } from '../../src/liveness/liveness-store.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createWorkerRuntime, recordWorkerEvent } from '../../src/runtime/worker-kind.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import type { WorkTransport } from '../../src/transport/work-transport.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { useTestStore } from '../support/test-store.ts';

const log = pino({ level: 'silent' });
const t = useTestStore({ beforeClose: async () => (await executor?.stop(), await transport?.close()) });
let runtime: ExecutionRuntime;
let liveness: LivenessStore;
let transport: WorkTransport;
let executor: Executor;

beforeAll(async () => {
  runtime = createExecutionRuntime(t.store);
  liveness = createLivenessStore(t.db.pool);
  transport = createPostgresWorkTransport(t.db.pool);
  // The timeout's grace is a minute: only the lost-worker duty can end the run in this test.
  executor = startExecutor({ store: t.store, transport, workers: liveness, log, staleAfterMs: 1_500, timeoutGraceMs: 60_000, monitorEveryMs: 50 });
  await executor.ready;
});
afterAll(async () => {
  await liveness?.remove('ghost-t');
});

it('times out, not retries, a run whose worker is declared lost after its start-to-close deadline passed', { timeout: 20_000 }, async () => {
  // A worker that beats and offers the action but never takes its work.
  await recordWorkerEvent(createWorkerRuntime(t.store), 'ghost-t', 'WorkerStarted', { actions: ['lad.late'], runtimes: ['node'], capacity: 10 });
  await liveness.beat({ workerId: 'ghost-t', actions: ['lad.late'], runtimes: ['node'], capacity: 10, inFlight: 0, draining: false }, { starting: true });
  const { executionId } = await runtime.submit({ action: 'lad.late', input: null, maxAttempts: 3 });
  const read = () => t.store.readStream(executionStreamId(executionId));
  await expect.poll(async () => (await read()).some((e) => e.type === 'ExecutionHandedOff'), { timeout: 10_000 }).toBe(true);
  const deadline = new Date(Date.now() + 100).toISOString();
  await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1, deadline }, by: 'worker:ghost-t' });
  await new Promise((r) => setTimeout(r, 150)); // past the deadline, then the worker goes silent
  await t.db.pool.query(`UPDATE baton_worker_liveness SET heartbeat_at = now() - interval '10 seconds' WHERE worker_id = 'ghost-t'`);
  await expect.poll(async () => (await read()).at(-1)?.type, { timeout: 10_000 }).toBe('ExecutionTimedOut');
  const events = await read();
  expect(events.map((e) => e.type)).not.toContain('OwnershipReclaimed');
  expect(events.at(-1)).toMatchObject({ data: { limit: 'start-to-close', deadline }, metadata: { by: 'executor' } });
});
