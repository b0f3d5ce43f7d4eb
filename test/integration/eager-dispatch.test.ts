// Eager dispatch (src/worker/eager-dispatch.ts), end to end against Postgres: a handoff to a worker
// of the executor's own process carries that worker's ExecutionStarted in the same append (one
// transaction) and runs without a work message; a worker of another process still gets its work
// through the transport; a draining worker takes none and its drain waits for the eager runs it
// holds; a cancel request reaches an eager run; a start the worker can no longer run is handed
// back, never left Running; and a start the machine refuses falls back to the transport.
import pino from 'pino';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActionRegistry, defineAction } from '../../src/actions/index.ts';
import { loadConfig } from '../../src/config.ts';
import type { EventStore, StoredEvent } from '../../src/eventstore/event-store.ts';
import { startExecutor, type Executor } from '../../src/executor/executor.ts';
import { createLivenessStore, type LivenessStore } from '../../src/liveness/liveness-store.ts';
import { cancelExecution } from '../../src/runtime/cancel.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import type { WorkTransport } from '../../src/transport/work-transport.ts';
import { eagerIntake, LocalWorkers } from '../../src/worker/eager-dispatch.ts';
import { startWorkerHost, type WorkerHost } from '../../src/worker/worker-host.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { useTestStore } from '../support/test-store.ts';

const log = pino({ level: 'silent' });
const types = (events: StoredEvent[]) => events.map((e) => e.type);

/** Gates the `eg.slow` runs: each waits until the test opens its gate (or its signal aborts). */
const gates = new Map<string, () => void>();
const opened = (executionId: string) => gates.get(executionId)?.();

const localActions = createActionRegistry([
  defineAction({ name: 'eg.echo', input: z.object({ n: z.number() }), timeoutMs: 45_000, run: ({ n }) => ({ n }) }),
  defineAction({
    name: 'eg.slow',
    input: z.null(),
    run: (_, ctx) =>
      new Promise((resolve, reject) => {
        gates.set(ctx.executionId, () => resolve('done'));
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error));
      }),
  }),
]);
const remoteActions = createActionRegistry([defineAction({ name: 'eg.remote', input: z.null(), run: () => 'remote' })]);

describe('eager dispatch', () => {
  const t = useTestStore({ max: 20 });
  let runtime: ExecutionRuntime;
  let liveness: LivenessStore;
  let transport: WorkTransport;
  let executor: Executor;
  let local: WorkerHost;
  let remote: WorkerHost;
  const localWorkers = new LocalWorkers();
  /** Executions whose work message the executor published. */
  const published = new Set<string>();
  /** Per execution stream, the `othersWait` its handoff's append was given (AppendNotice). */
  const handoffNotices = new Map<string, boolean | undefined>();

  beforeAll(async () => {
    runtime = createExecutionRuntime(t.store);
    liveness = createLivenessStore(t.db.pool);
    const real = createPostgresWorkTransport(t.db.pool);
    transport = {
      ...real,
      publish: (messages) => {
        for (const m of messages) published.add(m.executionId);
        return real.publish(messages);
      },
    };
    // The executor's appends, as its store sees them: who is told to wait for its handoffs.
    const store: EventStore = {
      ...t.store,
      appendMany: (requests, o) => {
        for (const r of requests) if (r.events.some((e) => e.type === 'ExecutionHandedOff')) handoffNotices.set(r.streamId, o?.othersWait);
        return t.store.appendMany(requests, o);
      },
    };
    executor = startExecutor({ store, transport, workers: liveness, log, localWorkers, monitorEveryMs: 50 });
    await executor.ready;
    local = await startWorkerHost({ workerId: 'eg-local', store: t.store, runtime, transport, liveness, actions: localActions, capacity: 8, log, localWorkers, heartbeatIntervalMs: 200 });
    // Another process's worker, as far as this executor knows: no intake here.
    remote = await startWorkerHost({ workerId: 'eg-remote', store: t.store, runtime: createExecutionRuntime(t.store), transport, liveness, actions: remoteActions, capacity: 8, log, heartbeatIntervalMs: 200 });
  });
  afterAll(async () => {
    for (const id of gates.keys()) opened(id);
    await local?.stop();
    await remote?.stop();
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
  const last = (type: string) => (events: StoredEvent[]) => events.at(-1)?.type === type;
  const transactionOf = async (e: StoredEvent) =>
    (await t.db.pool.query<{ x: string }>('SELECT transaction_id::text AS x FROM baton_events WHERE global_position = $1', [String(e.globalPosition)])).rows[0]!.x;

  it('a handoff to a worker of this process starts in the same append and runs without a work message', async () => {
    const before = Date.now();
    const eagerRuns = localWorkers.runs;
    const { executionId } = await runtime.submit({ action: 'eg.echo', input: { n: 7 } });
    const events = await until(executionId, last('ExecutionCompleted'));
    expect(types(events)).toEqual(['ExecutionRequested', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCompleted']);
    const [, handoff, start, completed] = events;
    expect(handoff).toMatchObject({ data: { workerId: 'eg-local' }, metadata: { by: 'executor' } });
    // The worker's own start, with its action's limit, committed with the handoff.
    expect(start).toMatchObject({ data: { attempt: (handoff!.data as { attempt: number }).attempt }, metadata: { by: 'worker:eg-local' } });
    const deadline = Date.parse((start!.data as { deadline: string }).deadline);
    expect(deadline).toBeGreaterThanOrEqual(before + 45_000);
    expect(deadline).toBeLessThanOrEqual(Date.now() + 45_000);
    const transactions = await Promise.all([handoff!, start!].map(transactionOf));
    expect(new Set(transactions).size).toBe(1);
    expect(completed).toMatchObject({ data: { result: { n: 7 } }, metadata: { by: 'worker:eg-local' } });
    expect(published.has(executionId)).toBe(false);
    expect(localWorkers.runs).toBe(eagerRuns + 1);
    // Its worker is here: nobody elsewhere waits for the handoff, so its NOTIFY follows the commit.
    expect(handoffNotices.get(executionStreamId(executionId))).toBe(false);
  });

  it('a handoff to a worker of another process goes through the transport, and that worker starts it', async () => {
    const { executionId } = await runtime.submit({ action: 'eg.remote', input: null });
    const events = await until(executionId, last('ExecutionCompleted'));
    expect(types(events)).toEqual(['ExecutionRequested', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCompleted']);
    expect(events[2]).toMatchObject({ metadata: { by: 'worker:eg-remote' } });
    expect(await transactionOf(events[2]!)).not.toBe(await transactionOf(events[1]!));
    expect(published.has(executionId)).toBe(true);
    // Its worker hears of it through the transport, published after the commit.
    expect(handoffNotices.get(executionStreamId(executionId))).toBe(false);
  });

  it('a cancel request reaches an eager run: its signal aborts and it ends Cancelled', async () => {
    const { executionId } = await runtime.submit({ action: 'eg.slow', input: null });
    await until(executionId, (e) => e.some((x) => x.type === 'ExecutionStarted'));
    expect(published.has(executionId)).toBe(false);
    await cancelExecution(runtime, executionId, 'not needed after all');
    const events = await until(executionId, last('ExecutionCancelled'));
    expect(events.at(-1)).toMatchObject({ data: { reason: 'not needed after all' }, metadata: { by: 'worker:eg-local' } });
  });

  it('a start its worker can no longer run (its drain stopped waiting before the commit) is handed back for a retry, not left Running', async () => {
    const { executionId } = await runtime.submit({ action: 'eg.unoffered', input: null, maxAttempts: 2 });
    // The executor places nobody for this action: hand it off and start it as the executor would.
    const started = await runtime.dispatch(executionId, [
      { type: 'SchedulingStarted', data: {}, by: 'executor' },
      { type: 'ExecutionHandedOff', data: { workerId: 'eg-gone', attempt: 1, deadline: new Date(Date.now() + 60_000).toISOString() }, by: 'executor' },
      { type: 'ExecutionStarted', data: { attempt: 1, deadline: new Date(Date.now() + 60_000).toISOString() }, by: 'worker:eg-gone' },
    ]);
    const runs = new Set<Promise<void>>();
    const deps = { workerId: 'eg-gone', runtime, actions: localActions, log, shutdown: new AbortController().signal, running: new Set<string>() };
    const intake = eagerIntake({ deps, actions: localActions, accepting: () => false, closed: () => true, runs, log });
    const message = { messageId: 'm', executionId, workerId: 'eg-gone', runtime: 'node', action: 'eg.unoffered', attempt: 1, handoffRevision: String(started.revision - 1n), publishedAt: new Date().toISOString() };
    intake.run(message, started);
    await Promise.all(runs);
    const events = await t.store.readStream(executionStreamId(executionId));
    expect(types(events).slice(-2)).toEqual(['ExecutionStarted', 'OwnershipReleased']);
    expect(events.at(-1)).toMatchObject({ metadata: { by: 'worker:eg-gone' } });
    expect(runs.size).toBe(0);
    // And a draining worker's intake starts nothing.
    expect(intake.start({ action: 'eg.echo', attempt: 1, actionVersion: undefined, cancelRequested: false })).toBeUndefined();
  });

  it('a start stored just as its worker began to drain still runs, and spends no attempt on a hand-back', async () => {
    const { executionId } = await runtime.submit({ action: 'eg.unoffered', input: null, maxAttempts: 1 });
    // The executor decided the start while the worker took work; the worker drains by the commit.
    const started = await runtime.dispatch(executionId, [
      { type: 'ExecutionHandedOff', data: { workerId: 'eg-drains', attempt: 1, deadline: new Date(Date.now() + 60_000).toISOString(), maxAttempts: 1 }, by: 'executor' },
      { type: 'ExecutionStarted', data: { attempt: 1, deadline: new Date(Date.now() + 60_000).toISOString() }, by: 'worker:eg-drains' },
    ]);
    const runs = new Set<Promise<void>>();
    const actions = createActionRegistry([defineAction({ name: 'eg.unoffered', input: z.null(), run: () => 'ran' })]);
    const deps = { workerId: 'eg-drains', runtime, actions, log, shutdown: new AbortController().signal, running: new Set<string>() };
    const intake = eagerIntake({ deps, actions, accepting: () => false, closed: () => false, runs, log });
    const message = { messageId: 'm2', executionId, workerId: 'eg-drains', runtime: 'node', action: 'eg.unoffered', attempt: 1, handoffRevision: String(started.revision - 1n), publishedAt: new Date().toISOString() };
    intake.run(message, started);
    expect(runs.size).toBe(1); // what the drain waits for
    await Promise.all(runs);
    const events = await until(executionId, last('ExecutionCompleted'));
    expect(types(events)).toEqual(['ExecutionRequested', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCompleted']);
    expect(events.at(-1)).toMatchObject({ data: { result: 'ran' } });
  });

  it('the executor places nothing on a worker of its process once it drains or stopped; other processes\' workers are up to their heartbeats', () => {
    const workers = new LocalWorkers();
    let accepting = true;
    const unregister = workers.register('w-1', { accepting: () => accepting, start: () => undefined, run: () => undefined });
    expect(workers.takesWork('w-1')).toBe(true);
    accepting = false;
    expect(workers.takesWork('w-1')).toBe(false);
    unregister();
    expect(workers.takesWork('w-1')).toBe(false);
    expect(workers.takesWork('elsewhere')).toBe(true);
    // The same id started again in this process takes work again.
    workers.register('w-1', { accepting: () => true, start: () => undefined, run: () => undefined });
    expect(workers.takesWork('w-1')).toBe(true);
  });

  it("an intake starts only what its worker runs: the action it offers, at the handoff's version, with no cancel request", () => {
    const runs = new Set<Promise<void>>();
    const deps = { workerId: 'eg-x', runtime, actions: localActions, log, shutdown: new AbortController().signal, running: new Set<string>(), startToCloseMs: 5_000 };
    const intake = eagerIntake({ deps, actions: localActions, accepting: () => true, closed: () => false, runs, log });
    const candidate = { action: 'eg.slow', attempt: 2, actionVersion: undefined, cancelRequested: false };
    const data = intake.start(candidate);
    expect(data).toMatchObject({ attempt: 2 });
    // eg.slow sets no start-to-close limit: the worker's default applies.
    expect(Date.parse(data!.deadline!) - Date.now()).toBeLessThanOrEqual(5_000);
    expect(intake.start({ ...candidate, action: 'eg.remote' })).toBeUndefined();
    expect(intake.start({ ...candidate, actionVersion: 2 })).toBeUndefined();
    expect(intake.start({ ...candidate, cancelRequested: true })).toBeUndefined();
  });

  it('an eager start the machine refuses sends that execution through the transport on the next pass; nothing refused is stored', async () => {
    // An intake whose start names another attempt: the machine refuses the whole handoff (a bug, if it ever happened).
    const unregister = localWorkers.register('eg-remote', {
      accepting: () => true,
      start: (c) => ({ attempt: c.attempt + 7, deadline: new Date(Date.now() + 60_000).toISOString() }),
      run: () => {
        throw new Error('a refused start must never run');
      },
    });
    try {
      const { executionId } = await runtime.submit({ action: 'eg.remote', input: null });
      const events = await until(executionId, last('ExecutionCompleted'));
      expect(types(events)).toEqual(['ExecutionRequested', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCompleted']);
      expect(events[2]).toMatchObject({ data: { attempt: 1 }, metadata: { by: 'worker:eg-remote' } });
      expect(published.has(executionId)).toBe(true);
    } finally {
      unregister();
    }
  });

  it('a draining worker takes no eager work, and its drain waits for the eager runs it holds', async () => {
    const { executionId } = await runtime.submit({ action: 'eg.slow', input: null });
    await until(executionId, (e) => e.some((x) => x.type === 'ExecutionStarted'));
    expect(published.has(executionId)).toBe(false);
    let stopped = false;
    const stopping = local.stop('test drain').then(() => (stopped = true));
    await new Promise((r) => setTimeout(r, 300));
    expect(stopped).toBe(false);
    expect(localWorkers.intake('eg-local')).toBeUndefined();
    opened(executionId);
    await stopping;
    expect(types(await t.store.readStream(executionStreamId(executionId))).at(-1)).toBe('ExecutionCompleted');
  });

  it('BATON_EAGER_DISPATCH switches it (on by default) and refuses what is not a switch, naming the variable', () => {
    expect(loadConfig({}).eagerDispatch).toBe(true);
    expect(loadConfig({ BATON_EAGER_DISPATCH: 'off' }).eagerDispatch).toBe(false);
    expect(() => loadConfig({ BATON_EAGER_DISPATCH: 'sometimes' })).toThrow(/BATON_EAGER_DISPATCH: Invalid switch: expected on or off/);
  });
});
