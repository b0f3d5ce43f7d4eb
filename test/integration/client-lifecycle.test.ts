// The typed client's own lifecycle, alike in both modes: createClient checks the types of its
// options before it opens anything; after close() every call is BatonApiError CLOSED, and a
// result or updates still waiting then rejects with it rather than never settling; a database it
// cannot reach is blamed on the `databaseUrl` option, not on BATON_DATABASE_URL.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { BatonApiError, DatabaseUnavailableError, DuplicateActionError, InvalidInputError, createClient, defineAction, type BatonClient } from '@baton-run/baton';
import { builtinActions } from '../../src/actions/builtin.ts';
import { createActionRegistry } from '../../src/actions/registry.ts';
import { startApiServer, type ApiServer } from '../../src/api/server.ts';
import { silentLogger } from '../../src/log.ts';
import { startProjector, type Projector } from '../../src/readmodel/projector-host.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { useTestStore } from '../support/test-store.ts';

const double = defineAction({ name: 'test.double', input: z.object({ n: z.number() }), run: async ({ n }) => n * 2 });

// The projector, so the GraphQL client's updates see rows; no executor, so what is submitted stays Requested.
let projector: Projector;
let api: ApiServer;
const t = useTestStore({
  max: 10,
  beforeClose: async () => {
    await api?.close();
    await projector?.stop();
  },
});

beforeAll(async () => {
  projector = startProjector({ pool: t.db.pool, store: t.store, log: silentLogger() });
  api = await startApiServer({ pool: t.db.pool, runtime: createExecutionRuntime(t.store), store: t.store, actions: createActionRegistry(builtinActions), log: silentLogger(), port: 0 });
});

afterAll(() => vi.unstubAllEnvs());

const open = (mode: 'database' | 'graphql') => (mode === 'database' ? createClient({ databaseUrl: t.db.url }) : createClient({ graphqlUrl: api.url }));

it('createClient refuses options of the wrong type, naming each, before opening anything', async () => {
  // Nowhere to connect: a check made only after connecting fails otherwise (at once: BATON_DB_WAIT=0).
  vi.stubEnv('BATON_DB_WAIT', '0');
  const nowhere = 'postgres://postgres@127.0.0.1:1/nowhere';
  const cases: [Record<string, unknown>, string, string][] = [
    [{ databaseUrl: nowhere, actions: {} }, 'options.actions', 'must be an array of actions built with defineAction'],
    [{ databaseUrl: nowhere, actions: [double, { name: 'x.y' }] }, 'options.actions[1]', 'not an action: build it with defineAction({ name, input, run })'],
    [{ graphqlUrl: api.url, actions: 'test.double' }, 'options.actions', 'must be an array of actions built with defineAction'],
    [{ graphqlUrl: api.url, token: 5 }, 'options.token', 'must be a string (a bearer token)'],
    [{ graphqlUrl: api.url, token: 'a b' }, 'options.token', 'Invalid token: expected printable ASCII without spaces'],
    [{ graphqlUrl: api.url, tokn: 'x' }, 'options.tokn', 'unknown option; did you mean "token"?'],
    [{ databaseUrl: new URL(nowhere) }, 'databaseUrl', 'must be a string (postgres://…)'],
  ];
  for (const [options, path, message] of cases) {
    const err = await createClient(options as never).catch((e: unknown) => e);
    expect(err, path).toBeInstanceOf(InvalidInputError);
    expect((err as InvalidInputError).problems).toEqual([{ path, message }]);
  }
  await expect(createClient({ databaseUrl: nowhere, actions: [double, double] })).rejects.toBeInstanceOf(DuplicateActionError);
  // `actions` over GraphQL too (the client checks their inputs before sending); an empty token is none.
  const c = await createClient({ graphqlUrl: api.url, actions: [double], token: '' });
  await c.close();
  vi.unstubAllEnvs();
});

describe.each(['database', 'graphql'] as const)('over the %s', (mode) => {
  it('after close() every call is BatonApiError CLOSED, sending nothing; close() again is fine', async () => {
    const client = await open(mode);
    const { executionId } = await client.submit('core.noop');
    await client.close();
    const fetched = vi.spyOn(globalThis, 'fetch');
    try {
      const calls: [string, (c: BatonClient) => Promise<unknown>][] = [
        ['submit', (c) => c.submit('core.noop')],
        ['submitMany', (c) => c.submitMany([{ action: 'core.noop' }])],
        ['result', (c) => c.result(executionId, { timeout: 1_000 })],
        ['cancel', (c) => c.cancel(executionId)],
        ['get', (c) => c.get(executionId)],
        ['history', (c) => c.history(executionId)],
        ['updates', async (c) => c.updates(executionId)],
      ];
      for (const [name, call] of calls) {
        const err = await call(client).catch((e: unknown) => e);
        expect(err, name).toBeInstanceOf(BatonApiError);
        expect(err, name).toMatchObject({ code: 'CLOSED', message: 'the client is closed (close() was called): create another with createClient' });
      }
      expect(fetched).not.toHaveBeenCalled();
    } finally {
      fetched.mockRestore();
    }
    await client.close();
  });

  it('a result or updates still waiting when the client closes rejects with CLOSED, naming the execution', async () => {
    const client = await open(mode);
    const { executionId } = await client.submit('core.sleep', { ms: 60_000 });
    const updates = client.updates(executionId)[Symbol.asyncIterator]();
    expect((await updates.next()).value).toMatchObject({ id: executionId, status: 'Requested' });
    const next = updates.next();
    const result = client.result(executionId);
    await client.close();
    await expect(next).rejects.toMatchObject({ name: 'BatonApiError', code: 'CLOSED', message: `the client was closed while waiting for execution ${executionId} to finish (it is Requested)` });
    await expect(result).rejects.toMatchObject({ name: 'BatonApiError', code: 'CLOSED', message: expect.stringMatching(new RegExp(`^the client was closed while waiting for execution ${executionId} to finish`)) });
  });
});

it('a database it cannot reach is named as the databaseUrl option, with no word of BATON_DATABASE_URL or the embedded Postgres', async () => {
  vi.stubEnv('BATON_DB_WAIT', '0'); // one try
  const err = await createClient({ databaseUrl: 'postgres://postgres@127.0.0.1:1/nowhere' }).catch((e: unknown) => e);
  vi.unstubAllEnvs();
  expect(err).toBeInstanceOf(DatabaseUnavailableError);
  expect((err as Error).message).toMatch(/^cannot connect to Postgres at postgres:\/\/postgres@127\.0\.0\.1:1\/nowhere \(from databaseUrl\): connect ECONNREFUSED .*; is the server running and reachable\?$/);
  // A database that does not exist: the option is what to change.
  const missing = await createClient({ databaseUrl: `${t.db.url}_missing` }).catch((e: unknown) => e);
  expect(missing).toBeInstanceOf(DatabaseUnavailableError);
  expect((missing as Error).message).toMatch(/\(from databaseUrl\): database ".*_missing" does not exist; create it first, or point databaseUrl at an existing database\.$/);
});
