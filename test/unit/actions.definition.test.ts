// Actions: definitions (defineAction), failures (ActionError, toErrorInfo, isRetryable, retry
// back-off), the registry, and input validation.
import { describe, expect, expectTypeOf, it } from 'vitest';
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
  type ActionDefinition,
} from '../../src/actions/action.ts';
import {
  ActionTimeoutError,
  DuplicateActionError,
  NotAnActionError,
  createActionRegistry,
  validateInput,
} from '../../src/actions/registry.ts';
import { builtinActions, echo, fail, noop, sleepAction } from '../../src/actions/builtin.ts';
import { InvalidEventError } from '../../src/errors.ts';
import { ctx } from './actions.fixtures.ts';

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
    // A control character in the name is shown escaped, never written raw into the message.
    expect(attempt({ name: 'a\u0000b' })).toThrow('invalid action definition "a\\u0000b": name: ');
    expect(attempt({ timeoutMs: 1.5 })).toThrow(/timeoutMs: /);
    expect(attempt({ heartbeatTimeoutMs: 0 })).toThrow(/heartbeatTimeoutMs: Too small/);
    expect(attempt({ runtime: 'node.js' })).toThrow(/runtime: must be one lowercase token/);
    expect(attempt({ input: { parse: () => 1 } })).toThrow(/input: must be a zod schema/);
    expect(attempt({ run: 'go' })).toThrow(/run: must be a function/);
    expect(attempt({ retry: { maxAttempts: 0, initialIntervalMs: 1, multiplier: 2, maxIntervalMs: 10 } })).toThrow(
      /retry.maxAttempts: must be the attempts in total, the first included, a whole number from 1 to 1000/,
    );
    expect(attempt({ retry: { maxAttempts: 3, initialIntervalMs: 100, multiplier: 2, maxIntervalMs: 10 } })).toThrow(
      /retry.maxIntervalMs: maxIntervalMs must be at least initialIntervalMs/,
    );
    // Required with retry, and the message says so rather than zod's "expected number, received undefined".
    expect(attempt({ retry: { initialIntervalMs: 100 } })).toThrow(/retry.maxAttempts: required with retry: .*; an action without retry gets BATON_MAX_ATTEMPTS \(default 3\)$/);
    expect(attempt({ retry: { maxAttempts: 2, backoff: 3 } })).toThrow(/retry.backoff: unknown field; known: maxAttempts, initialIntervalMs, multiplier, maxIntervalMs, nonRetryable/);
  });

  it('gives the backoff fields a retry leaves out their defaults (1 s, doubling, at most 60 s, or the first delay if longer)', () => {
    const retryOf = (retry: object) => defineAction({ ...minimal, name: 'test.retry', retry } as never as Parameters<typeof defineAction>[0]).retry;
    expect(retryOf({ maxAttempts: 1 })).toEqual({ maxAttempts: 1, initialIntervalMs: 1_000, multiplier: 2, maxIntervalMs: 60_000 });
    expect(retryOf({ maxAttempts: 4, initialIntervalMs: 120_000, nonRetryable: ['Declined'] })).toEqual({ maxAttempts: 4, initialIntervalMs: 120_000, multiplier: 2, maxIntervalMs: 120_000, nonRetryable: ['Declined'] });
    expect(retryOf({ maxAttempts: 4, multiplier: 3, maxIntervalMs: 5_000 })).toEqual({ maxAttempts: 4, initialIntervalMs: 1_000, multiplier: 3, maxIntervalMs: 5_000 });
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

  it('describes any thrown value without throwing, even one whose getters, toJSON or toString throw', () => {
    class B extends Error {
      override get message(): string {
        throw new Error('getter boom');
      }
    }
    const selfish = Object.create(null) as Record<string, unknown>;
    selfish.self = selfish;
    const values = [
      { toJSON: () => { throw new Error('no'); }, toString: () => { throw new Error('no'); } },
      selfish,
      new B(),
      new (class extends Error { override get name(): string { throw new Error('name boom'); } })('named badly'),
      new Proxy({}, { get: () => { throw 1; }, getPrototypeOf: () => { throw 1; } }),
      { toJSON: () => undefined, [Symbol.for('nodejs.util.inspect.custom')]: () => { throw new Error('no inspect'); } },
    ];
    for (const v of values) {
      const info = toErrorInfo(v);
      expect(ErrorInfo.parse(info)).toEqual(info);
      expect(info.message.length).toBeGreaterThan(5);
    }
    expect(toErrorInfo(new B())).toMatchObject({ type: 'Error', message: 'a thrown value that could not be described (reading its message threw Error: getter boom)' });
    expect(toErrorInfo(values[5])).toEqual({ type: 'NonError', message: 'a thrown value that could not be described (Error: no inspect)' });
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
    // A user's action named like a built-in: say so, and how to get out of it.
    expect(() => createActionRegistry([noop, again])).toThrow(/the name of one of Baton's built-in actions: name yours differently, or leave the built-ins out, builtins: false/);
    const mine = defineAction({ ...minimal, name: 'billing.charge' });
    expect(() => createActionRegistry([mine, mine])).toThrow(/^action "billing.charge" is defined more than once; action names must be unique within a worker$/);
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

  it('refuses input a refinement or transform throws at, and an async schema, as invalid input naming the action', () => {
    const transform = defineAction({ ...minimal, name: 'test.transform', input: z.string().transform((s) => { if (s === 'bad') throw new Error('transform blew up'); return s; }) });
    const thrower = defineAction({ ...minimal, name: 'test.thrower', input: z.string().refine(() => { throw 'x'; }) });
    const asynchronous = defineAction({ ...minimal, name: 'test.async', input: z.object({ n: z.number() }).refine(async () => true) });
    expect(validateInput(transform, 'ok')).toBe('ok');
    expect(() => validateInput(transform, 'bad')).toThrow(new InvalidActionInputError('test.transform', [{ path: '', message: "transform blew up (thrown by a refinement or transform of the action's input schema)" }]));
    expect(() => validateInput(transform, 'bad')).toThrow(/^invalid input for action test\.transform: input: transform blew up \(thrown by/);
    expect(() => validateInput(thrower, 'y')).toThrow(/^invalid input for action test\.thrower: input: x \(thrown by/);
    expect(() => validateInput(asynchronous, { n: 1 })).toThrow(
      "invalid input for action test.async: input: cannot be checked: the action's input schema is asynchronous (an async refine or transform), and Baton checks inputs synchronously; make its refinements and transforms synchronous",
    );
    expect(() => validateInput(asynchronous, { n: 'x' })).toThrow(/input\.n: /); // the synchronous part refuses first
  });
});
