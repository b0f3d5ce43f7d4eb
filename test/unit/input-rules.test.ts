// The input rules (src/input) on their own, and where they stand in for a recursive or lax
// check: the event catalog, action definitions, action input, config and error records.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ExecutionEvent } from '../../schemas/events.ts';
import { WorkflowEvent } from '../../schemas/workflow-events.ts';
import { InvalidActionDefinitionError, defineAction, toErrorInfo } from '../../src/actions/action.ts';
import { echo } from '../../src/actions/builtin.ts';
import { createActionRegistry, validateInput } from '../../src/actions/registry.ts';
import { builtinActions } from '../../src/actions/builtin.ts';
import { loadConfig, NON_CONFIG_VARIABLES } from '../../src/config.ts';
import { ConfigError, InvalidEventError } from '../../src/errors.ts';
import { InvalidInputError } from '../../src/input/errors.ts';
import { nearestName, unknownNameMessage } from '../../src/input/nearest.ts';
import {
  JSON_LIMITS,
  bigintTextProblem,
  dateTimeProblem,
  formatPath,
  jsonProblems,
  returnedJson,
  storableText,
  textProblem,
  sameJson,
} from '../../src/input/rules.ts';
import { jsonValue, zodProblems } from '../../src/input/schemas.ts';
import { checkSubmission } from '../../src/runtime/submission.ts';

/** `depth` arrays inside each other, built without recursion. */
export function nestedArrays(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}
function nestedObjects(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

describe('text', () => {
  it('refuses NUL and lone surrogates, and text over its length; keeps emoji and other unicode', () => {
    expect(textProblem('a\u0000b')).toMatch(/NUL/);
    expect(textProblem('a\uD800b')).toMatch(/lone UTF-16 surrogate/);
    expect(textProblem('\uDC00')).toMatch(/lone UTF-16 surrogate/);
    expect(textProblem('x'.repeat(11), { maxLength: 10 })).toBe('must be at most 10 characters (got 11)');
    expect(textProblem('  ', { required: true })).toBe('must not be empty');
    expect(textProblem(42)).toBe('must be a string');
    for (const fine of ['', 'plain', '😀 \u202e\ufeff ünïcödé \u0001', 'x'.repeat(10_000)]) expect(textProblem(fine), fine).toBeUndefined();
  });

  it('makes what must be recorded storable instead (error messages)', () => {
    expect(storableText('a\u0000b\uD800c😀')).toBe('a\uFFFDb\uFFFDc😀');
    const info = toErrorInfo(new Error('bad \u0000 value \uDFFF'));
    expect(info.message).toBe('bad \uFFFD value \uFFFD');
    expect(ExecutionEvent.safeParse({ type: 'ExecutionFailed', data: { error: info, retryable: false }, metadata: { by: 'worker:w', occurredAt: '2026-01-01T00:00:00Z' } }).success).toBe(true);
  });
});

describe('JSON', () => {
  it('walks 100,000 levels without overflowing the stack, and refuses past 100', () => {
    expect(jsonProblems(nestedArrays(JSON_LIMITS.maxDepth))).toEqual([]);
    for (const deep of [nestedArrays(101), nestedArrays(100_000), nestedObjects(100_000)]) {
      const [problem, ...rest] = jsonProblems(deep);
      expect(problem!.message).toBe('nested deeper than 100 levels of arrays and objects');
      expect(rest).toEqual([]);
    }
  });

  it('names the place of NUL and lone surrogates in strings and keys', () => {
    expect(jsonProblems({ a: { b: ['ok', 'x\u0000'] } })).toEqual([{ path: ['a', 'b', 1], message: expect.stringMatching(/NUL/) }]);
    expect(jsonProblems({ ['k\uD800']: 1 })).toEqual([{ path: ['k\uD800'], message: expect.stringMatching(/^key must not contain a lone UTF-16 surrogate/) }]);
    expect(formatPath(['a', 'k\u0000', 3])).toBe('a.k\\u0000.3');
  });

  it('refuses what is not JSON, and values over the size limit', () => {
    for (const [value, message] of [
      [Number.NaN, /NaN is not a JSON number/],
      [{ a: undefined }, /undefined is not JSON/],
      [{ d: new Date(0) }, /a Date is not JSON/],
      [[() => 1], /a function is not JSON/],
      [10n, /a bigint is not JSON/],
    ] as const) {
      expect(jsonProblems(value)[0]?.message, String(message)).toMatch(message);
    }
    expect(jsonProblems('x'.repeat(100), { maxDepth: 100, maxBytes: 50 })).toEqual([{ path: [], message: 'larger than 50 bytes as JSON' }]);
    // A value that shares one child many times over is as large as what it would be written out as.
    let shared: unknown = 'x'.repeat(1_000);
    for (let i = 0; i < 40; i++) shared = [shared, shared];
    expect(jsonProblems(shared)).toEqual([{ path: [], message: `larger than ${JSON_LIMITS.maxBytes} bytes as JSON` }]);
  });

  it('names a cycle where it closes, and a getter or Proxy that throws, instead of throwing itself', () => {
    const o: Record<string, unknown> = { list: [{}] };
    (o.list as Record<string, unknown>[])[0]!.back = o.list;
    expect(jsonProblems(o)).toEqual([{ path: ['list', 0, 'back'], message: 'is the value at list again (a cycle), which JSON cannot hold' }]);
    const getter = {
      get g() {
        throw new Error('boom');
      },
    };
    expect(jsonProblems(getter)).toEqual([{ path: ['g'], message: 'could not be read: its getter threw: boom' }]);
    const proxy = new Proxy({}, { getPrototypeOf: () => { throw 1; } });
    expect(jsonProblems({ p: proxy })).toEqual([{ path: ['p'], message: 'could not be read: it threw: 1' }]);
  });

  it('takes what code returned as JSON.stringify would, but refuses what it would change, and refuses a huge array before walking it', () => {
    const when = new Date('2026-01-02T03:04:05.000Z');
    const given = { when, gone: undefined, list: [1, 'a', null, { x: true }], ['__proto__']: 'a key' };
    const r = returnedJson(given);
    expect(r).toEqual({ json: { when: '2026-01-02T03:04:05.000Z', list: [1, 'a', null, { x: true }], ['__proto__']: 'a key' } });
    expect(Object.getPrototypeOf(r.json)).toBe(Object.prototype); // the key stayed a key
    (given.list[3] as { x: boolean }).x = false;
    expect(r.json).toMatchObject({ list: [1, 'a', null, { x: true }] }); // a copy
    for (const [value, problem] of [
      [{ n: Number.NaN }, { path: ['n'], message: 'NaN is not a JSON number' }],
      [[undefined], { path: [0], message: 'undefined is not JSON' }],
      [{ d: new Date(Number.NaN) }, { path: ['d'], message: 'an invalid Date is not JSON (its toJSON gives null)' }],
      [new Map(), { path: [], message: expect.stringMatching(/^a Map is not JSON/) }],
      [{ t: { toJSON: () => new Set() } }, { path: ['t'], message: expect.stringMatching(/^a Set is not JSON/) }],
    ] as const) {
      expect(returnedJson(value)).toEqual({ problem });
    }
    const huge = Array.from({ length: 3_000_000 }, () => 0);
    const t0 = performance.now();
    expect(returnedJson(huge)).toEqual({ problem: { path: [], message: `larger than ${JSON_LIMITS.maxBytes} bytes as JSON` } });
    expect(performance.now() - t0).toBeLessThan(100); // was 2.8 s of blocked event loop
  });

  it('is what the event catalog and the built-in actions check, so a deep value is an InvalidEventError, not a stack overflow', () => {
    const requested = (input: unknown) => ({ type: 'ExecutionRequested', data: { action: 'core.echo', input, maxAttempts: 1 }, metadata: { by: 'executor', occurredAt: '2026-01-01T00:00:00Z' } });
    const deep = ExecutionEvent.safeParse(requested(nestedArrays(10_000)));
    expect(deep.success).toBe(false);
    expect(deep.error!.issues[0]!.path.slice(0, 3)).toEqual(['data', 'input', 0]);
    expect(ExecutionEvent.safeParse(requested({ k: 'a\u0000' })).error!.issues[0]).toMatchObject({ path: ['data', 'input', 'k'], message: expect.stringMatching(/NUL/) });
    expect(ExecutionEvent.safeParse(requested({ fine: [1, 'two', null] })).success).toBe(true);
    const finished = { type: 'WorkflowStepFinished', data: { stepId: 'a', executionId: 'x', outcome: 'Completed', result: nestedObjects(5_000) }, metadata: { by: 'executor', occurredAt: '2026-01-01T00:00:00Z' } };
    expect(WorkflowEvent.safeParse(finished).success).toBe(false);
    expect(() => validateInput(echo, nestedArrays(5_000))).toThrow(/input\.0\.0.*nested deeper than 100 levels/);
    expect(jsonValue().safeParse({ ok: true }).success).toBe(true);
  });
});

describe('sameJson', () => {
  it('compares values: key order and prototypes aside, types and lengths not', () => {
    const bare = Object.assign(Object.create(null), { a: [1, { b: 'x' }] });
    expect(sameJson(bare, { a: [1, { b: 'x' }] })).toBe(true);
    expect(sameJson({ a: 1, b: 2 }, { b: 2, a: 1 })).toBe(true);
    expect(sameJson({ a: 1 }, { a: '1' })).toBe(false);
    expect(sameJson({ a: 1 }, { a: 1, b: undefined })).toBe(false);
    expect(sameJson([1, 2], [2, 1])).toBe(false);
    expect(sameJson([], {})).toBe(false);
    expect(sameJson(null, {})).toBe(false);
  });
});

describe('date-times and positions', () => {
  it('accepts years 0001 to 9999 in UTC, and refuses year 0 and what JavaScript writes with six digits', () => {
    expect(dateTimeProblem('2026-05-01T12:00:00+02:00')).toEqual({ iso: '2026-05-01T10:00:00.000Z' });
    expect(dateTimeProblem('0001-01-01T00:00:00Z')).toEqual({ iso: '0001-01-01T00:00:00.000Z' });
    expect(dateTimeProblem('9999-12-31T23:59:59.999Z')).toEqual({ iso: '9999-12-31T23:59:59.999Z' });
    for (const bad of ['0000-01-01T00:00:00Z', '0001-01-01T00:30:00+01:00', '9999-12-31T23:59:59-01:00']) {
      expect(dateTimeProblem(bad), bad).toEqual({ problem: expect.stringMatching(/^must be from 0001-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z/) });
    }
    expect(dateTimeProblem('2026-05-01T12:00:00.123456789-0130')).toEqual({ iso: '2026-05-01T13:30:00.123Z' });
    for (const bad of ['yesterday', '2026-05-01', '2026-05-01T12:00:00', '2026-05-01T12:00:00+02', '2026-05-01t12:00:00z']) {
      expect(dateTimeProblem(bad), bad).toEqual({ problem: expect.stringMatching(/^must be an ISO 8601 date-time with a time zone/) });
    }
    // What the calendar lacks is said as such, as GraphQL's DateTime says it.
    expect(dateTimeProblem('2026-02-30T00:00:00Z')).toEqual({ problem: 'not a real date: 2026-02 has no day 30' });
    expect(dateTimeProblem('2026-13-01T00:00:00Z')).toEqual({ problem: 'not a real date: there is no month 13' });
    expect(dateTimeProblem('+010000-01-01T00:00:00Z')).toEqual({ problem: expect.stringMatching(/^must be from 0001-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z/) });
  });

  it('keeps positions within Postgres bigint', () => {
    expect(bigintTextProblem('9223372036854775807')).toBeUndefined();
    expect(bigintTextProblem('0')).toBeUndefined();
    for (const bad of ['9223372036854775808', '9999999999999999999', '-1', '1e3', '', '12345678901234567890']) expect(bigintTextProblem(bad), bad).toMatch(/from 0 to 9223372036854775807/);
  });
});

describe('nearest names', () => {
  it('suggests the close name, or the alias people use, and nothing far', () => {
    expect(nearestName('dependOn', ['id', 'action', 'input', 'dependsOn', 'inputFrom'])).toBe('dependsOn');
    expect(nearestName('depends_on', ['dependsOn'])).toBe('dependsOn');
    expect(nearestName('inputs', ['id', 'action', 'input', 'dependsOn', 'inputFrom'])).toBe('input');
    expect(nearestName('after', ['id', 'action', 'input', 'dependsOn'], { after: 'dependsOn' })).toBe('dependsOn');
    expect(nearestName('after', ['id', 'action', 'input', 'dependsOn'])).toBeUndefined();
    expect(nearestName('BATON_DATABSE_URL', ['BATON_DATABASE_URL', 'BATON_DATA_DIR'])).toBe('BATON_DATABASE_URL');
    expect(nearestName('zzz', ['id', 'action'])).toBeUndefined();
    expect(nearestName('nmae', ['name', 'onFailure', 'steps'])).toBe('name'); // a swap is one edit
    expect(unknownNameMessage('field', 'zzz', ['a', 'b'])).toBe('unknown field; known: a, b');
  });

  it('turns zod’s unknown keys into one problem each, at its path, with the nearest field', () => {
    const schema = z.strictObject({ steps: z.array(z.strictObject({ dependsOn: z.array(z.string()).optional(), timeoutMs: z.number().optional() })) });
    const r = schema.safeParse({ steps: [{}, { dependOn: [], timeout: 1 }], extra: 1 });
    expect(zodProblems(r.error!, schema)).toEqual([
      { path: 'steps.1.dependOn', message: 'unknown field; did you mean "dependsOn"?' },
      { path: 'steps.1.timeout', message: 'unknown field; did you mean "timeoutMs"?' },
      { path: 'extra', message: 'unknown field; known: steps' },
    ]);
  });
});

describe('what uses the rules', () => {
  it('defineAction refuses an unknown option, naming the one probably meant', () => {
    const spec = { name: 'test.opt', input: z.object({}), run: () => null };
    const refused = (extra: Record<string, unknown>) => {
      try {
        defineAction({ ...spec, ...extra } as never);
      } catch (err) {
        expect(err).toBeInstanceOf(InvalidActionDefinitionError);
        return (err as Error).message;
      }
      throw new Error('accepted');
    };
    expect(refused({ timeout: 1_000 })).toMatch(/timeout: unknown field; did you mean "timeoutMs"\?/);
    expect(refused({ retries: 3 })).toMatch(/retries: unknown field; did you mean "retry"\?/);
    expect(refused({ retry: { maxAttempts: 2, initialIntervalMs: 1, multiplier: 2, maxIntervalMs: 5, maxAttempt: 3 } })).toMatch(/retry\.maxAttempt: unknown field; did you mean "maxAttempts"\?/);
    expect(refused({ concurrency: { limit: 1 }, stallTimeout: 5 })).toMatch(/stallTimeout: unknown field; did you mean "stallTimeoutMs"\?/);
  });

  it('config refuses an unknown BATON_* variable, naming the one probably meant, and lets the others be', () => {
    expect(() => loadConfig({ BATON_DATABSE_URL: 'postgres://x/y' })).toThrow(ConfigError);
    expect(() => loadConfig({ BATON_DATABSE_URL: 'postgres://x/y' })).toThrow(/BATON_DATABSE_URL: unknown variable; did you mean "BATON_DATABASE_URL"\?/);
    expect(() => loadConfig({ BATON_FLAVOUR: 'mint', BATON_LOG_LEVEL: 'loud' })).toThrow(/BATON_LOG_LEVEL: Invalid log level.*BATON_FLAVOUR: unknown variable$/);
    const fine = Object.fromEntries(NON_CONFIG_VARIABLES.map((k) => [k, '1']));
    expect(() => loadConfig({ ...fine, OTHER_TOOL_VAR: 'x' })).not.toThrow();
    expect(NON_CONFIG_VARIABLES).toEqual(expect.arrayContaining(['BATON_ENV_FILE', 'BATON_COMPOSE_PG_PORT', 'BATON_REQUIRE_NATS']));
  });

  it('the submission check finds every problem at once, naming each by the caller’s names', () => {
    const actions = createActionRegistry([...builtinActions]);
    const names = { action: 'action', input: '--input', idempotencyKey: '--key', maxAttempts: '--max-attempts', priority: '--priority', tags: '--tag', actionVersion: '--action-version' };
    try {
      checkSubmission(actions, { action: 'core.slep', input: { a: 'x\u0000' }, idempotencyKey: '', maxAttempts: 0, priority: 2 ** 31 }, names);
      throw new Error('accepted');
    } catch (err) {
      expect(err).toBeInstanceOf(InvalidInputError);
      const e = err as InvalidInputError;
      expect(e.problems.map((p) => p.path)).toEqual(['action', '--input (at a)', '--key', '--max-attempts', '--priority']);
      expect(e.describe({ listKnown: false })).toMatch(/^action: unknown action "core.slep"; did you mean "core.sleep"\?; --input/);
      expect(e.describe({ listKnown: false })).not.toMatch(/known actions/);
      expect(e.message).toMatch(/known actions: core\.echo, core\.fail, core\.noop, core\.sleep, http\.request/);
    }
    expect(checkSubmission(actions, { action: 'core.echo' })).toEqual({ action: 'core.echo', input: null });
    expect(() => checkSubmission(actions, { action: 'core.sleep', input: { ms: 'x' } })).toThrow(InvalidEventError);
  });

  it('the submission check refuses whole numbers JSON cannot hold exactly in an input, and takes null for an absent option', () => {
    const actions = createActionRegistry([...builtinActions]);
    // What JSON.parse made of 12345678901234567891: already rounded, so storing it would change it silently.
    const rounded = JSON.parse('{"order": 12345678901234567891}') as { order: number };
    expect(() => checkSubmission(actions, { action: 'core.echo', input: rounded })).toThrow(/^input\.order: is a whole number past ±9007199254740991, which JSON numbers cannot hold exactly .*send it as a string/);
    expect(checkSubmission(actions, { action: 'core.echo', input: { n: Number.MAX_SAFE_INTEGER, f: 0.5, tiny: 1.5e-300 } })).toMatchObject({ input: { n: Number.MAX_SAFE_INTEGER } });
    // A double that large is a whole number too, and JSON cannot say it was meant as one: refused alike.
    expect(() => checkSubmission(actions, { action: 'core.echo', input: [1.5e300] })).toThrow(/^input\.0: is a whole number past/);
    expect(jsonProblems({ result: 1e300 })).toEqual([]); // what code returns is not held to it
    const absent = { idempotencyKey: null, maxAttempts: null, priority: null, namespace: null, actionVersion: null, tags: null } as never;
    expect(checkSubmission(actions, { action: 'core.noop', ...(absent as object) })).toEqual({ action: 'core.noop', input: null });
    expect(() => checkSubmission(actions, { action: 'core.noop', priority: '5' as never })).toThrow(/priority: must be from -2147483648 to 2147483647 \(got the string "5": a whole number is wanted\)/);
    // Inside the range but not whole: that is what is wrong with it.
    expect(() => checkSubmission(actions, { action: 'core.noop', priority: 1.5 })).toThrow(/^priority: must be a whole number from -2147483648 to 2147483647 \(got 1\.5\)$/);
    expect(() => checkSubmission(actions, { action: 'core.noop', maxAttempts: 2.5 })).toThrow(/^maxAttempts: must be a whole number from 1 to /);
  });
});
