// The typed client refuses bad input the same way over the database and over GraphQL: what JSON
// cannot carry (NaN, a Date, a cycle, 5,000 nested arrays), options out of range and a cancel's
// bad reason are InvalidInputError naming the field, before anything is sent or stored, never
// changed on the way (JSON.stringify turns NaN into null and drops undefined) nor an internal error.
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { InvalidInputError, NotFoundError, ResultTimeoutError, createClient, type BatonClient } from '@baton-run/baton';
import { builtinActions } from '../../src/actions/builtin.ts';
import { createActionRegistry } from '../../src/actions/registry.ts';
import { startApiServer } from '../../src/api/server.ts';
import { silentLogger } from '../../src/log.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { useClientPair } from '../support/client-pair.ts';

// No worker: what is submitted stays Requested, so a refused cancel leaves its history as it was.
const { t, clients } = useClientPair();
const requested = async () => (await t.db.pool.query("SELECT count(*)::int AS n FROM baton_events WHERE type = 'ExecutionRequested'")).rows[0].n as number;

/** `call`'s refusal in each mode, checking that the GraphQL client sent nothing for it. */
async function refusals(call: (client: BatonClient) => Promise<unknown>): Promise<Record<'database' | 'graphql', unknown>> {
  const database = await call(clients.database).catch((e: unknown) => e);
  const fetched = vi.spyOn(globalThis, 'fetch');
  try {
    const graphql = await call(clients.graphql).catch((e: unknown) => e);
    expect(fetched).not.toHaveBeenCalled();
    return { database, graphql };
  } finally {
    fetched.mockRestore();
  }
}

const cycle: Record<string, unknown> = { a: 1 };
cycle['self'] = cycle;
const nested = Array.from({ length: 5_000 }).reduce<unknown[]>((inner) => [inner], []);

// Each input, and the refusal both modes give it: the database client's all along.
const NOT_JSON: [string, unknown, string][] = [
  ['NaN', { n: NaN }, 'input.n: NaN is not a JSON number'],
  ['Infinity', { n: -Infinity }, 'input.n: -Infinity is not a JSON number'],
  ['a Date', { at: new Date(0) }, 'input.at: a Date is not JSON'],
  ['an Invalid Date', { at: new Date(NaN) }, 'input.at: a Date is not JSON'],
  ['a Map', { m: new Map([['k', 1]]) }, 'input.m: a Map is not JSON'],
  ['an undefined value', { n: undefined }, 'input.n: undefined is not JSON'],
  ['a function', { f: () => 1 }, 'input.f: a function is not JSON'],
  ['a BigInt', { b: 10n }, 'input.b: a bigint is not JSON'],
  ['a cycle', cycle, 'input.self: is the whole value again (a cycle), which JSON cannot hold'],
  ['5,000 nested arrays', nested, 'nested deeper than 100 levels of arrays and objects'],
  ['5 MB', { text: 'x'.repeat(5_000_000) }, `input: larger than ${4 * 1024 * 1024} bytes as JSON`],
];

describe('what JSON cannot carry is refused alike in both modes, naming where, before anything is sent or stored', () => {
  it.each(NOT_JSON)('submit: %s', async (_, input, message) => {
    const before = await requested();
    const { database, graphql } = await refusals((c) => c.submit('core.echo', input));
    expect(database).toBeInstanceOf(InvalidInputError);
    expect((database as Error).message).toContain(message);
    expect(graphql).toBeInstanceOf(InvalidInputError);
    expect((graphql as Error).message).toBe((database as Error).message);
    expect(await requested()).toBe(before);
  });

  it.each(NOT_JSON)('submitMany: %s, as items[1]', async (_, input, message) => {
    const before = await requested();
    const { database, graphql } = await refusals((c) => c.submitMany([{ action: 'core.noop' }, { action: 'core.echo', input }]));
    expect(database).toBeInstanceOf(InvalidInputError);
    expect((database as Error).message).toContain(message.replace(/^input/, 'items[1].input'));
    expect(graphql).toBeInstanceOf(InvalidInputError);
    expect((graphql as Error).message).toBe((database as Error).message);
    expect(await requested()).toBe(before);
  });
});

it('options out of range (priority NaN, a tag value left undefined) are refused alike in both modes, for submit and each item of submitMany', async () => {
  const before = await requested();
  const cases: [(c: BatonClient) => Promise<unknown>, string][] = [
    [(c) => c.submit('core.noop', null, { priority: NaN }), 'priority: must be from -2147483648 to 2147483647 (got NaN)'],
    [(c) => c.submit('core.noop', null, { maxAttempts: Infinity }), 'maxAttempts: must be from 1 to 1000 (got Infinity)'],
    [(c) => c.submit('core.noop', null, { tags: { a: undefined as never } }), 'tags.a: a tag value must be a string'],
    [(c) => c.submitMany([{ action: 'core.noop' }, { action: 'core.noop', priority: NaN }]), 'items[1].priority: must be from -2147483648 to 2147483647 (got NaN)'],
    // A key used twice for different requests: refused before the first batch is sent, as over the database.
    [(c) => c.submitMany([{ action: 'core.echo', input: 1, idempotencyKey: 'k' }, { action: 'core.echo', input: 2, idempotencyKey: 'k' }]), 'items[1].idempotencyKey: the same key as items[0] with a different request'],
  ];
  for (const [call, message] of cases) {
    const { database, graphql } = await refusals(call);
    expect(database, message).toBeInstanceOf(InvalidInputError);
    expect((database as Error).message).toContain(message);
    expect(graphql, message).toBeInstanceOf(InvalidInputError);
    expect((graphql as Error).message).toBe((database as Error).message);
  }
  expect(await requested()).toBe(before);
});

it('an input undefined is JSON null, and an option left undefined is absent, in both modes alike', async () => {
  for (const client of Object.values(clients)) {
    const { executionId } = await client.submit('core.echo', undefined, { idempotencyKey: undefined, priority: undefined });
    expect((await clients.database.history(executionId))[0]!.data).toMatchObject({ input: null });
  }
});

it('cancel refuses a bad reason alike in both modes, naming `reason` by the rule `baton cancel --reason` and the API use, and records nothing', async () => {
  const cases: [unknown, string][] = [
    ['x'.repeat(2_000), 'reason: must be at most 1000 characters (got 2000)'],
    ['a\u0000b', 'reason: must not contain a NUL character (\\u0000)'],
    [5, 'reason: must be a string'],
    ['  ', 'reason: must not be empty'],
  ];
  const { executionId } = await clients.database.submit('core.noop');
  const events = (await clients.database.history(executionId)).length;
  for (const [reason, message] of cases) {
    const { database, graphql } = await refusals((c) => c.cancel(executionId, reason as string));
    expect(database, message).toBeInstanceOf(InvalidInputError);
    expect((database as Error).message).toBe(message);
    expect(graphql).toBeInstanceOf(InvalidInputError);
    expect((graphql as Error).message).toBe(message);
  }
  expect(await clients.database.history(executionId)).toHaveLength(events);
  // A reason of 1,000 characters is taken, and recorded as given.
  const cancelled = await clients.database.cancel(executionId, 'y'.repeat(1_000));
  expect(cancelled.outcome).toBe('cancelled');
  expect((await clients.database.history(executionId)).at(-1)!.data).toEqual({ reason: 'y'.repeat(1_000) });
});

it('over GraphQL, an input within the JSON limits but larger than the server takes in a request is refused naming it; submitMany sends smaller batches until they fit', async () => {
  const small = await startApiServer({ pool: t.db.pool, runtime: createExecutionRuntime(t.store), store: t.store, actions: createActionRegistry(builtinActions), log: silentLogger(), port: 0, bodyLimitBytes: 64 * 1024 });
  const c = await createClient({ graphqlUrl: small.url });
  try {
    const large = 'x'.repeat(100_000);
    const alone = await c.submit('core.echo', large).catch((e: unknown) => e);
    expect(alone).toBeInstanceOf(InvalidInputError);
    expect((alone as InvalidInputError).problems[0]).toMatchObject({ path: 'input', message: expect.stringMatching(/^is 100002 bytes as JSON, larger than a request the Baton API at .* takes \(its BATON_API_MAX_BODY_BYTES/) });
    // Three items of 30 KB: one request is too large, so they go in smaller ones, all stored.
    const key = randomUUID();
    const before = await requested();
    const many = await c.submitMany([0, 1, 2].map((i) => ({ action: 'core.echo', input: { i, text: 'y'.repeat(30_000) }, tags: { key } })));
    expect(many.every((s) => s.created)).toBe(true);
    expect(await requested()).toBe(before + 3);
    expect((await clients.database.history(many[2]!.executionId))[0]!.data).toMatchObject({ input: { i: 2 } });
    // An item too large alone is named by its place; the items before it were stored.
    const err = await c.submitMany([{ action: 'core.noop' }, { action: 'core.echo', input: large }]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidInputError);
    expect((err as InvalidInputError).problems[0]!.path).toBe('items[1].input');
    expect((err as Error).message).toMatch(/\(items 0 to 0, the earlier batches, were submitted\)$/);
  } finally {
    await c.close();
    await small.close();
  }
});

it('createClient refuses a databaseUrl that is not one, naming the option, before connecting', async () => {
  // Not a ConfigError naming BATON_DATABASE_URL, which the caller never set.
  await expect(createClient({ databaseUrl: 'nope' })).rejects.toThrow(/^databaseUrl: Invalid url: expected postgres:\/\//);
  // Blank would read as unset: the embedded Postgres instead of the database asked for.
  const blank = await createClient({ databaseUrl: ' ' }).catch((e: unknown) => e);
  expect(blank).toBeInstanceOf(InvalidInputError);
  expect((blank as InvalidInputError).problems).toEqual([{ path: 'databaseUrl', message: 'must not be empty' }]);
  // A NUL, refused everywhere else, is not passed on to the driver as part of the database's name.
  await expect(createClient({ databaseUrl: `${t.db.url}\u0000` })).rejects.toThrow(/^databaseUrl: must not contain a NUL character/);
});

it('createClient logs through the pino logger given (databaseUrl), and refuses one that is none and a logger over GraphQL, which logs nothing', async () => {
  const lines: string[] = [];
  const logger = pino({ level: 'trace' }, { write: (line: string) => void lines.push(line) });
  const client = await createClient({ databaseUrl: t.db.url, logger });
  await client.close();
  expect(lines.length).toBeGreaterThan(0);
  await expect(createClient({ databaseUrl: t.db.url, logger: console as never })).rejects.toThrow(/^options\.logger: must be a pino logger/);
  await expect(createClient({ graphqlUrl: 'http://127.0.0.1:1/graphql', logger } as never)).rejects.toThrow(/^options\.logger: /);
  // One way to talk: both URLs are a type error as well as refused.
  // @ts-expect-error databaseUrl and graphqlUrl together
  await expect(createClient({ databaseUrl: t.db.url, graphqlUrl: 'http://127.0.0.1:1/graphql' })).rejects.toThrow(/not both/);
});

it('an unknown item field is refused naming it with the nearest known one, `action` and `input` among them, alike in both modes', async () => {
  const { database, graphql } = await refusals((c) => c.submitMany([{ action: 'core.noop', inptu: 1 } as never]));
  expect(database).toBeInstanceOf(InvalidInputError);
  expect((database as InvalidInputError).problems).toEqual([{ path: 'items[0].inptu', message: 'unknown option; did you mean "input"?' }]);
  expect((graphql as Error).message).toBe((database as Error).message);
  // Nothing near: every field an item takes is listed.
  const far = await refusals((c) => c.submitMany([{ action: 'core.noop', zzz: 1 } as never]));
  expect((far.database as Error).message).toBe('items[0].zzz: unknown option; known: action, input, idempotencyKey, priority, maxAttempts, actionVersion, tags, namespace');
  expect((far.graphql as Error).message).toBe((far.database as Error).message);
});

it('a symbol key, which JSON would drop without a word, is refused naming where, alike in both modes', async () => {
  const before = await requested();
  const cases: [(c: BatonClient) => Promise<unknown>, string][] = [
    [(c) => c.submit('core.echo', { [Symbol('s')]: 1, a: 1 }), 'input: a symbol key (Symbol(s)) is not JSON'],
    [(c) => c.submit('core.echo', { a: [{ [Symbol.for('t')]: 2 }] }), 'input.a.0: a symbol key (Symbol(t)) is not JSON'],
    [(c) => c.submit('core.noop', null, { tags: { [Symbol('k')]: 'v' } as never }), 'tags: a symbol key (Symbol(k)) is not JSON'],
    [(c) => c.submitMany([{ action: 'core.noop' }, { action: 'core.echo', input: { [Symbol('s')]: 1 } }]), 'items[1].input: a symbol key (Symbol(s)) is not JSON'],
  ];
  for (const [call, message] of cases) {
    const { database, graphql } = await refusals(call);
    expect(database, message).toBeInstanceOf(InvalidInputError);
    expect((database as Error).message).toBe(message);
    expect(graphql, message).toBeInstanceOf(InvalidInputError);
    expect((graphql as Error).message).toBe(message);
  }
  expect(await requested()).toBe(before);
});

it('cancel of an execution the store has ended is too-late in both modes, though the read model has not caught up (no projector here)', async () => {
  const { executionId } = await clients.database.submit('core.noop');
  expect(await clients.database.cancel(executionId)).toMatchObject({ outcome: 'cancelled', status: 'Cancelled' });
  expect(await clients.graphql.get(executionId)).toBeUndefined(); // the read model knows nothing of it
  for (const client of Object.values(clients)) {
    expect(await client.cancel(executionId)).toEqual({ executionId, outcome: 'too-late', status: 'Cancelled', message: `execution ${executionId} is already Cancelled` });
  }
});

it('result and updates of an id nothing has are NotFoundError at once in both modes; one only the store has yet is waited for', async () => {
  const unknown = randomUUID();
  for (const client of Object.values(clients)) {
    await expect(client.result(unknown, { timeout: 5_000 }), client.mode).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.updates(unknown)[Symbol.asyncIterator]().next(), client.mode).rejects.toBeInstanceOf(NotFoundError);
  }
  // Stored but not projected (no projector here): it exists, so the wait goes on to the timeout.
  const { executionId } = await clients.database.submit('core.noop');
  for (const client of Object.values(clients)) {
    await expect(client.result(executionId, { timeout: 300 }), client.mode).rejects.toBeInstanceOf(ResultTimeoutError);
  }
});

it('submitMany refuses an undefined item or a hole of a sparse array before anything is stored, alike in both modes', async () => {
  const before = await requested();
  const sparse: unknown[] = [{ action: 'core.noop' }];
  sparse[2] = { action: 'core.noop' };
  for (const items of [sparse, [{ action: 'core.noop' }, undefined], [undefined]]) {
    const { database, graphql } = await refusals((c) => c.submitMany(items as never));
    expect(database).toBeInstanceOf(InvalidInputError);
    expect((database as Error).message).toMatch(/^items\[\d\]: must be an object$/);
    expect((graphql as Error).message).toBe((database as Error).message);
  }
  expect(await requested()).toBe(before);
});

it('result and updates check their options: a timeout a timer cannot hold, an unknown option, a signal that is none', async () => {
  const { executionId } = await clients.database.submit('core.noop');
  for (const c of [clients.database, clients.graphql]) {
    await expect(c.result(executionId, { timeout: 2 ** 31 })).rejects.toThrow(/^timeout: must be a positive number of ms, at most 2147483647/);
    await expect(c.result(executionId, { timout: 10 } as never)).rejects.toThrow(/^options\.timout: unknown option; did you mean "timeout"\?/);
    await expect(c.result(executionId, 5 as never)).rejects.toThrow(/^options: must be an object$/);
    expect(() => c.updates(executionId, { signal: 5 } as never)).toThrow(/^options\.signal: must be an AbortSignal$/);
    expect(() => c.updates(executionId, { signl: new AbortController().signal } as never)).toThrow(/^options\.signl: unknown option; did you mean "signal"\?/);
  }
});

it('createClient refuses a definition of a built-in action\'s name, whose schema would never be the one checked', async () => {
  const { defineAction } = await import('@baton-run/baton');
  const { z } = await import('zod');
  const mine = defineAction({ name: 'core.noop', input: z.object({ must: z.string() }), run: async () => 1 });
  const refused = await createClient({ databaseUrl: t.db.url, actions: [mine] }).catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(InvalidInputError);
  expect((refused as Error).message).toMatch(/^options\.actions\[0\]: "core\.noop" is the name of one of Baton's built-in actions/);
  // The built-in's own definition passed along is no conflict.
  const same = await createClient({ databaseUrl: t.db.url, actions: [builtinActions.find((a) => a.name === 'core.noop')!] });
  await same.close();
});
