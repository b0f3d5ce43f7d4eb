import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { createExecutionRuntime, type ExecutionCommand, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import {
  AlreadyFinalError,
  IdempotencyKeyConflictError,
  InvalidEventError,
  InvalidTransitionError,
  NotFoundError,
  NotOwnerError,
} from '../../src/errors.ts';
import { executionStreamId, type ExecutionEvent } from '../../schemas/events.ts';
import { MACHINE_VERSION, statusOf } from '../../actors/execution.machine.ts';
import { useTestStore } from '../support/test-store.ts';
import { generateExecutionPaths } from '../support/execution-paths.ts';
import { executionTimeline } from '../../src/replay/execution-history.ts';

const deadline = () => new Date(Date.now() + 30_000).toISOString();

/** The command that re-creates a stored domain event through the runtime. */
const commandOf = (e: ExecutionEvent): ExecutionCommand => ({ type: e.type, data: e.data, by: e.metadata.by } as ExecutionCommand);

describe('execution runtime', () => {
  const t = useTestStore({ max: 30 });
  let runtime: ExecutionRuntime;
  beforeAll(async () => {
    runtime = createExecutionRuntime(t.store);
  });

  async function scheduledOn(worker: string) {
    const { executionId } = await runtime.submit({ action: 'core.noop', input: { n: 1 } });
    await runtime.dispatch(executionId, [
      { type: 'SchedulingStarted', data: {}, by: 'executor' },
      { type: 'ExecutionHandedOff', data: { workerId: worker, attempt: 1, deadline: deadline() }, by: 'executor' },
    ]);
    return executionId;
  }

  it('submits an execution and loads it back by folding its stream', async () => {
    const r = await runtime.submit({ action: 'core.echo', input: { hello: 'world' } });
    expect(r.created).toBe(true);
    const loaded = await runtime.load(r.executionId);
    expect(statusOf(loaded.snapshot)).toBe('Requested');
    expect(loaded.snapshot.context).toMatchObject({ action: 'core.echo', input: { hello: 'world' }, owner: 'executor', attempt: 1, maxAttempts: 3 });
    expect(loaded.revision).toBe(0n);
    expect(loaded.events![0]!.metadata).toMatchObject({ by: 'executor', machineVersion: MACHINE_VERSION });
  });

  it('moves an execution through its lifecycle, each event appended by its owner', async () => {
    const id = await scheduledOn('w1');
    await runtime.dispatch(id, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
    const done = await runtime.dispatch(id, { type: 'ExecutionCompleted', data: { result: { ok: 1 } }, by: 'worker:w1' });
    expect(statusOf(done.snapshot)).toBe('Completed');
    expect(done.revision).toBe(4n);
    const steps = await executionTimeline(runtime.store, id);
    expect(steps.map((s) => s.state)).toEqual(['Requested', 'Scheduling', 'Scheduled', 'Running', 'Completed']);
    expect(steps.map((s) => s.owner)).toEqual(['executor', 'executor', 'worker:w1', 'worker:w1', 'worker:w1']);
  });

  it('refuses commands with typed errors and writes nothing', async () => {
    const id = await scheduledOn('w1');
    await expect(runtime.dispatch(id, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w2' })).rejects.toBeInstanceOf(NotOwnerError);
    await expect(runtime.dispatch(id, { type: 'ExecutionCancelled', data: { reason: 'not yours' }, by: 'executor' })).rejects.toBeInstanceOf(NotOwnerError);
    await expect(runtime.dispatch(id, { type: 'ExecutionCompleted', data: { result: null }, by: 'worker:w1' })).rejects.toBeInstanceOf(InvalidTransitionError);
    await runtime.dispatch(id, { type: 'ExecutionCancelled', data: { reason: 'test' }, by: 'worker:w1' });
    await expect(runtime.dispatch(id, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' })).rejects.toBeInstanceOf(AlreadyFinalError);
    await expect(runtime.load(randomUUID())).rejects.toBeInstanceOf(NotFoundError);
    await expect(runtime.dispatch(randomUUID(), { type: 'SchedulingStarted', data: {}, by: 'executor' })).rejects.toBeInstanceOf(NotFoundError);
    expect((await t.store.readStream(executionStreamId(id))).length).toBe(4);
  });

  it('rejects malformed event data with an error naming the field', async () => {
    const { executionId } = await runtime.submit({ action: 'core.noop' });
    await runtime.dispatch(executionId, { type: 'SchedulingStarted', data: {}, by: 'executor' });
    const err = await runtime
      .dispatch(executionId, { type: 'ExecutionHandedOff', data: { workerId: 'w', attempt: 0, deadline: 'soon' }, by: 'executor' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidEventError);
    expect((err as InvalidEventError).issues.map((i) => i.path).sort()).toEqual(['data.attempt', 'data.deadline']);
    await expect(runtime.submit({ action: '', input: 1 })).rejects.toThrow(/data\.action/);
    await expect(runtime.submit({ action: 'x', maxAttempts: 0 })).rejects.toThrow(/data\.maxAttempts/);
    expect((await t.store.readStream(executionStreamId(executionId))).length).toBe(2);
  });

  it('treats a retried command (same eventId) as already applied', async () => {
    const id = await scheduledOn('w1');
    const eventId = randomUUID();
    const start: ExecutionCommand = { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1', eventId };
    expect((await runtime.dispatch(id, start)).appended).toBe(true);
    const again = await runtime.dispatch(id, start);
    expect(again.appended).toBe(false);
    expect(statusOf(again.snapshot)).toBe('Running');
    expect((await t.store.readStream(executionStreamId(id))).length).toBe(4);
  });

  it('keeps a valid, contiguous stream when conflicting commands race', async () => {
    const id = await scheduledOn('w1');
    // The worker starts while the executor reclaims (schedule-to-start): exactly one may win.
    const racers: ExecutionCommand[] = [
      ...Array.from({ length: 10 }, (): ExecutionCommand => ({ type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' })),
      ...Array.from({ length: 10 }, (): ExecutionCommand => ({ type: 'OwnershipReclaimed', data: { reason: 'schedule-to-start', workerId: 'w1', attempt: 1 }, by: 'executor' })),
    ];
    const results = await Promise.allSettled(racers.map((c) => runtime.dispatch(id, c)));
    const ok = results.filter((r) => r.status === 'fulfilled');
    expect(ok.length).toBe(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(Error);
    const events = await t.store.readStream(executionStreamId(id));
    expect(events.map((e) => e.revision)).toEqual([0n, 1n, 2n, 3n]);
    expect(['ExecutionStarted', 'OwnershipReclaimed']).toContain(events[3]!.type);
    const loaded = await runtime.load(id); // folds cleanly
    expect(statusOf(loaded.snapshot)).toBe(events[3]!.type === 'ExecutionStarted' ? 'Running' : 'Requested');
  });

  it('schedules an execution once when many executors race', async () => {
    const { executionId } = await runtime.submit({ action: 'core.noop' });
    const results = await Promise.allSettled(
      Array.from({ length: 12 }, (_, i) =>
        runtime.dispatch(executionId, [
          { type: 'ExecutionHandedOff', data: { workerId: `w${i}`, attempt: 1, deadline: deadline() }, by: 'executor' },
        ]),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled').length).toBe(1);
    const events = await t.store.readStream(executionStreamId(executionId));
    expect(events.map((e) => e.type)).toEqual(['ExecutionRequested', 'ExecutionHandedOff']);
  });

  it('creates one execution for one idempotency key, even under concurrent submission', async () => {
    const key = `order-${randomUUID()}`;
    const results = await Promise.all(Array.from({ length: 20 }, () => runtime.submit({ action: 'core.echo', input: { a: 1 }, idempotencyKey: key })));
    expect(new Set(results.map((r) => r.executionId)).size).toBe(1);
    expect(results.filter((r) => r.created).length).toBe(1);
    const again = await runtime.submit({ action: 'core.echo', input: { a: 1 }, idempotencyKey: key });
    expect(again).toMatchObject({ executionId: results[0]!.executionId, created: false });
    expect((await t.store.readStream(executionStreamId(again.executionId))).length).toBe(1);
  });

  it('refuses the same idempotency key with a different request', async () => {
    const key = `k-${randomUUID()}`;
    await runtime.submit({ action: 'core.echo', input: { a: 1 }, idempotencyKey: key });
    const err = await runtime.submit({ action: 'core.echo', input: { a: 2 }, idempotencyKey: key }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdempotencyKeyConflictError);
    expect((err as Error).message).toMatch(/differs in input/);
  });

  it('records whether a submission named its attempt limit or took the default', async () => {
    const defaulted = await runtime.submit({ action: 'core.echo', input: null });
    const own = await runtime.submit({ action: 'core.echo', input: null, maxAttempts: 3 });
    const first = async (id: string) => (await t.store.readStream(executionStreamId(id)))[0]!.data;
    expect(await first(defaulted.executionId)).toMatchObject({ maxAttempts: 3, maxAttemptsIsDefault: true });
    expect(await first(own.executionId)).not.toHaveProperty('maxAttemptsIsDefault');
    expect(defaulted.snapshot.context.submittedMaxAttempts).toBeUndefined();
    expect(own.snapshot.context.submittedMaxAttempts).toBe(3);
    // The default and the same number named are different requests: an action's own limit replaces only the default.
    const key = `k-${randomUUID()}`;
    await runtime.submit({ action: 'core.echo', input: null, idempotencyKey: key });
    expect((await runtime.submit({ action: 'core.echo', input: null, idempotencyKey: key })).created).toBe(false);
    const err = await runtime.submit({ action: 'core.echo', input: null, idempotencyKey: key, maxAttempts: 3 }).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/\(differs in maxAttempts\)$/);
  });

  it('takes an explicit priority 0 as the default it is: the same request under one key', async () => {
    const key = `k-${randomUUID()}`;
    const first = await runtime.submit({ action: 'core.echo', input: { a: 1 }, idempotencyKey: key });
    const again = await runtime.submit({ action: 'core.echo', input: { a: 1 }, idempotencyKey: key, priority: 0 });
    expect(again).toMatchObject({ executionId: first.executionId, created: false });
    await expect(runtime.submit({ action: 'core.echo', input: { a: 1 }, idempotencyKey: key, priority: 1 })).rejects.toThrow(/\(differs in priority\)$/);
  });

  it('a key repeated in a batch whose first use conflicts with the store: a repeat that asks for the stored request is that execution', async () => {
    const key = `k-${randomUUID()}`;
    const stored = await runtime.submit({ action: 'core.echo', input: { n: 1 }, idempotencyKey: key });
    const [differs, same, alsoDiffers] = await runtime.submitMany([
      { action: 'core.echo', input: { n: 2 }, idempotencyKey: key },
      { action: 'core.echo', input: { n: 1 }, idempotencyKey: key },
      { action: 'core.echo', input: { n: 3 }, idempotencyKey: key },
    ]);
    expect(differs).toMatchObject({ ok: false, error: { message: expect.stringMatching(/with a different request \(differs in input\)$/) } });
    expect(same).toMatchObject({ ok: true, result: { executionId: stored.executionId, created: false } });
    expect(alsoDiffers).toMatchObject({ ok: false, error: { message: expect.stringMatching(/with a different request \(differs in input\)$/) } });
  });

  it('replays every path generated through the machine to the same state through the runtime', async () => {
    const paths = generateExecutionPaths();
    expect(paths.length).toBeGreaterThan(20);
    // A clock that reads each path event's own time, so contexts match exactly.
    let now = new Date(0);
    const replaying = createExecutionRuntime(t.store, { clock: () => now });
    for (const path of paths) {
      const [requested, ...rest] = path.events as [ExecutionEvent & { type: 'ExecutionRequested' }, ...ExecutionEvent[]];
      now = new Date(requested.metadata.occurredAt);
      const { executionId } = await replaying.submit({ action: requested.data.action, input: requested.data.input, maxAttempts: requested.data.maxAttempts });
      for (const e of rest) {
        now = new Date(e.metadata.occurredAt);
        await replaying.dispatch(executionId, commandOf(e));
      }
      const loaded = await replaying.load(executionId);
      expect(statusOf(loaded.snapshot)).toBe(path.finalStatus);
      expect(loaded.snapshot.context).toEqual(path.finalContext);
      expect(loaded.revision).toBe(BigInt(path.events.length - 1));
    }
  }, 120_000);
});
