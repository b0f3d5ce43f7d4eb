// Cancellation in every state, end to end with a real executor and worker against Postgres:
// before the handoff the executor cancels; after it the worker is rung, its run's AbortSignal
// fires and it records ExecutionCancelled (over the Postgres work queue and over NATS); a
// handoff the worker holds but never started is cancelled by the worker; a worker that is
// lost (or never starts) leaves it to the reclaim path, which ends it as Cancelled, not
// retried; a finished execution is too late. `baton cancel` says each of these.
import pino from 'pino';
import { z } from 'zod';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { builtinActions, createActionRegistry, defineAction } from '../../src/actions/index.ts';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';
import { startExecutor, type Executor } from '../../src/executor/executor.ts';
import { createLivenessStore, type LivenessStore } from '../../src/liveness/liveness-store.ts';
import { cancelExecution } from '../../src/runtime/cancel.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { connectNats, createNatsWorkTransport } from '../../src/transport/nats/index.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import type { WorkTransport } from '../../src/transport/work-transport.ts';
import { createWorkerRuntime, recordWorkerEvent } from '../../src/runtime/worker-kind.ts';
import { startWorkerHost, type WorkerHost } from '../../src/worker/worker-host.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { runBaton } from '../support/cli.ts';
import { useTestStore } from '../support/test-store.ts';

const log = pino({ level: 'silent' });
/** Runs whose AbortSignal fired, and why. */
const aborted = new Map<string, unknown>();
const started = new Set<string>();

const actions = createActionRegistry([
  ...builtinActions,
  defineAction({
    name: 'cx.wait',
    input: z.null(),
    run: (_, ctx) =>
      new Promise((resolve) => {
        started.add(ctx.executionId);
        const timer = setTimeout(resolve, 60_000);
        ctx.signal.addEventListener('abort', () => {
          aborted.set(ctx.executionId, ctx.signal.reason);
          clearTimeout(timer);
        });
      }),
  }),
]);

const types = (events: StoredEvent[]) => events.map((e) => e.type);
const by = (e: StoredEvent | undefined) => e?.metadata.by;

describe.each(['postgres', 'nats'] as const)('cancellation (%s transport)', (kind) => {
  const t = useTestStore({
    max: 20,
    beforeClose: async () => {
      await worker?.stop();
      await executor?.stop();
      await transport?.close();
      for (const c of cleanups) await c();
    },
  });
  let runtime: ExecutionRuntime;
  let liveness: LivenessStore;
  let transport: WorkTransport;
  let executor: Executor;
  let worker: WorkerHost;
  const cleanups: (() => Promise<unknown>)[] = [];

  async function until(what: string, id: string, done: (events: StoredEvent[]) => boolean, ms = 10_000): Promise<StoredEvent[]> {
    const end = Date.now() + ms;
    for (;;) {
      const events = await t.store.readStream(executionStreamId(id));
      if (done(events)) return events;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}: ${events.map((e) => `${e.type}(${String(by(e))})`).join(' → ')}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  const ended = (events: StoredEvent[]) => events.at(-1)?.type === 'ExecutionCancelled' || events.at(-1)?.type === 'ExecutionCompleted';

  /** A worker that beats and offers `cx.ghost` but never takes work: it can hold a baton and go silent. */
  async function ghost(workerId: string) {
    await recordWorkerEvent(createWorkerRuntime(t.store), workerId, 'WorkerStarted', { actions: ['cx.ghost'], runtimes: ['node'], capacity: 100 });
    await liveness.beat({ workerId, actions: ['cx.ghost'], runtimes: ['node'], capacity: 100, inFlight: 0, draining: false }, { starting: true });
  }

  beforeAll(async () => {
    runtime = createExecutionRuntime(t.store);
    liveness = createLivenessStore(t.db.pool);
    if (kind === 'nats') {
      const url = inject('natsUrl');
      if (!url) throw new Error('NATS is not reachable: set BATON_NATS_URL (CI requires it)');
      const nc = await connectNats(url);
      const id = Math.random().toString(36).slice(2, 10);
      transport = await createNatsWorkTransport(nc, { streamName: `BATON_CANCEL_${id}`, subjectPrefix: `batoncancel.${id}` });
      cleanups.push(async () => {
        const jsm = await nc.jetstreamManager();
        await jsm.streams.delete(`BATON_CANCEL_${id}`).catch(() => undefined);
        await jsm.streams.delete(`BATON_CANCEL_${id}_DLQ`).catch(() => undefined);
        await nc.close();
      });
    } else {
      transport = createPostgresWorkTransport(t.db.pool);
    }
    executor = startExecutor({ store: t.store, transport, workers: liveness, log, scheduleToStartMs: 1_500, staleAfterMs: 1_500, monitorEveryMs: 50 });
    await executor.ready;
    worker = await startWorkerHost({ workerId: `real-${kind}`, store: t.store, runtime, transport, liveness, actions, capacity: 4, log, heartbeatIntervalMs: 200 });
  });

  it('Requested: the executor cancels it at once, and it is never scheduled', async () => {
    const { executionId } = await runtime.submit({ action: 'cx.nobody-offers-this', input: null });
    const r = await cancelExecution(runtime, executionId, 'not needed');
    expect(r).toMatchObject({ outcome: 'cancelled', status: 'Cancelled' });
    const events = await t.store.readStream(executionStreamId(executionId));
    expect(types(events)).toEqual(['ExecutionRequested', 'ExecutionCancelled']);
    expect(events[1]).toMatchObject({ data: { reason: 'not needed' }, metadata: { by: 'executor' } });
  });

  it('Requested between attempts (a retry backing off): cancelled at once, saying attempts had run', async () => {
    const { executionId } = await runtime.submit({ action: 'cx.nobody-offers-this', input: null, maxAttempts: 3 });
    const far = new Date(Date.now() + 3_600_000).toISOString();
    await runtime.dispatch(executionId, [
      { type: 'ExecutionHandedOff', data: { workerId: 'gone', attempt: 1, deadline: far, maxAttempts: 3 }, by: 'executor' },
      { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:gone' },
      { type: 'ExecutionFailed', data: { error: { message: 'flaky' }, retryable: true }, by: 'worker:gone' },
      { type: 'ExecutionRetryScheduled', data: { attempt: 2, retryAt: far, reason: 'backoff' }, by: 'executor' },
    ]);
    const r = await cancelExecution(runtime, executionId, 'not needed');
    expect(r).toEqual({ executionId, outcome: 'cancelled', status: 'Cancelled', message: `execution ${executionId} cancelled between attempts, while the executor held it (workers had held it once)` });
  });

  it('Running: the worker is rung, its run sees the AbortSignal, and it records ExecutionCancelled', async () => {
    const { executionId } = await runtime.submit({ action: 'cx.wait', input: null });
    await until('the run', executionId, (e) => e.some((x) => x.type === 'ExecutionStarted'));
    const t0 = Date.now();
    const r = await cancelExecution(runtime, executionId, 'user pressed stop');
    expect(r).toMatchObject({ outcome: 'cancel-requested', status: 'Running' });
    const events = await until('the cancel', executionId, ended);
    const latencyMs = Date.now() - t0;
    expect(types(events).slice(-2)).toEqual(['ExecutionCancelRequested', 'ExecutionCancelled']);
    expect(events.at(-1)).toMatchObject({ data: { reason: 'user pressed stop' }, metadata: { by: `worker:real-${kind}` } });
    expect(aborted.has(executionId)).toBe(true);
    expect(latencyMs).toBeLessThan(3_000); // one ring, not a timeout
    // Asking again is harmless and says it is over.
    expect(await cancelExecution(runtime, executionId, 'again')).toMatchObject({ outcome: 'too-late', status: 'Cancelled' });
  });

  it('Scheduled, not started: the worker holding the handoff cancels it instead of starting it', async () => {
    // Handed to the real worker by hand (the executor schedules nobody for this action), then cancelled.
    const { executionId } = await runtime.submit({ action: 'cx.unscheduled', input: null });
    const loaded = await runtime.load(executionId);
    await runtime.dispatch(
      executionId,
      [
        { type: 'SchedulingStarted', data: {}, by: 'executor' },
        { type: 'ExecutionHandedOff', data: { workerId: `real-${kind}`, attempt: 1, deadline: new Date(Date.now() + 60_000).toISOString() }, by: 'executor' },
      ],
      { known: loaded },
    );
    expect(await cancelExecution(runtime, executionId, 'before it started')).toMatchObject({ outcome: 'cancel-requested', status: 'Scheduled' });
    const events = await until('the cancel', executionId, ended);
    expect(types(events).slice(-2)).toEqual(['ExecutionCancelRequested', 'ExecutionCancelled']);
    expect(by(events.at(-1))).toBe(`worker:real-${kind}`);
    expect(started.has(executionId)).toBe(false);
  });

  it('a worker lost during the run: the reclaim path ends it as Cancelled, not retried', async () => {
    await ghost(`ghost-${kind}`);
    const { executionId } = await runtime.submit({ action: 'cx.ghost', input: null, maxAttempts: 3 });
    await until('the handoff', executionId, (e) => e.some((x) => x.type === 'ExecutionHandedOff'));
    await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: `worker:ghost-${kind}` });
    expect(await cancelExecution(runtime, executionId, 'stop, even though its worker died')).toMatchObject({ outcome: 'cancel-requested' });
    // The worker crashes: its heartbeat ages past the limit, nobody answers the ring.
    await t.db.pool.query(`UPDATE baton_worker_liveness SET heartbeat_at = now() - interval '10 seconds' WHERE worker_id = $1`, [`ghost-${kind}`]);
    const events = await until('the reclaim and the cancel', executionId, ended, 15_000);
    expect(types(events).slice(-3)).toEqual(['ExecutionCancelRequested', 'OwnershipReclaimed', 'ExecutionCancelled']);
    expect(events.at(-2)!.data).toMatchObject({ reason: 'worker-lost' });
    expect(events.at(-1)).toMatchObject({ data: { reason: 'stop, even though its worker died' }, metadata: { by: 'executor' } });
    expect(types(events)).not.toContain('ExecutionRetryScheduled');
    await liveness.remove(`ghost-${kind}`);
  });

  it('a handoff its worker never starts: the schedule-to-start reclaim ends it as Cancelled', async () => {
    await ghost(`idle-${kind}`);
    const { executionId } = await runtime.submit({ action: 'cx.ghost', input: null, maxAttempts: 3 });
    await until('the handoff', executionId, (e) => e.some((x) => x.type === 'ExecutionHandedOff'));
    expect(await cancelExecution(runtime, executionId, 'never mind')).toMatchObject({ outcome: 'cancel-requested', status: 'Scheduled' });
    const events = await until('the cancel', executionId, ended);
    expect(types(events).slice(-3)).toEqual(['ExecutionCancelRequested', 'OwnershipReclaimed', 'ExecutionCancelled']);
    expect(by(events.at(-1))).toBe('executor');
    await liveness.remove(`idle-${kind}`);
  });

  it('a finished execution is too late, and nothing is appended', async () => {
    const { executionId } = await runtime.submit({ action: 'core.noop', input: null });
    const done = await until('completion', executionId, ended);
    expect(await cancelExecution(runtime, executionId, 'late')).toEqual({
      executionId,
      outcome: 'too-late',
      status: 'Completed',
      message: `too late: execution ${executionId} already finished as Completed`,
    });
    expect(await t.store.readStream(executionStreamId(executionId))).toHaveLength(done.length);
  });

  it('`baton cancel` says what it did; one already Cancelled exits 0', async () => {
    const cli = (args: string[]) => runBaton(args, { databaseUrl: t.db.url });
    const running = (await runtime.submit({ action: 'cx.wait', input: null })).executionId;
    await until('the run', running, (e) => e.some((x) => x.type === 'ExecutionStarted'));
    const asked = await cli(['cancel', running, '--reason', 'from the CLI', '--wait', '--timeout', '10000']);
    expect(asked.stderr).toMatch(`is Running on worker real-${kind}: cancel requested`);
    expect(asked.stdout.trim()).toBe(`Cancelled (recorded by worker:real-${kind})`);
    expect(asked.code).toBe(0);
    // Already Cancelled is what was asked: a second caller (or a retry) exits 0 too, with or without --wait.
    for (const again of [['cancel', running], ['cancel', running, '--wait', '--timeout', '5000']]) {
      const late = await cli(again);
      expect(late.code, late.stderr).toBe(0);
      expect(late.stdout.trim()).toBe(`execution ${running} is already Cancelled`);
    }
    const missing = await cli(['cancel', '00000000-0000-4000-8000-000000000000']);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toMatch('execution or workflow 00000000-0000-4000-8000-000000000000 not found');
  });
});
