// A worker whose heartbeats cannot be stored (its database out of reach) stops its runs before
// executors may count it lost and retry them elsewhere (src/worker/out-of-touch.ts): the action's
// abort signal fires, and the baton is handed back (OwnershipReleased), not recorded as a failure.
// QA saw a worker cut off from Postgres keep running three executions while their next attempts
// ran on another worker. Here only the heartbeats fail (a liveness store that refuses them), so
// the release can be stored and read.
import pino from 'pino';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtinActions, createActionRegistry, defineAction } from '../../src/actions/index.ts';
import { startExecutor, type Executor } from '../../src/executor/executor.ts';
import { createLivenessStore, type LivenessStore } from '../../src/liveness/liveness-store.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import type { WorkTransport } from '../../src/transport/work-transport.ts';
import { startWorkerHost, type WorkerHost } from '../../src/worker/worker-host.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { useTestStore } from '../support/test-store.ts';
import { until } from '../support/until.ts';

const log = pino({ level: 'silent' });
const aborted: string[] = [];
const actions = createActionRegistry([
  ...builtinActions,
  defineAction({
    name: 'touch.long',
    input: z.null(),
    run: (_input, ctx) =>
      new Promise((_resolve, reject) =>
        ctx.signal.addEventListener('abort', () => {
          aborted.push(ctx.executionId);
          reject(ctx.signal.reason);
        }),
      ),
  }),
]);

describe('a worker out of touch with its database', () => {
  const t = useTestStore({ max: 20 });
  let transport: WorkTransport;
  let executor: Executor;
  let worker: WorkerHost;
  let cut = false;

  beforeAll(async () => {
    const liveness = createLivenessStore(t.db.pool);
    transport = createPostgresWorkTransport(t.db.pool);
    executor = startExecutor({ store: t.store, transport, workers: liveness, log, monitorEveryMs: 50 });
    await executor.ready;
    // Its beats refused while `cut`: what an unreachable database does to them.
    const failing: LivenessStore = { ...liveness, beat: (...args) => (cut ? Promise.reject(new Error('connect ECONNREFUSED')) : liveness.beat(...args)) };
    worker = await startWorkerHost({ workerId: 'touch', store: t.store, runtime: createExecutionRuntime(t.store), transport, liveness: failing, actions, capacity: 2, log, heartbeatIntervalMs: 200, staleAfterMs: 3_000 });
  });
  afterAll(async () => {
    cut = false;
    await worker?.stop();
    await executor?.stop();
    await transport?.close();
  });

  it('stops its runs one interval before the staleness limit and hands their batons back', { timeout: 60_000 }, async () => {
    const runtime = createExecutionRuntime(t.store);
    const { executionId } = await runtime.submit({ action: 'touch.long', input: null });
    const types = async () => (await t.store.readStream(executionStreamId(executionId))).map((e) => e.type);
    await until('the run to start', async () => (await types()).includes('ExecutionStarted'), 15_000);
    cut = true;
    const cutAt = Date.now();
    // Not at once: a blip of a beat or two is no reason to stop anything.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(aborted).toEqual([]);
    await until('the run to be stopped', async () => aborted.includes(executionId), 15_000);
    // A 3 s staleness limit and 200 ms beats: stopped ~2.8 s after the last stored beat, before executors could count it lost.
    expect(Date.now() - cutAt).toBeGreaterThan(2_000);
    expect(Date.now() - cutAt).toBeLessThan(6_000);
    await until('the baton to come back', async () => (await types()).includes('OwnershipReleased'), 15_000);
    const released = (await t.store.readStream(executionStreamId(executionId))).find((e) => e.type === 'OwnershipReleased')!;
    expect((released.data as { reason: string }).reason).toMatch(/^worker touch stored no heartbeat for \d+ s \(its database out of reach\) and stopped the run/);
    expect(await types()).not.toContain('ExecutionFailed');
  });
});
