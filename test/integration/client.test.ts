// The typed client, both ways it connects, against the real thing: a fresh database, an embedded
// worker with the executor and projector (`@baton-run/baton/worker`), and a real API server. The
// same calls must give the same answers and the same typed errors over the database and over GraphQL.
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import {
  BatonApiError,
  ExecutionFailedError,
  IdempotencyKeyConflictError,
  InvalidActionInputError,
  InvalidInputError,
  NotFoundError,
  ResultTimeoutError,
  SUBMIT_BATCH,
  createClient,
  defineAction,
  type ExecutionView,
  SubmitManyError,
} from '@baton-run/baton';
import { startWorker, type EmbeddedWorker } from '@baton-run/baton/worker';
import { builtinActions } from '../../src/actions/builtin.ts';
import { createActionRegistry } from '../../src/actions/registry.ts';
import { startApiServer } from '../../src/api/server.ts';
import { silentLogger } from '../../src/log.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { useClientPair } from '../support/client-pair.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { runRetention } from '../../src/retention/retention.ts';

const double = defineAction({
  name: 'test.double',
  input: z.object({ n: z.number().int(), label: z.string().default('x') }),
  async run({ n, label }) {
    return { doubled: n * 2, label };
  },
});

let worker: EmbeddedWorker;
const { t, clients, api } = useClientPair({ actions: [double], beforeClose: async () => void (await worker?.stop('test finished')) });
// Submissions only: executions of earlier tests may still be appending their outcomes.
const eventCount = async () => (await t.db.pool.query("SELECT count(*)::int AS n FROM baton_events WHERE type = 'ExecutionRequested'")).rows[0].n as number;

beforeAll(async () => {
  worker = await startWorker({ databaseUrl: t.db.url, actions: [double], executor: true, projector: true, id: `client-test-${process.pid}`, shutdownTimeoutMs: 2_000, logger: silentLogger() });
}, 60_000);

describe.each(['database', 'graphql'] as const)('over the %s', (mode) => {
  const client = () => clients[mode];

  it('submits with the input typed from the action and awaits the typed result', async () => {
    const { executionId, created, status } = await client().submit(double, { n: 21 });
    expect(created).toBe(true);
    expect(status).toBe('Requested');
    const result = await client().result(executionId, { timeout: 20_000 });
    const doubled: number = result.doubled; // typed: a wrong type here would not compile
    expect(doubled).toBe(42);
    expect(result.label).toBe('x');
    expect(client().mode).toBe(mode);
  });

  it('follows the updates until the final state, revisions growing; then get and history agree', async () => {
    const { executionId } = await client().submit(double, { n: 1, label: 'u' });
    const seen: ExecutionView[] = [];
    for await (const u of client().updates(executionId)) seen.push(u);
    expect(seen.at(-1)).toMatchObject({ id: executionId, status: 'Completed', final: true, result: { doubled: 2, label: 'u' }, action: 'test.double' });
    expect(seen.map((u) => u.revision)).toEqual([...seen.map((u) => u.revision)].sort((a, b) => a - b));
    expect(new Set(seen.map((u) => u.revision)).size).toBe(seen.length);
    const history = await client().history(executionId);
    expect(history[0]).toMatchObject({ revision: 0, type: 'ExecutionRequested', state: 'Requested', stateBefore: undefined });
    expect(history.at(-1)).toMatchObject({ type: 'ExecutionCompleted', state: 'Completed', stateBefore: 'Running' });
    expect(await client().get(executionId)).toMatchObject({ status: 'Completed', revision: history.at(-1)!.revision, result: { doubled: 2 } });
  });

  it('an idempotency key finds the first submission; the same key with another input is IdempotencyKeyConflictError', async () => {
    const idempotencyKey = `client-${mode}-${randomUUID()}`;
    const first = await client().submit(double, { n: 5 }, { idempotencyKey, priority: 3 });
    const again = await client().submit(double, { n: 5 }, { idempotencyKey, priority: 3 });
    expect(again).toMatchObject({ executionId: first.executionId, created: false });
    const conflict = await client().submit(double, { n: 6 }, { idempotencyKey, priority: 3 }).catch((e: unknown) => e);
    expect(conflict).toBeInstanceOf(IdempotencyKeyConflictError);
    expect((conflict as Error).message).toMatch(/already used by execution .* with a different request/);
    expect(await client().result(first.executionId, { timeout: 20_000 })).toEqual({ doubled: 10, label: 'x' });
  });

  it('refuses bad input before storing anything, with the typed errors the other doors raise', async () => {
    // @ts-expect-error: n must be a number
    const badInput = await client().submit(double, { n: 'seven' }).catch((e: unknown) => e);
    expect(badInput).toBeInstanceOf(InvalidActionInputError);
    expect((badInput as Error).message).toContain('input.n: Invalid input: expected number, received string');
    const unknownAction = await client().submit('test.dubble', { n: 1 }).catch((e: unknown) => e);
    expect(unknownAction).toBeInstanceOf(InvalidInputError);
    // The API knows test.double and suggests it; the database client was given no actions, so it knows only the built-ins.
    expect((unknownAction as InvalidInputError).problems[0]).toMatchObject({ path: 'action', message: expect.stringContaining('unknown action "test.dubble"') });
    const badKey = await client().submit(double, { n: 1 }, { idempotencyKey: 'k\u0000' }).catch((e: unknown) => e);
    expect(badKey).toBeInstanceOf(InvalidInputError);
    expect((badKey as InvalidInputError).problems[0]!.path).toBe('idempotencyKey');
    const badOption = await client().submit(double, { n: 1 }, { idempotency: 'k' } as never).catch((e: unknown) => e);
    expect(badOption).toBeInstanceOf(InvalidInputError);
    expect((badOption as Error).message).toMatch(/^options\.idempotency: unknown option/);
    const badTag = await client().submit(double, { n: 1 }, { tags: { 'a b': 'c-42' } }).catch((e: unknown) => e);
    expect(badTag).toBeInstanceOf(InvalidInputError);
    expect((badTag as Error).message).toMatch(/^tags\.a b: tag key "a b" may contain only/);
  });

  it('result rejects with ExecutionFailedError when the run fails for good', async () => {
    const { executionId } = await client().submit('core.fail', { message: 'nope', retryable: false });
    const err = await client().result(executionId, { timeout: 20_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExecutionFailedError);
    expect(err).toMatchObject({ executionId, status: 'Failed', error: { message: 'nope' } });
  });

  it('a result not ready within the timeout is ResultTimeoutError; cancel ends it, and result then says Cancelled', async () => {
    const { executionId } = await client().submit('core.sleep', { ms: 60_000 });
    const late = await client().result(executionId, { timeout: 300 }).catch((e: unknown) => e);
    expect(late).toBeInstanceOf(ResultTimeoutError);
    const cancelled = await client().cancel(executionId, 'no longer needed');
    expect(['cancelled', 'cancel-requested']).toContain(cancelled.outcome);
    const err = await client().result(executionId, { timeout: 20_000 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 'Cancelled', reason: 'no longer needed', message: `execution ${executionId} ended as Cancelled: no longer needed` });
    expect(err).toBeInstanceOf(ExecutionFailedError);
    expect(await client().get(executionId)).toMatchObject({ status: 'Cancelled', endReason: 'no longer needed' });
    expect(await client().cancel(executionId)).toMatchObject({ outcome: 'too-late', status: 'Cancelled' });
  });

  it('an unknown id: get is undefined, history, updates and result are NotFoundError', async () => {
    const id = randomUUID();
    expect(await client().get(id)).toBeUndefined();
    await expect(client().history(id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(client().updates(id)[Symbol.asyncIterator]().next()).rejects.toBeInstanceOf(NotFoundError);
    await expect(client().result(id, { timeout: 5_000 })).rejects.toBeInstanceOf(NotFoundError);
  });

  it('records tags and the namespace, which get then shows', async () => {
    const { executionId } = await client().submit(double, { n: 3 }, { tags: { customer: 'c-42' }, namespace: `team-${mode}` });
    expect((await clients.database.history(executionId))[0]!.data).toMatchObject({ tags: { customer: 'c-42' }, namespace: `team-${mode}` });
    await client().result(executionId, { timeout: 20_000 }); // over GraphQL, get reads the read model
    expect(await client().get(executionId)).toMatchObject({ tags: { customer: 'c-42' }, namespace: `team-${mode}` });
    const plain = await client().submit('core.noop');
    await client().result(plain.executionId, { timeout: 20_000 });
    expect(await client().get(plain.executionId)).toMatchObject({ tags: {}, namespace: 'default' });
    const badNamespace = await client().submit('core.noop', undefined, { namespace: 'Team_A' }).catch((e: unknown) => e);
    expect(badNamespace).toBeInstanceOf(InvalidInputError);
    expect((badNamespace as Error).message).toMatch(/namespace/);
  });

  it('submitMany records each item\'s tags and namespace; a key naming a different earlier request is refused alone, naming its index', async () => {
    const key = `many-${mode}-${randomUUID()}`;
    const first = await client().submit('core.echo', 1, { idempotencyKey: key });
    const err = await client()
      .submitMany([
        { action: 'core.noop', tags: { batch: key }, namespace: 'bulk' },
        { action: 'core.echo', input: 2, idempotencyKey: key },
      ])
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdempotencyKeyConflictError);
    expect(err).toMatchObject({ executionId: first.executionId });
    expect((err as Error).message).toMatch(/^items\[1\]: idempotency key ".*" already used by execution .* \(differs in input\) \(the other items were submitted\)$/);
    // Every item's outcome rides on the error, so exactly the others are known to be stored;
    // it is a SubmitManyError as well as the item's own class.
    expect(err).toBeInstanceOf(SubmitManyError);
    expect(new IdempotencyKeyConflictError('k', first.executionId, 'input')).not.toBeInstanceOf(SubmitManyError);
    if (!(err instanceof SubmitManyError)) throw err;
    const results = err.results;
    expect(results).toHaveLength(2);
    expect(results[0]).toMatchObject({ ok: true, submitted: { created: true, status: 'Requested' } });
    expect(results[1]).toMatchObject({ ok: false, error: expect.any(IdempotencyKeyConflictError) });
    const same = await client().submitMany([{ action: 'core.echo', input: 1, idempotencyKey: key }, { action: 'core.noop', tags: { batch: key }, namespace: 'bulk' }]);
    expect(same.map((s) => s.created)).toEqual([false, true]);
    expect(same[0]!.executionId).toBe(first.executionId);
    await client().result(same[1]!.executionId, { timeout: 20_000 });
    expect(await client().get(same[1]!.executionId)).toMatchObject({ tags: { batch: key }, namespace: 'bulk' });
    const badItem = await client().submitMany([{ action: 'core.noop' }, { action: 'core.noop', tags: { 'a b': 'x' } }]).catch((e: unknown) => e);
    expect(badItem).toBeInstanceOf(InvalidInputError);
    expect((badItem as InvalidInputError).problems[0]!.path).toBe('items[1].tags.a b');
  });

  it('submitMany refuses, before storing anything, an item that is no object, a key used twice for different requests, and a fractional priority', async () => {
    const before = await eventCount();
    const key = `twice-${mode}-${randomUUID()}`;
    const cases: [unknown[], RegExp][] = [
      [[{ action: 'core.noop' }, null], /^items\[1\]/],
      [[{ action: 'core.echo', input: 1, idempotencyKey: key }, { action: 'core.echo', input: 2, idempotencyKey: key }], /^items\[1\]\.idempotencyKey: the same key as items\[0\] with a different request/],
      [[{ action: 'core.noop', priority: 1.5 }], /^items\[0\]\.priority: /],
    ];
    for (const [items, message] of cases) {
      const err = await client().submitMany(items as never).catch((e: unknown) => e);
      expect(err, JSON.stringify(items)).toBeInstanceOf(InvalidInputError);
      expect((err as Error).message).toMatch(message);
    }
    expect(await eventCount()).toBe(before);
  });

  it('submitMany submits in order; a bad item is named by its index', async () => {
    const many = await client().submitMany([
      { action: double, input: { n: 2 } },
      { action: 'core.echo', input: { hi: 1 }, priority: 1 },
    ]);
    expect(many).toHaveLength(2);
    expect(await client().result(many[0]!.executionId, { timeout: 20_000 })).toEqual({ doubled: 4, label: 'x' });
    expect(await client().result(many[1]!.executionId, { timeout: 20_000 })).toEqual({ hi: 1 });
    const refused = await client()
      .submitMany([{ action: 'core.echo', input: 1 }, { action: double, input: { n: 'x' } }])
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(InvalidActionInputError);
    expect((refused as Error).message).toMatch(/^items\[1\]: invalid input for action test\.double: input\.n: /);
  });
});

it('over the database, submitMany stores nothing when an item is refused', async () => {
  const key = `many-${randomUUID()}`;
  await expect(clients.database.submitMany([{ action: 'core.echo', input: 1, idempotencyKey: key }, { action: 'core.sleep', input: { ms: -1 } }])).rejects.toThrow(/^items\[1\]: invalid input for action core\.sleep: input\.ms: Too small/);
  const again = await clients.database.submit('core.echo', 1, { idempotencyKey: key });
  expect(again.created).toBe(true);
});

it('over GraphQL, submitMany sends one submitExecutions request per batch of SUBMIT_BATCH items', async () => {
  const posts: string[] = [];
  const realFetch = globalThis.fetch;
  const spy = vi.spyOn(globalThis, 'fetch').mockImplementation((input, init) => {
    if (typeof init?.body === 'string') posts.push(init.body);
    return realFetch(input, init);
  });
  const batch = `batch-${randomUUID()}`;
  let many;
  try {
    many = await clients.graphql.submitMany(Array.from({ length: SUBMIT_BATCH + 1 }, (_, i) => ({ action: 'core.noop', tags: { batch, i: String(i) } })));
  } finally {
    spy.mockRestore();
  }
  expect(posts).toHaveLength(2);
  expect(posts.every((p) => p.includes('submitExecutions'))).toBe(true);
  expect(many).toHaveLength(SUBMIT_BATCH + 1);
  expect(new Set(many.map((s) => s.executionId)).size).toBe(SUBMIT_BATCH + 1);
  expect(many.every((s) => s.created)).toBe(true);
  // Results in the items' order, across the batches.
  const last = many.at(-1)!.executionId;
  expect((await clients.database.history(last))[0]!.data).toMatchObject({ tags: { batch, i: String(SUBMIT_BATCH) } });
  // A bad item of the second batch, of an action only the server knows (this client was given no
  // `actions`), is refused by the server with its batch: named by its place among all the items,
  // and a SubmitManyError whose results say which items were stored (the first batch's).
  const before = await eventCount();
  const err = await clients.graphql
    .submitMany([...Array.from({ length: SUBMIT_BATCH }, () => ({ action: 'core.noop' })), { action: 'test.double', input: { n: 'x' } }])
    .catch((e: unknown) => e);
  expect(err).toBeInstanceOf(InvalidActionInputError);
  expect((err as Error).message).toMatch(new RegExp(`^items\\[${SUBMIT_BATCH}\\]: invalid input for action test\\.double: input\\.n: .*\\(items 0 to ${SUBMIT_BATCH - 1}, the earlier batches, were submitted\\)$`));
  expect(err).toBeInstanceOf(SubmitManyError);
  const results = (err as SubmitManyError).results;
  expect(results).toHaveLength(SUBMIT_BATCH + 1);
  expect(results.slice(0, SUBMIT_BATCH).every((r) => r.ok && r.submitted.created)).toBe(true);
  expect(results[SUBMIT_BATCH]).toMatchObject({ ok: false });
  expect((results[SUBMIT_BATCH] as { error: Error }).error).toBe(err);
  expect(await eventCount()).toBe(before + SUBMIT_BATCH);
}, 60_000);

it('over GraphQL, submitMany takes a server\'s lower BATON_API_MAX_SUBMIT_BATCH: the refused batch (nothing of it stored) goes again in batches the server takes', async () => {
  const small = await startApiServer({ pool: t.db.pool, runtime: createExecutionRuntime(t.store), store: t.store, actions: createActionRegistry([...builtinActions, double]), log: silentLogger(), port: 0, limits: { maxSubmitBatch: 100 } });
  const posts: number[] = [];
  const realFetch = globalThis.fetch;
  const spy = vi.spyOn(globalThis, 'fetch').mockImplementation((input, init) => {
    if (typeof init?.body === 'string' && init.body.includes('submitExecutions')) posts.push((JSON.parse(init.body).variables.inputs as unknown[]).length);
    return realFetch(input, init);
  });
  const c = await createClient({ graphqlUrl: small.url });
  try {
    const before = await eventCount();
    const many = await c.submitMany(Array.from({ length: 250 }, (_, i) => ({ action: 'core.echo', input: { i } })));
    expect(many).toHaveLength(250);
    expect(many.every((s) => s.created)).toBe(true);
    expect(await eventCount()).toBe(before + 250);
    expect(posts).toEqual([250, 100, 100, 50]);
    expect((await clients.database.history(many[249]!.executionId))[0]!.data).toMatchObject({ input: { i: 249 } });
  } finally {
    spy.mockRestore();
    await c.close();
    await small.close();
  }
}, 60_000);

it('createClient refuses options it does not understand', async () => {
  await expect(createClient({ databaseUrl: t.db.url, graphqlUrl: api().url } as never)).rejects.toThrow(/either databaseUrl .* or graphqlUrl/);
  await expect(createClient({ graphqlUrl: api().url, tokn: 'x' } as never)).rejects.toThrow(/^options\.tokn: unknown option; did you mean "token"\?$/);
  await expect(createClient({ graphqlUrl: api().url, zzz: 'x' } as never)).rejects.toThrow(/^options\.zzz: unknown option; known: graphqlUrl, token, actions$/);
  await expect(createClient({ graphqlUrl: 'ftp://x' })).rejects.toThrow(/graphqlUrl: must be an http\(s\) URL/);
});

it('the embedded worker reports its health', () => {
  expect(worker.health()).toEqual({ healthy: true, problems: [] });
  expect(worker.workerId).toBe(`client-test-${process.pid}`);
});

it('over GraphQL with tokens: the admin token submits, the read token reads, and a refusal is BatonApiError with the code', async () => {
  const adminToken = `admin-${randomUUID()}`;
  const readToken = `read-${randomUUID()}`;
  const secured = await startApiServer({ pool: t.db.pool, runtime: createExecutionRuntime(t.store), store: t.store, actions: createActionRegistry([...builtinActions, double]), log: silentLogger(), port: 0, adminToken, readToken });
  const admin = await createClient({ graphqlUrl: secured.url, token: adminToken });
  const reader = await createClient({ graphqlUrl: secured.url, token: readToken });
  const nobody = await createClient({ graphqlUrl: secured.url });
  try {
    const { executionId } = await admin.submit(double, { n: 4 });
    expect(await reader.result(executionId, { timeout: 20_000 })).toEqual({ doubled: 8, label: 'x' });
    await expect(reader.submit(double, { n: 1 })).rejects.toMatchObject({ name: 'BatonApiError', code: 'FORBIDDEN' });
    const refused = await nobody.get(executionId).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(BatonApiError);
    expect(refused).toMatchObject({ code: 'UNAUTHENTICATED' });
  } finally {
    await Promise.all([admin.close(), reader.close(), nobody.close()]);
    await secured.close();
  }
});

it('refuses an id that is not an execution id the same way in both modes, before asking anyone', async () => {
  for (const client of Object.values(clients)) {
    for (const call of [() => client.get('nope'), () => client.history('a\u0000b'), () => client.cancel('x'), () => client.result('1; DROP TABLE x')]) {
      await expect(call()).rejects.toThrow(/^id: must be an execution id \(a UUID\)$/);
    }
    expect(() => client.updates('nope')).toThrow(InvalidInputError);
  }
});

it('over GraphQL, result of an execution retention archived answers from the archive at once', async () => {
  const { executionId } = await clients.graphql.submit(double, { n: 10 });
  expect(await clients.graphql.result(executionId, { timeout: 20_000 })).toEqual({ doubled: 20, label: 'x' });
  const archiveDir = await mkdtemp(path.join(os.tmpdir(), 'baton-client-archive-'));
  try {
    // Once the projector has applied its end (retention skips it until then), an hour on.
    const later = () => new Date(Date.now() + 3_600_000);
    for (const until = Date.now() + 15_000; (await t.store.readStream(executionStreamId(executionId))).length > 0; ) {
      if (Date.now() > until) throw new Error('retention did not archive the execution within 15 s');
      await runRetention({ pool: t.db.pool, store: t.store, olderThanMs: 60_000, archiveDir, now: later });
    }
    const started = performance.now();
    expect(await clients.graphql.result(executionId, { timeout: 5_000 })).toEqual({ doubled: 20, label: 'x' });
    expect(performance.now() - started).toBeLessThan(2_000); // not the updates' 10 s wait for an execution they cannot find
  } finally {
    await rm(archiveDir, { recursive: true, force: true });
  }
}, 40_000);
