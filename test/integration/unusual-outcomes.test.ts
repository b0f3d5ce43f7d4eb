// What an action ends with, when it is not an ordinary value or error, end to end with a real
// executor and worker on the Postgres queue: a thrown value that cannot be described (throwing
// getters, toString, a Proxy) still fails the execution with a clear error and frees the slot;
// a result JSON cannot hold exactly is refused as UnstorableResult naming the place, never
// changed; and ctx.tag rejects when its tags were not recorded.
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { createActionRegistry, defineAction } from '../../src/actions/index.ts';
import { useOneWorker } from '../support/one-worker.ts';
import { until } from '../support/until.ts';


/** Values an action may throw whose description itself throws. */
const hostile: Record<string, () => unknown> = {
  'toJSON and toString throw': () => ({
    toJSON() {
      throw new Error('no JSON');
    },
    toString() {
      throw new Error('no string');
    },
  }),
  'a null-prototype object holding itself': () => {
    const o = Object.create(null) as Record<string, unknown>;
    o.self = o;
    return o;
  },
  'an Error whose message getter throws': () => {
    class B extends Error {
      override get message(): string {
        throw new Error('getter boom');
      }
    }
    return new B();
  },
  'an Error whose name getter throws': () => {
    class N extends Error {
      override get name(): string {
        throw new Error('name boom');
      }
    }
    return new N('named badly');
  },
  'a Proxy whose every trap throws': () =>
    new Proxy(
      {},
      {
        get() {
          throw 1;
        },
        getPrototypeOf() {
          throw 1;
        },
      },
    ),
};

/** Results JSON cannot hold exactly, and where the refusal must point. */
const unstorable: Record<string, { value: () => unknown; says: RegExp }> = {
  NaN: { value: () => ({ n: NaN }), says: /^the action's result cannot be stored: result\.n: NaN is not a JSON number$/ },
  Map: { value: () => ({ m: new Map([[1, 2]]) }), says: /result\.m: a Map is not JSON/ },
  Set: { value: () => ({ s: new Set([1]) }), says: /result\.s: a Set is not JSON/ },
  Promise: { value: () => ({ p: Promise.resolve(1) }), says: /result\.p: a Promise is not JSON/ },
  'invalid Date': { value: () => ({ d: new Date(NaN) }), says: /result\.d: an invalid Date is not JSON/ },
  Uint8Array: { value: () => ({ bytes: new Uint8Array([1, 2]) }), says: /result\.bytes: a Uint8Array is not JSON/ },
  symbol: { value: () => ({ s: Symbol('x') }), says: /result\.s: a symbol is not JSON/ },
  'function in an object': { value: () => ({ f: () => 1 }), says: /result\.f: a function is not JSON/ },
  'bare function': { value: () => () => 1, says: /^the action's result cannot be stored: result: a function is not JSON$/ },
  cycle: {
    value: () => {
      const o: Record<string, unknown> = { a: { b: {} } };
      (o.a as { b: Record<string, unknown> }).b.up = o.a;
      return o;
    },
    says: /result\.a\.b\.up: is the value at a again \(a cycle\), which JSON cannot hold$/,
  },
  'throwing getter': {
    value: () => ({
      get broken() {
        throw new Error('getter boom');
      },
    }),
    says: /result\.broken: could not be read: its getter threw: getter boom$/,
  },
};

const thrown = new Map<string, () => unknown>();
const results = new Map<string, () => unknown>();
const tagOutcomes = new Map<string, string>();

const actions = createActionRegistry([
  defineAction({
    name: 'odd.throw',
    input: z.object({ kind: z.string() }),
    retry: { maxAttempts: 1 },
    run: ({ kind }) => {
      throw hostile[kind]!();
    },
  }),
  defineAction({ name: 'odd.result', input: z.object({ kind: z.string() }), retry: { maxAttempts: 2 }, run: ({ kind }) => unstorable[kind]!.value() }),
  defineAction({
    name: 'odd.dated',
    input: z.null(),
    run: () => ({ at: new Date('2026-01-02T03:04:05.678Z'), nothing: undefined, list: [1, 'two', null, { deep: true }] }),
  }),
  defineAction({
    name: 'odd.tag',
    input: z.object({ refuse: z.string() }),
    async run({ refuse }, ctx) {
      try {
        await ctx.tag({ refuse });
        tagOutcomes.set(ctx.executionId, 'resolved');
      } catch (err) {
        tagOutcomes.set(ctx.executionId, `rejected: ${(err as Error).message}`);
      }
      return null;
    },
  }),
]);

describe('unusual outcomes of an action', () => {
  const hosts = useOneWorker({ workerId: 'odd', actions });

  it.each(Object.keys(hostile))('fails the execution with a clear error, and frees the slot, when the action throws %s', async (kind) => {
    const { executionId } = await hosts.runtime.submit({ action: 'odd.throw', input: { kind } });
    const events = await hosts.finished(executionId, ['ExecutionCompleted', 'ExecutionFailed', 'ExecutionAbandoned']);
    const failed = events.find((e) => e.type === 'ExecutionFailed');
    expect(failed, events.map((e) => e.type).join(' → ')).toBeDefined();
    const error = (failed!.data as { error: { type: string; message: string } }).error;
    expect(error.type).toMatch(/^(Error|NonError)$/);
    expect(error.message.length).toBeGreaterThan(10);
    if (kind === 'an Error whose message getter throws') expect(error.message).toBe('a thrown value that could not be described (reading its message threw Error: getter boom)');
    if (kind === 'toJSON and toString throw') expect(error.message).toMatch(/^non-error thrown: \{ toJSON: \[Function: toJSON\], toString: \[Function: toString\] \}$/);
    if (kind === 'a null-prototype object holding itself') expect(error.message).toMatch(/\[Object: null prototype\] \{ self: \[Circular \*1\] \}/);
    if (kind === 'a Proxy whose every trap throws') expect(error.message).toMatch(/^non-error thrown: Proxy \[/);
    if (kind === 'an Error whose name getter throws') expect(error).toMatchObject({ type: 'Error', message: 'named badly' });
    await until('the worker to free the slot', () => hosts.worker.inFlight() === 0);
  });

  it.each(Object.keys(unstorable))('refuses a result holding a %s as UnstorableResult, for good, naming the place', async (kind) => {
    const { executionId } = await hosts.runtime.submit({ action: 'odd.result', input: { kind } });
    const events = await hosts.finished(executionId, ['ExecutionCompleted', 'ExecutionFailed', 'ExecutionAbandoned']);
    expect(events.filter((e) => e.type === 'ExecutionStarted')).toHaveLength(1); // not retried: it would return the same
    expect(events.at(-1)).toMatchObject({
      type: 'ExecutionFailed',
      data: { retryable: false, error: { type: 'UnstorableResult', message: expect.stringMatching(unstorable[kind]!.says) } },
    });
  });

  it('stores a result with a Date as its ISO text (its toJSON), leaving out properties that hold undefined', async () => {
    const { executionId } = await hosts.runtime.submit({ action: 'odd.dated', input: null });
    const events = await hosts.finished(executionId, ['ExecutionCompleted', 'ExecutionFailed', 'ExecutionAbandoned']);
    expect(events.at(-1)).toMatchObject({ type: 'ExecutionCompleted' });
    expect(events.at(-1)!.data).toEqual({ result: { at: '2026-01-02T03:04:05.678Z', list: [1, 'two', null, { deep: true }] } });
  });

  it('rejects ctx.tag when the tags could not be recorded (a database error), and resolves when they were', async () => {
    // A real refusal by the database, for this one tag only.
    await hosts.t.db.pool.query(`
      CREATE FUNCTION qa_refuse_tag() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'tag refused by the test'; END $$;
      CREATE TRIGGER qa_refuse_tag BEFORE INSERT ON baton_events FOR EACH ROW
        WHEN (NEW.type = 'ExecutionTagged' AND NEW.data->'tags'->>'refuse' = 'yes') EXECUTE FUNCTION qa_refuse_tag();`);
    try {
      const refused = await hosts.runtime.submit({ action: 'odd.tag', input: { refuse: 'yes' } });
      const accepted = await hosts.runtime.submit({ action: 'odd.tag', input: { refuse: 'no' } });
      const refusedEvents = await hosts.finished(refused.executionId, ['ExecutionCompleted', 'ExecutionFailed', 'ExecutionAbandoned']);
      const acceptedEvents = await hosts.finished(accepted.executionId, ['ExecutionCompleted', 'ExecutionFailed', 'ExecutionAbandoned']);
      expect(tagOutcomes.get(refused.executionId)).toMatch(/^rejected: .*tag refused by the test/);
      expect(refusedEvents.map((e) => e.type)).not.toContain('ExecutionTagged');
      expect(tagOutcomes.get(accepted.executionId)).toBe('resolved');
      expect(acceptedEvents.map((e) => e.type)).toContain('ExecutionTagged');
    } finally {
      await hosts.t.db.pool.query('DROP TRIGGER qa_refuse_tag ON baton_events; DROP FUNCTION qa_refuse_tag()');
    }
  });
});
