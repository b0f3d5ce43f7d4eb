// A worker draining (SIGTERM) still runs what executors handed it before they saw it drain: QA
// saw handoffs land 11 ms after WorkerDraining under load, and a consumer stopped at once left
// each to its schedule-to-start reclaim, which cost an attempt (with maxAttempts 1, abandoned).
import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { builtinActions } from '../../src/actions/builtin.ts';
import { createActionRegistry } from '../../src/actions/registry.ts';
import { createLivenessStore } from '../../src/liveness/liveness-store.ts';
import { silentLogger } from '../../src/log.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import { startWorkerHost } from '../../src/worker/worker-host.ts';
import { untilDeliveriesQuiet } from '../../src/worker/drain-settle.ts';
import { workerStreamId } from '../../schemas/worker-events.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { useTestStore } from '../support/test-store.ts';
import { until } from '../support/until.ts';

const t = useTestStore();

it('a handoff that lands while the worker drains is run by it, not stranded', async () => {
  const transport = createPostgresWorkTransport(t.db.pool);
  const runtime = createExecutionRuntime(t.store);
  const workerId = `w-drain-${randomUUID().slice(0, 8)}`;
  const host = await startWorkerHost({
    workerId, store: t.store, runtime, transport, liveness: createLivenessStore(t.db.pool), actions: createActionRegistry(builtinActions), capacity: 2, log: silentLogger(),
    // Long enough that the handoff below surely lands within it on a loaded machine.
    drainSettle: { minMs: 3_000 },
  });
  try {
    const stopped = host.stop('SIGTERM');
    await until('WorkerDraining', async () => (await t.store.readStream(workerStreamId(workerId))).some((e) => e.type === 'WorkerDraining'));
    // As an executor's pass that had not yet seen the drain hands it work.
    const { executionId } = await runtime.submit({ action: 'core.noop', maxAttempts: 1 });
    const handoff = await runtime.dispatch(executionId, { type: 'ExecutionHandedOff', data: { workerId, attempt: 1, deadline: new Date(Date.now() + 600_000).toISOString() }, by: 'executor' });
    await transport.publish([{ messageId: randomUUID(), executionId, workerId, runtime: 'node', action: 'core.noop', attempt: 1, handoffRevision: String(handoff.revision), publishedAt: new Date().toISOString() }]);
    await stopped;
    const types = (await t.store.readStream(executionStreamId(executionId))).map((e) => e.type);
    expect(types).toEqual(['ExecutionRequested', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCompleted']);
    expect((await t.store.readStream(workerStreamId(workerId))).map((e) => e.type).slice(-2)).toEqual(['WorkerDraining', 'WorkerStopped']);
  } finally {
    await host.stop();
    await transport.close();
  }
});

it('settles: an idle worker after the minimum, a busy one once deliveries have been quiet, never past the maximum', async () => {
  const never = new AbortController().signal;
  const timed = async (last: () => number, o: Parameters<typeof untilDeliveriesQuiet>[2]) => {
    const began = performance.now();
    await untilDeliveriesQuiet(last, never, o);
    return performance.now() - began;
  };
  // Idle: the minimum, not the quiet period.
  expect(await timed(() => -Infinity, { minMs: 50, quietMs: 400, maxMs: 2_000 })).toBeLessThan(350);
  // A delivery every 20 ms for 300 ms: it waits for the quiet period after the last.
  const began = performance.now();
  let lastAt = performance.now();
  const ticking = setInterval(() => (performance.now() - began <= 300 ? (lastAt = performance.now()) : clearInterval(ticking)), 20);
  expect(await timed(() => lastAt, { minMs: 0, quietMs: 200, maxMs: 5_000 })).toBeGreaterThanOrEqual(300 + 200 - 30);
  // Deliveries that never stop: the maximum.
  expect(await timed(() => performance.now(), { minMs: 0, quietMs: 200, maxMs: 400 })).toBeLessThan(1_000);
  // A shutdown that aborts: at once.
  const ac = new AbortController();
  ac.abort();
  const t0 = performance.now();
  await untilDeliveriesQuiet(() => performance.now(), ac.signal);
  expect(performance.now() - t0).toBeLessThan(100);
});
