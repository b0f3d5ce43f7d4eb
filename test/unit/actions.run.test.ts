// Actions: runAction's validation, time limit and abort, and the core.* built-ins
// (http.request is in actions.http-request.test.ts).
import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { ActionError, InvalidActionInputError, defineAction, isRetryable } from '../../src/actions/action.ts';
import { ActionAbortedError, ActionTimeoutError, runAction } from '../../src/actions/registry.ts';
import { echo, fail, noop, sleep, sleepAction } from '../../src/actions/builtin.ts';
import { ctx, rejection } from './actions.fixtures.ts';

describe('runAction', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('validates before any action code runs', async () => {
    const run = vi.fn(() => null);
    const a = defineAction({ name: 'test.spy', input: z.object({ n: z.number() }), run });
    const err = await rejection(runAction(a, { n: 'one' }, ctx()));
    expect(err).toBeInstanceOf(InvalidActionInputError);
    expect((err as Error).message).toMatch(/input\.n: /);
    expect(run).not.toHaveBeenCalled();
  });

  it('runs with the parsed input and resolves with the result', async () => {
    const heartbeat = vi.fn();
    const a = defineAction({
      name: 'test.ctx',
      input: z.object({ n: z.number().default(2) }),
      run: ({ n }, c) => {
        c.heartbeat({ n });
        return { n, executionId: c.executionId, attempt: c.attempt, aborted: c.signal.aborted };
      },
    });
    expect(await runAction(a, {}, ctx({ heartbeat, attempt: 3 }))).toEqual({
      n: 2,
      executionId: '00000000-0000-4000-8000-000000000001',
      attempt: 3,
      aborted: false,
    });
    expect(heartbeat).toHaveBeenCalledWith({ n: 2 });
  });

  it("passes the action's own failure through", async () => {
    const err = await rejection(runAction(fail, { message: 'nope', retryable: false, type: 'Nope' }, ctx()));
    expect(err).toBeInstanceOf(ActionError);
    expect(err).toMatchObject({ message: 'nope', retryable: false, type: 'Nope' });
  });

  it('aborts the signal and rejects with ActionTimeoutError when timeoutMs passes', async () => {
    let seen: AbortSignal | undefined;
    const a = defineAction({
      name: 'test.slow',
      input: z.object({}),
      timeoutMs: 50,
      run: (_, c) => {
        seen = c.signal;
        return sleep(60_000, c.signal);
      },
    });
    const t0 = performance.now();
    const err = await rejection(runAction(a, {}, ctx()));
    const elapsed = performance.now() - t0;
    expect(err).toBeInstanceOf(ActionTimeoutError);
    expect(err).toMatchObject({ action: 'test.slow', timeoutMs: 50 });
    expect((err as Error).message).toBe('action test.slow timed out after 50 ms (its timeoutMs)');
    expect(seen?.aborted).toBe(true);
    expect(seen?.reason).toBe(err);
    expect(elapsed).toBeGreaterThanOrEqual(45);
    expect(elapsed).toBeLessThan(2_000);
  });

  it('rejects at the time limit even when the action ignores its signal', async () => {
    let finish!: () => void;
    const a = defineAction({
      name: 'test.deaf',
      input: z.object({}),
      timeoutMs: 30,
      run: () => new Promise<string>((resolve) => (finish = () => resolve('late'))),
    });
    try {
      expect(await rejection(runAction(a, {}, ctx()))).toBeInstanceOf(ActionTimeoutError);
    } finally {
      finish();
    }
  });

  it("rejects with ActionAbortedError as soon as the caller's signal aborts", async () => {
    const controller = new AbortController();
    const running = runAction(sleepAction, { ms: 60_000 }, ctx({ signal: controller.signal }));
    const reason = new Error('ownership lost');
    setTimeout(() => controller.abort(reason), 10);
    const err = await rejection(running);
    expect(err).toBeInstanceOf(ActionAbortedError);
    expect((err as Error).cause).toBe(reason);
    expect((err as Error).message).toBe('action core.sleep was aborted: ownership lost');
  });

  it('does not run at all when the signal is already aborted', async () => {
    const run = vi.fn(() => null);
    const a = defineAction({ name: 'test.never', input: z.object({}), run });
    const err = await rejection(runAction(a, {}, ctx({ signal: AbortSignal.abort(new Error('shutdown')) })));
    expect(err).toBeInstanceOf(ActionAbortedError);
    expect(run).not.toHaveBeenCalled();
  });

  it('leaves no timer and no listener on the caller signal behind', async () => {
    vi.useFakeTimers();
    const controller = new AbortController();
    const a = defineAction({ name: 'test.quick', input: z.object({}), timeoutMs: 60_000, run: () => 'done' });
    expect(await runAction(a, {}, ctx({ signal: controller.signal }))).toBe('done');
    expect(vi.getTimerCount()).toBe(0);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    await rejection(runAction(fail, { message: 'x' }, ctx({ signal: controller.signal })));
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });
});

describe('built-in actions', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('core.noop returns null, core.echo its input', async () => {
    expect(await runAction(noop, { anything: 1 }, ctx())).toBeNull();
    expect(await runAction(echo, { a: [1, 2, { b: 'c' }] }, ctx())).toEqual({ a: [1, 2, { b: 'c' }] });
    expect(await runAction(echo, null, ctx())).toBeNull();
  });

  it('core.fail throws a retryable ActionError unless told otherwise', async () => {
    const retryable = await rejection(runAction(fail, { message: 'try again' }, ctx()));
    expect(retryable).toBeInstanceOf(ActionError);
    expect(retryable).toMatchObject({ message: 'try again', retryable: true, type: 'ActionError' });
    expect(isRetryable(retryable, fail)).toBe(true);
    const final = await rejection(runAction(fail, { message: 'give up', retryable: false }, ctx()));
    expect(final).toMatchObject({ retryable: false });
    expect(isRetryable(final, fail)).toBe(false);
  });

  it('core.sleep waits its time', async () => {
    const t0 = performance.now();
    expect(await runAction(sleepAction, { ms: 30 }, ctx())).toBeNull();
    expect(performance.now() - t0).toBeGreaterThanOrEqual(25);
  });

  it('core.sleep rejects promptly when its signal aborts', async () => {
    const controller = new AbortController();
    const reason = new Error('stop');
    const running = sleep(60_000, controller.signal);
    setTimeout(() => controller.abort(reason), 20);
    const t0 = performance.now();
    expect(await rejection(running)).toBe(reason);
    // Prompt: the abort lands ~20 ms in; a sleep that ignored it would take a minute.
    expect(performance.now() - t0).toBeLessThan(500);
  });

  it('core.sleep clears its timer on abort and rejects at once on an aborted signal', async () => {
    vi.useFakeTimers();
    const controller = new AbortController();
    const running = sleep(60_000, controller.signal);
    expect(vi.getTimerCount()).toBe(1);
    controller.abort(new Error('stop'));
    await expect(running).rejects.toThrow('stop');
    expect(vi.getTimerCount()).toBe(0);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    await expect(sleep(10, AbortSignal.abort(new Error('already')))).rejects.toThrow('already');
    expect(vi.getTimerCount()).toBe(0);
  });
});
