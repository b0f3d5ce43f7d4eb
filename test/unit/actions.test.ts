// Actions: definitions, the registry, input validation, runAction's time limit and abort,
// the built-ins (http.request against a local server), and loading a user's module.
import { getEventListeners } from 'node:events';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, expectTypeOf, it, vi } from 'vitest';
import { z } from 'zod';
import { ErrorInfo } from '../../schemas/events.ts';
import { ActionPolicy } from '../../schemas/worker-events.ts';
import {
  ActionError,
  InvalidActionDefinitionError,
  InvalidActionInputError,
  defineAction,
  isActionDefinition,
  isRetryable,
  retryDelayMs,
  toErrorInfo,
  type ActionContext,
  type ActionDefinition,
} from '../../src/actions/action.ts';
import {
  ActionAbortedError,
  ActionTimeoutError,
  DuplicateActionError,
  NotAnActionError,
  createActionRegistry,
  runAction,
  validateInput,
} from '../../src/actions/registry.ts';
import {
  HTTP_MAX_BODY_BYTES,
  builtinActions,
  echo,
  fail,
  httpRequest,
  noop,
  sleep,
  sleepAction,
} from '../../src/actions/builtin.ts';
import { createHttpRequestAction } from '../../src/actions/http-request.ts';
import { ActionsModuleError, loadActionsModule } from '../../src/actions/load.ts';
import { InvalidEventError } from '../../src/errors.ts';
import { silentLogger } from '../../src/log.ts';

const FIXTURES = fileURLToPath(new URL('../fixtures/actions/', import.meta.url));

function ctx(over: Partial<ActionContext> = {}): ActionContext {
  return {
    executionId: '00000000-0000-4000-8000-000000000001',
    attempt: 1,
    signal: new AbortController().signal,
    heartbeat: () => undefined,
    tag: async () => undefined,
    log: silentLogger(),
    ...over,
  };
}

/** What a promise settled with, so a test can assert on a rejection's class and fields. */
async function settle<T>(p: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await p };
  } catch (error) {
    return { ok: false, error };
  }
}
async function rejection(p: Promise<unknown>): Promise<unknown> {
  const r = await settle(p);
  if (r.ok) throw new Error(`expected a rejection, got ${JSON.stringify(r.value)}`);
  return r.error;
}

const minimal = { input: z.object({}), run: () => null };

describe('defineAction', () => {
  it('returns a checked, frozen definition with the default runtime and an async run', async () => {
    const a = defineAction({ name: 'test.add', input: z.object({ a: z.number(), b: z.number() }), timeoutMs: 500, run: ({ a, b }) => a + b });
    expect(a.name).toBe('test.add');
    expect(a.runtime).toBe('node');
    expect(a.timeoutMs).toBe(500);
    expect('heartbeatTimeoutMs' in a).toBe(false);
    expect(Object.isFrozen(a)).toBe(true);
    expect(isActionDefinition(a)).toBe(true);
    expect(isActionDefinition({ ...minimal, name: 'test.raw' })).toBe(false);
    const result = a.run({ a: 1, b: 2 }, ctx());
    expect(result).toBeInstanceOf(Promise);
    expect(await result).toBe(3);
    expectTypeOf(a).toEqualTypeOf<ActionDefinition<{ a: number; b: number }, number>>();
  });

  it('infers the input type from the schema, defaults applied', () => {
    const a = defineAction({
      name: 'test.typed',
      input: z.object({ n: z.number().default(1), s: z.string().optional() }),
      run: (input) => input.n,
    });
    expectTypeOf(a.run).parameter(0).toEqualTypeOf<{ n: number; s?: string | undefined }>();
  });

  it('turns a synchronous throw in run into a rejection', async () => {
    const a = defineAction({
      name: 'test.throws',
      input: z.object({}),
      run: () => {
        throw new TypeError('sync');
      },
    });
    await expect(a.run({}, ctx())).rejects.toThrow(TypeError);
  });

  it.each(['noop', 'Core.noop', 'core.', '.core', 'core..noop', 'core noop', '1core.noop', 'core.Noop', 'core.no*op', ''])(
    'refuses the name %j, saying what a name looks like',
    (name) => {
      expect(() => defineAction({ ...minimal, name })).toThrow(InvalidActionDefinitionError);
      expect(() => defineAction({ ...minimal, name })).toThrow(/name: must be lowercase dotted segments like "core.noop"/);
    },
  );

  it.each(['core.noop', 'http.request', 'billing.invoice.send', 'my-ns.do_it', 'a1.b2'])('accepts the name %j', (name) => {
    expect(defineAction({ ...minimal, name }).name).toBe(name);
  });

  it('names every bad field', () => {
    const attempt = (spec: Record<string, unknown>) => () =>
      defineAction({ ...minimal, name: 'test.bad', ...spec } as Parameters<typeof defineAction>[0]);
    expect(attempt({ timeoutMs: -1 })).toThrow(/invalid action definition "test.bad": timeoutMs: Too small/);
    expect(attempt({ timeoutMs: 1.5 })).toThrow(/timeoutMs: /);
    expect(attempt({ heartbeatTimeoutMs: 0 })).toThrow(/heartbeatTimeoutMs: Too small/);
    expect(attempt({ runtime: 'node.js' })).toThrow(/runtime: must be one lowercase token/);
    expect(attempt({ input: { parse: () => 1 } })).toThrow(/input: must be a zod schema/);
    expect(attempt({ run: 'go' })).toThrow(/run: must be a function/);
    expect(attempt({ retry: { maxAttempts: 0, initialIntervalMs: 1, multiplier: 2, maxIntervalMs: 10 } })).toThrow(
      /retry.maxAttempts: Too small/,
    );
    expect(attempt({ retry: { maxAttempts: 3, initialIntervalMs: 100, multiplier: 2, maxIntervalMs: 10 } })).toThrow(
      /retry.maxIntervalMs: maxIntervalMs must be at least initialIntervalMs/,
    );
  });

  it('checks a concurrency policy, naming the field', () => {
    const attempt = (concurrency: unknown) => () =>
      defineAction({ ...minimal, name: 'test.bad', concurrency } as Parameters<typeof defineAction>[0]);
    for (const limit of [0, -1, 1.5, 100_001, '3', undefined]) {
      expect(attempt({ limit }), String(limit)).toThrow(/invalid action definition "test.bad": concurrency.limit: must be an integer from 1 to 100000/);
    }
    for (const key of ['', 'a..b', '.a', 'a.', 'a b', 'a[0]', 7]) {
      expect(attempt({ limit: 1, key }), String(key)).toThrow(/concurrency.key: must be a dotted path into the input, like "tenantId" or "customer.id"/);
    }
    expect(attempt({ limit: 1, keys: 'tenantId' })).toThrow(/concurrency.keys: unknown field; did you mean "key"\?/);
    expect(defineAction({ ...minimal, name: 'test.one', concurrency: { limit: 1 } }).concurrency).toEqual({ limit: 1 });
    expect(defineAction({ ...minimal, name: 'test.key', concurrency: { limit: 100_000, key: 'customer.id' } }).concurrency).toEqual({ limit: 100_000, key: 'customer.id' });
  });
});

describe('failures: ActionError, toErrorInfo, isRetryable', () => {
  const plain = defineAction({ ...minimal, name: 'test.plain' });
  const picky = defineAction({
    ...minimal,
    name: 'test.picky',
    retry: { maxAttempts: 5, initialIntervalMs: 100, multiplier: 2, maxIntervalMs: 1_000, nonRetryable: ['TypeError', 'Declined'] },
  });

  it('records an ActionError by its type, with the stack', () => {
    const info = toErrorInfo(new ActionError('card declined', { type: 'Declined', retryable: false }));
    expect(info).toMatchObject({ message: 'card declined', type: 'Declined' });
    expect(info.stack).toContain('card declined');
    expect(ErrorInfo.parse(info)).toEqual(info);
    expect(toErrorInfo(new ActionError('x')).type).toBe('ActionError');
  });

  it('records other errors by name and thrown non-errors as NonError', () => {
    expect(toErrorInfo(new RangeError('out')).type).toBe('RangeError');
    expect(toErrorInfo('boom')).toEqual({ message: 'non-error thrown: boom', type: 'NonError' });
    expect(toErrorInfo({ code: 7 })).toEqual({ message: 'non-error thrown: {"code":7}', type: 'NonError' });
    expect(toErrorInfo(undefined)).toEqual({ message: 'non-error thrown: undefined', type: 'NonError' });
  });

  it('clips a runaway message so the history stays readable', () => {
    const info = toErrorInfo(new Error('x'.repeat(100_000)));
    expect(info.message.length).toBeLessThan(5_000);
    expect(info.message).toMatch(/more chars\)$/);
  });

  it('retries by default; not when the error or the policy says no, nor after invalid input', () => {
    expect(isRetryable(new Error('flaky'), plain)).toBe(true);
    expect(isRetryable('thrown string', plain)).toBe(true);
    expect(isRetryable(new ActionError('x'), plain)).toBe(true);
    expect(isRetryable(new ActionError('x', { retryable: false }), plain)).toBe(false);
    expect(isRetryable(new TypeError('bug'), plain)).toBe(true);
    expect(isRetryable(new TypeError('bug'), picky)).toBe(false);
    expect(isRetryable(new ActionError('no', { type: 'Declined' }), picky)).toBe(false);
    expect(isRetryable(new ActionError('later', { type: 'Busy' }), picky)).toBe(true);
    expect(isRetryable(new ActionTimeoutError('test.plain', 10), plain)).toBe(true);
    expect(isRetryable(new InvalidActionInputError('test.plain', [{ path: 'x', message: 'bad' }]), plain)).toBe(false);
  });

  it('backs off exponentially, capped', () => {
    const policy = { maxAttempts: 10, initialIntervalMs: 100, multiplier: 2, maxIntervalMs: 1_000 };
    expect([2, 3, 4, 5, 6, 7].map((n) => retryDelayMs(policy, n))).toEqual([100, 200, 400, 800, 1_000, 1_000]);
  });
});

describe('createActionRegistry', () => {
  it('looks actions up and lists names and runtimes, sorted', () => {
    const py = defineAction({ ...minimal, name: 'ml.predict', runtime: 'python' });
    const registry = createActionRegistry([...builtinActions, py]);
    expect(registry.names()).toEqual(['core.echo', 'core.fail', 'core.noop', 'core.sleep', 'http.request', 'ml.predict']);
    expect(registry.runtimes()).toEqual(['node', 'python']);
    expect(registry.get('core.noop')).toBe(noop);
    expect(registry.get('core.nope')).toBeUndefined();
    expect(registry.has('ml.predict')).toBe(true);
    expect(registry.has('ml.train')).toBe(false);
    registry.names().push('mutated');
    expect(registry.names()).not.toContain('mutated');
  });

  it('advertises each action\'s runtime, and its concurrency limit with its other policies', () => {
    const limited = defineAction({ ...minimal, name: 'test.limited', concurrency: { limit: 2, key: 'tenantId' } });
    const gpu = defineAction({ ...minimal, name: 'test.gpu', runtime: 'gpu' });
    const policies = createActionRegistry([noop, limited, gpu]).policies();
    expect(policies).toEqual({
      'core.noop': { runtime: 'node' },
      'test.limited': { runtime: 'node', concurrency: { limit: 2, key: 'tenantId' } },
      'test.gpu': { runtime: 'gpu' },
    });
    expect(ActionPolicy.parse(policies['test.limited'])).toEqual(policies['test.limited']);
  });

  it('refuses two actions with one name, naming it', () => {
    const again = defineAction({ ...minimal, name: 'core.noop' });
    expect(() => createActionRegistry([noop, echo, again])).toThrow(DuplicateActionError);
    expect(() => createActionRegistry([noop, again])).toThrow(/action "core.noop" is defined more than once/);
  });

  it('refuses entries not built with defineAction', () => {
    const raw = { name: 'test.raw', runtime: 'node', ...minimal } as unknown as ActionDefinition;
    expect(() => createActionRegistry([noop, raw])).toThrow(NotAnActionError);
    expect(() => createActionRegistry([noop, raw])).toThrow(/actions\[1\] is not an action/);
  });
});

describe('validateInput', () => {
  it('returns the parsed input, defaults applied', () => {
    expect(validateInput(sleepAction, { ms: 5 })).toEqual({ ms: 5 });
    expect(validateInput(fail, { message: 'm' })).toEqual({ message: 'm', retryable: true });
    expect(validateInput(echo, [1, 'two', { three: null }])).toEqual([1, 'two', { three: null }]);
  });

  it('names the bad field under `input`', () => {
    const err = (() => {
      try {
        validateInput(sleepAction, { ms: -1 });
      } catch (e) {
        return e;
      }
      throw new Error('expected validateInput to throw');
    })();
    expect(err).toBeInstanceOf(InvalidActionInputError);
    expect(err).toBeInstanceOf(InvalidEventError);
    expect((err as InvalidActionInputError).action).toBe('core.sleep');
    expect((err as InvalidActionInputError).issues).toEqual([{ path: 'input.ms', message: expect.stringMatching(/^Too small/) }]);
    expect((err as Error).message).toMatch(/^invalid input for action core\.sleep: input\.ms: Too small/);
    expect(() => validateInput(sleepAction, { ms: 86_400_001 })).toThrow(/input\.ms: Too big/);
    expect(() => validateInput(sleepAction, { ms: 1.5 })).toThrow(/input\.ms: /);
    expect(() => validateInput(sleepAction, {})).toThrow(/input\.ms: /);
    expect(() => validateInput(sleepAction, 'soon')).toThrow(/: input: /);
    expect(() => validateInput(echo, undefined)).toThrow(InvalidActionInputError);
  });
});

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

describe('http.request', () => {
  // The test server listens on loopback, which http.request reaches only when allowed (outbound-address.test.ts).
  const local = createHttpRequestAction({ allow: ['127.0.0.1'] });
  let server: http.Server;
  let base: string;
  const received: { method: string; url: string; headers: http.IncomingHttpHeaders; body: string }[] = [];

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
        const url = new URL(req.url ?? '/', 'http://x');
        switch (url.pathname) {
          case '/json':
            res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'x-test': 'yes' });
            return res.end(JSON.stringify({ hello: 'world', n: [1, 2] }));
          case '/problem':
            res.writeHead(422, { 'content-type': 'application/problem+json' });
            return res.end('{"title":"bad"}');
          case '/text':
            res.writeHead(200, { 'content-type': 'text/plain' });
            return res.end('plain text');
          case '/empty':
            res.writeHead(204);
            return res.end();
          case '/status':
            res.writeHead(Number(url.searchParams.get('code')), { 'content-type': 'text/plain' });
            return res.end('status body');
          case '/bad-json':
            res.writeHead(200, { 'content-type': 'application/json' });
            return res.end('<html>oops</html>');
          case '/big':
            res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(HTTP_MAX_BODY_BYTES + 1) });
            return res.end('x'.repeat(HTTP_MAX_BODY_BYTES + 1));
          case '/big-chunked':
            // No content-length: the cap must hold while streaming.
            res.writeHead(200, { 'content-type': 'text/plain' });
            for (let i = 0; i < 5; i++) res.write('y'.repeat(300 * 1024));
            return res.end();
          case '/slow':
            // Never answers; closeAllConnections() in afterAll ends it.
            return;
          default:
            res.writeHead(404);
            return res.end();
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve, reject) => server.close((e) => (e ? reject(e) : resolve())));
  });

  it('GETs JSON and parses it, returning status and headers', async () => {
    const res = await runAction(local, { url: `${base}/json` }, ctx());
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ hello: 'world', n: [1, 2] });
    expect(res.headers['x-test']).toBe('yes');
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(received.at(-1)?.method).toBe('GET');
  });

  it('parses +json content types and returns 4xx as data by default', async () => {
    const res = await runAction(local, { url: `${base}/problem` }, ctx());
    expect(res).toMatchObject({ status: 422, body: { title: 'bad' } });
  });

  it('returns other bodies as text, and an empty body as null when JSON is declared', async () => {
    expect((await runAction(local, { url: `${base}/text` }, ctx())).body).toBe('plain text');
    expect(await runAction(local, { url: `${base}/empty`, method: 'delete' }, ctx())).toMatchObject({ status: 204, body: '' });
  });

  it('sends a JSON body as JSON and a string body as is', async () => {
    await runAction(local, { url: `${base}/json`, method: 'POST', body: { a: 1 }, headers: { 'x-id': '7' } }, ctx());
    expect(received.at(-1)).toMatchObject({ method: 'POST', body: '{"a":1}' });
    expect(received.at(-1)?.headers['content-type']).toBe('application/json');
    expect(received.at(-1)?.headers['x-id']).toBe('7');
    await runAction(local, { url: `${base}/text`, method: 'PUT', body: 'raw=1', headers: { 'content-type': 'text/x-custom' } }, ctx());
    expect(received.at(-1)).toMatchObject({ method: 'PUT', body: 'raw=1' });
    expect(received.at(-1)?.headers['content-type']).toBe('text/x-custom');
  });

  it('refuses a URL that is not http or https, and a body on GET', () => {
    for (const url of ['ftp://example.test/file', 'file:///etc/passwd', 'javascript:alert(1)', 'not a url']) {
      expect(() => validateInput(httpRequest, { url })).toThrow(/input\.url: must be an http:\/\/ or https:\/\/ URL/);
    }
    expect(() => validateInput(httpRequest, { url: `${base}/json`, body: 'x' })).toThrow(/input\.body: a GET or HEAD request cannot have a body/);
    expect(() => validateInput(httpRequest, { url: `${base}/json`, method: 'FETCH' })).toThrow(/input\.method: /);
  });

  it('times out with a retryable HttpTimeout error', async () => {
    const t0 = performance.now();
    const err = await rejection(runAction(local, { url: `${base}/slow`, timeoutMs: 100 }, ctx()));
    expect(err).toBeInstanceOf(ActionError);
    expect(err).toMatchObject({ type: 'HttpTimeout', retryable: true });
    expect((err as Error).message).toMatch(/timed out after 100 ms/);
    expect(performance.now() - t0).toBeLessThan(5_000);
  });

  it("stops when the caller's signal aborts", async () => {
    const controller = new AbortController();
    const running = runAction(local, { url: `${base}/slow` }, ctx({ signal: controller.signal }));
    setTimeout(() => controller.abort(new Error('cancelled')), 20);
    expect(await rejection(running)).toBeInstanceOf(ActionAbortedError);
  });

  it('refuses bodies over 1 MiB, declared or streamed, as non-retryable', async () => {
    for (const route of ['/big', '/big-chunked']) {
      const err = await rejection(runAction(local, { url: `${base}${route}` }, ctx()));
      expect(err).toMatchObject({ type: 'HttpResponseTooLarge', retryable: false });
      expect((err as Error).message).toMatch(/over the 1048576 byte \(1 MiB\) limit/);
    }
  });

  it('fails on an error status only when asked, retryable for 5xx, 408 and 429', async () => {
    expect((await runAction(local, { url: `${base}/status?code=500` }, ctx())).status).toBe(500);
    const cases: [number, boolean][] = [[500, true], [503, true], [429, true], [408, true], [404, false], [400, false]];
    for (const [code, retryable] of cases) {
      const err = await rejection(runAction(local, { url: `${base}/status?code=${code}`, failOnHttpError: true }, ctx()));
      expect(err).toMatchObject({ type: 'HttpError', retryable });
      expect((err as Error).message).toContain(`answered ${code}`);
    }
  });

  it('says so when a JSON response is not JSON', async () => {
    const err = await rejection(runAction(local, { url: `${base}/bad-json` }, ctx()));
    expect(err).toMatchObject({ type: 'HttpInvalidJson', retryable: false });
    expect((err as Error).message).toContain('"<html>oops</html>"');
  });

  it('turns a refused connection into a retryable network error', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const err = await rejection(runAction(local, { url: `http://127.0.0.1:${port}/` }, ctx()));
    expect(err).toMatchObject({ type: 'HttpNetworkError', retryable: true });
    expect((err as Error).message).toMatch(/ECONNREFUSED/);
  });
});

describe('loadActionsModule', () => {
  let scratch: string;
  beforeAll(async () => {
    scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-actions-'));
  });
  afterAll(async () => {
    await fs.rm(scratch, { recursive: true, force: true });
  });

  it('loads the `actions` export, resolving a relative path against cwd', async () => {
    const actions = await loadActionsModule('./sample-actions.ts', { cwd: FIXTURES });
    expect(actions.map((a) => a.name)).toEqual(['sample.greet', 'sample.math.add']);
    const registry = createActionRegistry([...builtinActions, ...actions]);
    expect(await runAction(registry.get('sample.greet')!, { name: 'baton' }, ctx())).toEqual({ greeting: 'hello, baton' });
    await expect(runAction(registry.get('sample.math.add')!, { a: 1 }, ctx())).rejects.toThrow(/input\.b: /);
  });

  it('loads a default export of a single action by absolute path', async () => {
    const actions = await loadActionsModule(path.join(FIXTURES, 'default-single.ts'));
    expect(actions.map((a) => a.name)).toEqual(['sample.single']);
  });

  it('loads plain .mjs modules', async () => {
    const file = path.join(scratch, 'plain.mjs');
    const actionUrl = new URL('../../src/actions/action.ts', import.meta.url).href;
    const zodUrl = import.meta.resolve('zod'); // the scratch dir has no node_modules
    await fs.writeFile(
      file,
      `import { z } from ${JSON.stringify(zodUrl)};\nimport { defineAction } from ${JSON.stringify(actionUrl)};\n` +
        `export default [defineAction({ name: 'plain.one', input: z.object({}), run: () => 1 })];\n`,
    );
    expect((await loadActionsModule(file)).map((a) => a.name)).toEqual(['plain.one']);
  });

  it('says where it looked when the file does not exist', async () => {
    const err = await rejection(loadActionsModule('./nope/actions.js', { cwd: scratch }));
    expect(err).toBeInstanceOf(ActionsModuleError);
    expect((err as Error).message).toBe(
      `actions module not found: ${path.join(scratch, 'nope/actions.js')} ("./nope/actions.js" resolved against ${scratch})`,
    );
    await expect(loadActionsModule(scratch)).rejects.toThrow(/is not a file/);
  });

  it('says what the module exports when none of it is usable', async () => {
    const err = await rejection(loadActionsModule(path.join(FIXTURES, 'not-actions.ts')));
    expect(err).toBeInstanceOf(ActionsModuleError);
    expect((err as Error).message).toMatch(/exports no usable actions: it has neither an `actions` nor a default export/);
    expect((err as Error).message).toMatch(/the module exports (config \(an object with keys retries\), helper \(a function \(helper\)\)|helper \(a function \(helper\)\), config \(an object with keys retries\))$/);
  });

  it('names the array entry that is not an action', async () => {
    await expect(loadActionsModule(path.join(FIXTURES, 'bad-element.ts'))).rejects.toThrow(
      /`default\[1\]` is an object with keys name, input, run, not an action/,
    );
  });

  it('describes a default export of the wrong kind', async () => {
    const file = path.join(scratch, 'number.mjs');
    await fs.writeFile(file, 'export default 42;\n');
    await expect(loadActionsModule(file)).rejects.toThrow(/`default` is a number/);
    const empty = path.join(scratch, 'empty.mjs');
    await fs.writeFile(empty, 'export const actions = [];\n');
    await expect(loadActionsModule(empty)).rejects.toThrow(/`actions` is an empty array/);
  });

  it('looks inside a CommonJS module.exports for `actions`', async () => {
    const file = path.join(scratch, 'legacy.cjs');
    await fs.writeFile(file, 'module.exports = { actions: "not an array" };\n');
    await expect(loadActionsModule(file)).rejects.toThrow(/`(default\.)?actions` is a string/);
  });

  it('wraps an error thrown while importing', async () => {
    const err = await rejection(loadActionsModule(path.join(FIXTURES, 'throws-on-import.ts')));
    expect(err).toBeInstanceOf(ActionsModuleError);
    expect((err as Error).message).toMatch(/throws-on-import\.ts failed to load: boom at import time$/);
    expect(((err as Error).cause as Error).message).toBe('boom at import time');
  });
});
