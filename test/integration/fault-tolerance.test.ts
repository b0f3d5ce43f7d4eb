// The executor's monitor and the worker's own limits, in one process against a real Postgres
// (Postgres work queue), with short timeouts: schedule-to-start reclaim and retry elsewhere,
// abandoning after the last attempt, lost workers, start-to-close and heartbeat timeouts
// (by the worker, and by the executor when the worker is gone), and per-action retry policy.
import pino from 'pino';
import { z } from 'zod';
import { beforeAll, describe, expect, it } from 'vitest';
import { builtinActions, createActionRegistry, defineAction, ActionError } from '../../src/actions/index.ts';
import { startExecutor, type Executor } from '../../src/executor/executor.ts';
import { createLivenessStore, type LivenessStore } from '../../src/liveness/liveness-store.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { fromStored } from '../../src/replay/history.ts';
import { standingsOf } from '../../src/runtime/dead-letter-standing.ts';
import { timeline } from '../../src/replay/inspect.ts';
import { isFinal } from '../../actors/execution.machine.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import type { WorkTransport } from '../../src/transport/work-transport.ts';
import { createWorkerRuntime, recordWorkerEvent } from '../../src/runtime/worker-kind.ts';
import { startWorkerHost, type WorkerHost } from '../../src/worker/worker-host.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { workerStreamId, type ActionPolicy } from '../../schemas/worker-events.ts';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';
import { useTestStore } from '../support/test-store.ts';

const log = pino({ level: 'silent' });

const actions = createActionRegistry([
  ...builtinActions,
  defineAction({ name: 'ft.slow', input: z.object({ ms: z.number() }), timeoutMs: 200, run: ({ ms }, ctx) => new Promise((r) => { const t = setTimeout(r, ms); ctx.signal.addEventListener('abort', () => clearTimeout(t)); }) }),
  defineAction({ name: 'ft.silent', input: z.null(), heartbeatTimeoutMs: 200, run: (_, ctx) => new Promise((r) => { const t = setTimeout(r, 3_000); ctx.signal.addEventListener('abort', () => clearTimeout(t)); }) }),
  defineAction({
    name: 'ft.doomed',
    input: z.null(),
    retry: { maxAttempts: 2, initialIntervalMs: 10, multiplier: 1, maxIntervalMs: 10 },
    // Retry-policy cases, not reclaim ones: the executor's 300 ms schedule-to-start limit below
    // reclaimed a retry on a loaded CI machine (a worker 300 ms late to start attempt 2).
    scheduleToStartTimeoutMs: 10_000,
    run: (_, ctx) => {
      throw new ActionError(`attempt ${ctx.attempt} failed`, { retryable: true });
    },
  }),
  // Results Postgres cannot store: a NUL, and nesting past the JSON depth limit.
  defineAction({ name: 'ft.nul-result', input: z.null(), run: () => ({ text: 'a\u0000b' }) }),
  defineAction({
    name: 'ft.deep-result',
    input: z.null(),
    run: () => {
      let v: unknown = 1;
      for (let i = 0; i < 5_000; i++) v = [v];
      return v;
    },
  }),
  defineAction({
    name: 'ft.flaky',
    input: z.null(),
    retry: { maxAttempts: 3, initialIntervalMs: 40, multiplier: 2, maxIntervalMs: 1_000 },
    scheduleToStartTimeoutMs: 10_000, // as ft.doomed's
    run: (_, ctx) => {
      if (ctx.attempt < 3) throw new ActionError(`attempt ${ctx.attempt} failed`, { type: 'Flaky', retryable: true });
      return { attempt: ctx.attempt };
    },
  }),
]);

describe('fault tolerance (executor monitor and worker limits)', () => {
  const t = useTestStore({
    max: 20,
    beforeClose: async () => {
      await Promise.all(workers.map((w) => w.stop()));
      await executor.stop();
      await transport.close();
    },
  });
  let runtime: ExecutionRuntime;
  let liveness: LivenessStore;
  let transport: WorkTransport;
  let executor: Executor;
  const workers: WorkerHost[] = [];

  /** A worker that is alive (it beats) and offers everything, but never takes its work. */
  async function ghost(workerId: string, offers = ['core.noop', 'core.echo'], policies?: Record<string, ActionPolicy>) {
    await recordWorkerEvent(createWorkerRuntime(t.store), workerId, 'WorkerStarted', { actions: offers, runtimes: ['node'], capacity: 1000, ...(policies && { policies }) });
    await liveness.beat({ workerId, actions: offers, runtimes: ['node'], capacity: 1000, inFlight: 0, draining: false }, { starting: true });
  }

  async function until(what: string, id: string, done: (events: StoredEvent[]) => boolean, ms = 10_000): Promise<StoredEvent[]> {
    const end = Date.now() + ms;
    for (;;) {
      const events = await t.store.readStream(executionStreamId(id));
      if (done(events)) return events;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}: ${events.map((e) => `${e.type}(${String(e.metadata.by)})`).join(' → ')}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  /** Final as the machine sees it (a retryable failure with attempts left is not). */
  const final = (events: StoredEvent[]) => events.length > 0 && timeline('x', events.map(fromStored)).at(-1)!.final;
  const types = (events: StoredEvent[]) => events.map((e) => e.type);

  beforeAll(async () => {
    runtime = createExecutionRuntime(t.store);
    liveness = createLivenessStore(t.db.pool);
    transport = createPostgresWorkTransport(t.db.pool);
    executor = startExecutor({
      store: t.store,
      transport,
      workers: liveness,
      log,
      scheduleToStartMs: 300,
      staleAfterMs: 1_500,
      timeoutGraceMs: 100,
      monitorEveryMs: 50,
      retryBackoff: { initialMs: 20, multiplier: 2, maxMs: 200 },
    });
    await executor.ready;
  });

  it('reclaims a handoff not started in time, then abandons it after the last attempt with a reason a person understands', async () => {
    await ghost('ghost-a');
    const { executionId } = await runtime.submit({ action: 'core.noop', input: null, maxAttempts: 1 });
    const events = await until('abandonment', executionId, final);
    expect(types(events)).toEqual(['ExecutionRequested', 'ExecutionHandedOff', 'OwnershipReclaimed', 'ExecutionAbandoned']);
    expect(events[2]!.data).toMatchObject({ reason: 'schedule-to-start', workerId: 'ghost-a', attempt: 1 });
    expect((events[3]!.data as { reason: string }).reason).toBe(
      'gave up after 1 of 1 attempts; last: reclaimed: worker ghost-a did not start attempt 1 before its schedule-to-start deadline',
    );
    await liveness.remove('ghost-a');
  });

  it('retries a reclaimed handoff on a different worker, with the reason in the history', async () => {
    await ghost('ghost-b');
    const { executionId } = await runtime.submit({ action: 'core.echo', input: { x: 1 }, maxAttempts: 3 });
    await until('the reclaim', executionId, (e) => e.some((x) => x.type === 'OwnershipReclaimed'));
    workers.push(await startWorkerHost({ workerId: 'real-b', store: t.store, runtime, transport, liveness, actions, capacity: 4, log, heartbeatIntervalMs: 200 }));
    const events = await until('completion', executionId, final);
    const handoffs = events.filter((e) => e.type === 'ExecutionHandedOff').map((e) => (e.data as { workerId: string }).workerId);
    expect(handoffs[0]).toBe('ghost-b');
    expect(handoffs.at(-1)).toBe('real-b'); // ghost-b is still alive and less loaded, but avoided
    expect(events.at(-1)!.type).toBe('ExecutionCompleted');
    const retry = events.find((e) => e.type === 'ExecutionRetryScheduled')!;
    expect((retry.data as { reason: string }).reason).toMatch(/ghost-b did not start attempt 1/);
    await liveness.remove('ghost-b');
  });

  it('declares a worker with a stale heartbeat lost and reclaims what it held', async () => {
    await ghost('ghost-c');
    const { executionId } = await runtime.submit({ action: 'core.noop', input: null, maxAttempts: 1 });
    await until('the handoff', executionId, (e) => e.some((x) => x.type === 'ExecutionHandedOff' && (x.data as { workerId: string }).workerId === 'ghost-c'));
    // The worker starts the run, then goes silent: its heartbeat ages past the limit.
    await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:ghost-c' });
    await t.db.pool.query(`UPDATE baton_worker_liveness SET heartbeat_at = now() - interval '10 seconds' WHERE worker_id = 'ghost-c'`);
    const events = await until('the reclaim', executionId, final);
    expect(events.find((e) => e.type === 'OwnershipReclaimed')!.data).toMatchObject({ reason: 'worker-lost', workerId: 'ghost-c' });
    const workerEvents = await t.store.readStream(workerStreamId('ghost-c'));
    expect(workerEvents.at(-1)).toMatchObject({ type: 'WorkerLost', metadata: { by: 'executor' } });
    expect((workerEvents.at(-1)!.data as { reason: string }).reason).toMatch(/^no heartbeat for \d+ s \(the limit is 2 s\)$/);
    // A lost worker that comes back is fenced: its appends are refused.
    await expect(runtime.dispatch(executionId, { type: 'ExecutionCompleted', data: { result: null }, by: 'worker:ghost-c' })).rejects.toThrow(/refused/);
    await liveness.remove('ghost-c');
  });

  it('reclaims at once what a worker held when a new process announces itself under its id, without waiting for staleness', async () => {
    await ghost('ghost-r', ['ft.restarted']);
    const { executionId } = await runtime.submit({ action: 'ft.restarted', input: null, maxAttempts: 2 });
    await until('the handoff', executionId, (e) => e.some((x) => x.type === 'ExecutionHandedOff'));
    await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:ghost-r' });
    const restartedAt = Date.now();
    await ghost('ghost-r', ['ft.restarted']); // kill -9 and restart: the old process never said it stopped
    const events = await until('the reclaim', executionId, (e) => e.some((x) => x.type === 'OwnershipReclaimed'), 5_000);
    // Its fresh heartbeat keeps it from going stale for 1.5 s: this is not the lost-worker path.
    expect(events.find((e) => e.type === 'OwnershipReclaimed')!.data).toEqual({ reason: 'worker-restarted', workerId: 'ghost-r', attempt: 1 });
    expect(Date.now() - restartedAt).toBeLessThan(1_500);
    const retried = await until('the retry', executionId, (e) => e.some((x) => x.type === 'ExecutionRetryScheduled'));
    expect((retried.find((e) => e.type === 'ExecutionRetryScheduled')!.data as { reason: string }).reason).toMatch(/^reclaimed: worker ghost-r restarted while it held attempt 1/);
    await until('the end', executionId, final);
    await liveness.remove('ghost-r');
  });

  it('reclaims at once a handoff that landed on a worker after it stopped cleanly (reason drain), not at its schedule-to-start deadline', async () => {
    await ghost('ghost-s', ['ft.stopped'], { 'ft.stopped': { scheduleToStartTimeoutMs: 20_000 } });
    const { executionId } = await runtime.submit({ action: 'ft.stopped', input: null, maxAttempts: 2 });
    await until('the handoff', executionId, (e) => e.some((x) => x.type === 'ExecutionHandedOff'));
    // The worker drains and stops as a SIGTERM'd one does, the handoff never delivered to it.
    const streams = createWorkerRuntime(t.store);
    await recordWorkerEvent(streams, 'ghost-s', 'WorkerDraining', { reason: 'SIGTERM' });
    await liveness.remove('ghost-s');
    await recordWorkerEvent(streams, 'ghost-s', 'WorkerStopped', { reason: 'SIGTERM' });
    // Within 5 s: its schedule-to-start deadline is 20 s away.
    const events = await until('the reclaim', executionId, (e) => e.some((x) => x.type === 'OwnershipReclaimed'), 5_000);
    expect(events.find((e) => e.type === 'OwnershipReclaimed')!.data).toEqual({ reason: 'drain', workerId: 'ghost-s', attempt: 1 });
    // The action never ran: the same attempt waits for its next handoff (machine v8), no retry spent on it.
    const back = await runtime.load(executionId);
    expect(back.snapshot.value).toBe('Requested');
    expect(back.snapshot.context).toMatchObject({ attempt: 1, retryPending: false });
    await new Promise((r) => setTimeout(r, 300)); // scheduling passes and the monitor have run
    expect(types(await t.store.readStream(executionStreamId(executionId)))).not.toContain('ExecutionRetryScheduled');
    await runtime.dispatch(executionId, { type: 'ExecutionCancelled', data: { reason: 'done with it' }, by: 'executor' });
  });

  it('gives no work to a worker whose stream says lost, even while it beats again, until it announces itself again', async () => {
    await ghost('ghost-l', ['ft.lost']);
    await recordWorkerEvent(createWorkerRuntime(t.store), 'ghost-l', 'WorkerLost', { lastHeartbeatAt: new Date().toISOString(), reason: 'declared lost by a test' }, { by: 'executor' });
    await liveness.beat({ workerId: 'ghost-l', actions: ['ft.lost'], runtimes: ['node'], capacity: 1000, inFlight: 0, draining: false });
    const { executionId } = await runtime.submit({ action: 'ft.lost', input: null, maxAttempts: 1 });
    // Long enough for scheduling passes (each event, and a safety pass every second) to have run.
    await new Promise((r) => setTimeout(r, 1_200));
    expect(types(await t.store.readStream(executionStreamId(executionId)))).toEqual(['ExecutionRequested']);
    await ghost('ghost-l', ['ft.lost']); // back: WorkerStarted, a new incarnation
    const events = await until('the handoff', executionId, (e) => e.some((x) => x.type === 'ExecutionHandedOff'));
    expect(events.find((e) => e.type === 'ExecutionHandedOff')!.data).toMatchObject({ workerId: 'ghost-l', attempt: 1 });
    await until('the end', executionId, final);
    await liveness.remove('ghost-l');
  });

  it('times out a run whose worker went quiet past its start-to-close deadline (the executor does it)', async () => {
    await ghost('ghost-d');
    const { executionId } = await runtime.submit({ action: 'core.noop', input: null });
    await until('the handoff', executionId, (e) => e.some((x) => x.type === 'ExecutionHandedOff'));
    const deadline = new Date(Date.now() + 200).toISOString();
    await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1, deadline }, by: 'worker:ghost-d' });
    const events = await until('the timeout', executionId, final);
    expect(events.at(-1)).toMatchObject({ type: 'ExecutionTimedOut', data: { limit: 'start-to-close', deadline }, metadata: { by: 'executor' } });
    await liveness.remove('ghost-d');
  });

  it('a worker times out its own run at the action start-to-close and heartbeat limits', async () => {
    if (workers.length === 0) workers.push(await startWorkerHost({ workerId: 'real-e', store: t.store, runtime, transport, liveness, actions, capacity: 4, log, heartbeatIntervalMs: 200 }));
    const slow = await runtime.submit({ action: 'ft.slow', input: { ms: 2_000 } });
    const silent = await runtime.submit({ action: 'ft.silent', input: null });
    const slowEvents = await until('slow timing out', slow.executionId, final);
    const silentEvents = await until('silent timing out', silent.executionId, final);
    const started = slowEvents.find((e) => e.type === 'ExecutionStarted')!;
    expect(slowEvents.at(-1)).toMatchObject({ type: 'ExecutionTimedOut', data: { limit: 'start-to-close', deadline: (started.data as { deadline: string }).deadline } });
    expect(String(slowEvents.at(-1)!.metadata.by)).toMatch(/^worker:/);
    expect(silentEvents.at(-1)).toMatchObject({ type: 'ExecutionTimedOut', data: { limit: 'heartbeat' } });
  });

  it('abandons an execution whose work message was dead-lettered, saying so', async () => {
    // Only ghost-f offers this action, and its schedule-to-start limit is long, so the dead
    // letter (not a reclaim) is what ends the first attempt.
    await ghost('ghost-f', ['ft.unrunnable'], { 'ft.unrunnable': { scheduleToStartTimeoutMs: 20_000 } });
    // ghost-f takes its messages but every run throws before settling: after 2 deliveries the
    // transport gives up on the message.
    const impatient = createPostgresWorkTransport(t.db.pool, { ackWaitMs: 200, maxDeliver: 2 });
    const consumer = await impatient.consume('ghost-f', async () => {
      throw new Error('cannot run anything');
    }, { concurrency: 1 });
    try {
      const { executionId } = await runtime.submit({ action: 'ft.unrunnable', input: null, maxAttempts: 3 });
      const events = await until('abandonment', executionId, final);
      expect(types(events).slice(-2)).toEqual(['OwnershipReclaimed', 'ExecutionAbandoned']);
      expect(events.at(-2)!.data).toMatchObject({ reason: 'dead-letter', workerId: 'ghost-f', attempt: 1 });
      expect((events.at(-1)!.data as { reason: string }).reason).toMatch(/^its work message for worker ghost-f was dead-lettered \(not acknowledged after 2 deliveries\); see `baton dlq show [0-9a-f-]+`$/);
      // The dead letter it was abandoned for still stands: it is the record of why (dead-letter-standing.ts).
      const messageId = /baton dlq show ([0-9a-f-]+)/.exec((events.at(-1)!.data as { reason: string }).reason)![1]!;
      const [standing] = await standingsOf(runtime, [(await impatient.getDeadLetter(messageId))!]);
      expect(standing).toEqual({ standing: 'outstanding', reason: 'its execution was abandoned for it (attempt 1)', execution: { status: 'Abandoned', attempt: 1 } });
    } finally {
      await consumer.stop();
      await impatient.close();
      await liveness.remove('ghost-f');
    }
  });

  it('caps attempts at the action’s own retry.maxAttempts, whatever the submission asked for', async () => {
    const { executionId } = await runtime.submit({ action: 'ft.flaky', input: null, maxAttempts: 2 });
    const capped = await runtime.submit({ action: 'ft.doomed', input: null, maxAttempts: 10 });
    const events = await until('the last attempt failing', capped.executionId, final);
    expect(events.filter((e) => e.type === 'ExecutionStarted')).toHaveLength(2);
    // The limit is recorded when the execution is scheduled, so the machine itself ends it: the
    // last attempt failed (before machine version 4 the executor abandoned it after the fact).
    expect(events.filter((e) => e.type === 'ExecutionHandedOff').map((e) => (e.data as { maxAttempts?: number }).maxAttempts)).toEqual([2, 2]);
    expect(events.at(-1)).toMatchObject({ type: 'ExecutionFailed', data: { error: { message: 'attempt 2 failed' }, retryable: true } });
    const other = await until('the other one', executionId, final);
    expect(other.filter((e) => e.type === 'ExecutionStarted'), 'the submission lowered the action\'s 3 to 2').toHaveLength(2);
    expect(other.at(-1)!.type).toBe('ExecutionFailed');
  });

  it('fails a run whose result cannot be stored, at once and for good, saying why', async () => {
    for (const [action, why] of [
      ['ft.nul-result', /^the action's result cannot be stored: result\.text: must not contain a NUL character/],
      ['ft.deep-result', /^the action's result cannot be stored: result\.0\.0.*nested deeper than 100 levels/],
    ] as const) {
      const { executionId } = await runtime.submit({ action, input: null, maxAttempts: 3 });
      const events = await until('the failure', executionId, final);
      expect(events.filter((e) => e.type === 'ExecutionStarted'), action).toHaveLength(1);
      expect(events.at(-1), action).toMatchObject({ type: 'ExecutionFailed', data: { retryable: false, error: { type: 'UnstorableResult', message: expect.stringMatching(why) } } });
    }
  });

  it('retries with the action’s own retry policy, each retry recorded with its reason', async () => {
    const { executionId } = await runtime.submit({ action: 'ft.flaky', input: null, maxAttempts: 3 });
    const events = await until('completion', executionId, final);
    const story = events.map((e) => `${e.type}(${String(e.metadata.by)}) ${JSON.stringify(e.data)}`).join('\n');
    expect(events.at(-1), story).toMatchObject({ type: 'ExecutionCompleted', data: { result: { attempt: 3 } } });
    const retries = events.filter((e) => e.type === 'ExecutionRetryScheduled');
    expect(retries.map((e) => (e.data as { reason: string }).reason)).toEqual(['attempt 1 failed: attempt 1 failed', 'attempt 2 failed: attempt 2 failed']);
    // 40 ms, then 80 ms: the action's policy, not the executor's default (20 ms, 40 ms). The
    // executor reads its clock for retryAt a moment before the runtime stamps occurredAt.
    const delays = retries.map((e) => Date.parse((e.data as { retryAt: string }).retryAt) - Date.parse(String(e.metadata.occurredAt)));
    expect(delays[0]).toBeGreaterThan(30);
    expect(delays[0]).toBeLessThanOrEqual(40);
    expect(delays[1]).toBeGreaterThan(70);
    expect(delays[1]).toBeLessThanOrEqual(80);
  });
});
