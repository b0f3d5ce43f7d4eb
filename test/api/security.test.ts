// What keeps the API safe to expose, over real HTTP: tokens, CSRF prevention, POST-only
// mutations, the body limit, graphql-armor's limits, masked errors and clean outages.
import { getIntrospectionQuery } from 'graphql';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { startApiServer } from '../../src/api/server.ts';
import { ConfigError } from '../../src/errors.ts';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { CSRF_HEADER, actions, gql, log, useApi } from './api-harness.ts';

const SUBMIT_NOOP = `mutation { submitExecution(action: "core.noop") { executionId } }`;
const LIST = `{ executions(first: 1) { edges { node { id } } } }`;
const countEvents = async (pool: pg.Pool) => (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM baton_events')).rows[0]!.n;
/** No stack frames, SQL or driver internals in a response body. */
const expectNoInternals = (text: string) => {
  expect(text).not.toMatch(/\bat [\w.<>]+ \(|node_modules|\.ts:\d+|SELECT|FROM |baton_read|ECONNREFUSED|relation "/);
};

describe('with tokens configured', () => {
  const ADMIN = 'admin-token-0123456789';
  const READ = 'read-token-0123456789';
  const api = useApi({ adminToken: ADMIN, readToken: READ });

  it('refuses every request without a valid token, reads included', async () => {
    for (const token of [undefined, 'wrong-token', `${ADMIN}x`, ADMIN.slice(0, -1)]) {
      const r = await gql(api().url, LIST, {}, token ? { token } : {});
      expect(r.status, String(token)).toBe(401);
      expect(r.errors![0]!.extensions!.code).toBe('UNAUTHENTICATED');
      expect(r.headers.get('www-authenticate')).toBe('Bearer');
    }
    const basic = await gql(api().url, LIST, {}, { headers: { authorization: `Basic ${Buffer.from(`x:${ADMIN}`).toString('base64')}` } });
    expect(basic.status).toBe(401);
  });

  it('lets the read token read and the admin token read', async () => {
    for (const token of [READ, ADMIN]) {
      const r = await gql(api().url, LIST, {}, { token });
      expect(r.status).toBe(200);
      expect(r.errors).toBeUndefined();
    }
  });

  it('runs a mutation only with the admin token', async () => {
    const before = await countEvents(api().db.pool);
    const anonymous = await gql(api().url, SUBMIT_NOOP);
    expect(anonymous.status).toBe(401);
    const reader = await gql(api().url, SUBMIT_NOOP, {}, { token: READ });
    expect(reader.status).toBe(403);
    expect(reader.errors![0]!.extensions!.code).toBe('FORBIDDEN');
    expect(reader.errors![0]!.message).toMatch(/mutations need the admin token/);
    expect(await countEvents(api().db.pool)).toBe(before);
    const admin = await gql(api().url, SUBMIT_NOOP, {}, { token: ADMIN });
    expect(admin.status).toBe(200);
    expect(admin.data!.submitExecution.executionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(await countEvents(api().db.pool)).toBe(before + 1);
  });

  it('refuses a subscription without a token', async () => {
    const res = await fetch(api().url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: `subscription { executionUpdated(id: "00000000-0000-4000-8000-000000000000") { id } }` }),
      signal: AbortSignal.timeout(5_000),
    });
    expect(res.status).toBe(401);
    await res.body?.cancel();
  });
});

describe('startApiServer refuses unsafe configurations', () => {
  const pool = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none', max: 1 });
  const base = { pool, runtime: createExecutionRuntime(createPostgresEventStore(pool)), actions, log, port: 0 };

  it('will not listen beyond loopback without a token', async () => {
    for (const host of ['0.0.0.0', '::', '192.0.2.10']) {
      const err = await startApiServer({ ...base, host }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toMatch(/set BATON_API_TOKEN/);
    }
  });

  it('will not take the same token for admin and read', async () => {
    const err = await startApiServer({ ...base, adminToken: 'same-token', readToken: 'same-token' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/BATON_API_READ_TOKEN: must differ/);
    await pool.end();
  });
});

describe('open on loopback (no token)', () => {
  const api = useApi({ bodyLimitBytes: 16 * 1024 });

  it('refuses a mutation over GET, and appends nothing', async () => {
    const before = await countEvents(api().db.pool);
    const url = `${api().url}?query=${encodeURIComponent(SUBMIT_NOOP)}`;
    const res = await fetch(url, { headers: { [CSRF_HEADER]: '1', accept: 'application/json' }, signal: AbortSignal.timeout(5_000) });
    expect(res.status).toBe(405);
    expect(await res.text()).toMatch(/Can only perform a mutation operation from a POST request/);
    expect(await countEvents(api().db.pool)).toBe(before);
    // A query over GET is fine.
    const query = await fetch(`${api().url}?query=${encodeURIComponent(LIST)}`, { headers: { [CSRF_HEADER]: '1' }, signal: AbortSignal.timeout(5_000) });
    expect(query.status).toBe(200);
  });

  it('refuses what a browser sends cross-site without a preflight (CSRF)', async () => {
    const before = await countEvents(api().db.pool);
    const simple: [string, string][] = [
      ['application/x-www-form-urlencoded', new URLSearchParams({ query: SUBMIT_NOOP }).toString()],
      ['text/plain', JSON.stringify({ query: SUBMIT_NOOP })],
      ['multipart/form-data; boundary=x', `--x\r\nContent-Disposition: form-data; name="operations"\r\n\r\n${JSON.stringify({ query: SUBMIT_NOOP })}\r\n--x--\r\n`],
    ];
    for (const [contentType, body] of simple) {
      const res = await fetch(api().url, { method: 'POST', headers: { 'content-type': contentType }, body, signal: AbortSignal.timeout(5_000) });
      expect(res.status, contentType).toBe(403);
      expect(await res.text()).toMatch(/Required CSRF header/);
    }
    const noHeaderGet = await fetch(`${api().url}?query=${encodeURIComponent(LIST)}`, { signal: AbortSignal.timeout(5_000) });
    expect(noHeaderGet.status).toBe(403);
    expect(await countEvents(api().db.pool)).toBe(before);
  });

  it('answers 413 to a body over the limit', async () => {
    const r = await gql(api().url, `mutation($i: JSON) { submitExecution(action: "core.echo", input: $i) { executionId } }`, { i: 'x'.repeat(20 * 1024) });
    expect(r.status).toBe(413);
    const chunked = await fetch(api().url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: new Blob([JSON.stringify({ query: LIST, variables: { pad: 'x'.repeat(20 * 1024) } })]).stream(),
      duplex: 'half',
      signal: AbortSignal.timeout(5_000),
    } as RequestInit);
    expect(chunked.status).toBe(413);
  });

  it('refuses a query deeper than the depth limit', async () => {
    const deep = `{ ... on Query { ... on Query { ... on Query { executions(first: 1) { edges { node { events { type } } } } } } } }`;
    const r = await gql(api().url, deep);
    expect(r.data).toBeUndefined();
    expect(r.errors![0]!.message).toMatch(/^Query depth limit of 7 exceeded, found 8/);
    // The deepest query the schema allows passes.
    expect((await gql(api().url, `{ executions(first: 1) { edges { node { events { type } } } } }`)).errors).toBeUndefined();
  });

  it('refuses too many aliases and too many tokens', async () => {
    const aliases = Array.from({ length: 16 }, (_, i) => `a${i}: workers { id }`).join(' ');
    const r = await gql(api().url, `{ ${aliases} }`);
    expect(r.errors![0]!.message).toMatch(/^Aliases limit of 15 exceeded, found 16/);
    const fields = Array.from({ length: 2100 }, () => 'id').join(' ');
    const tokens = await gql(api().url, `{ workers { ${fields} } }`);
    expect(tokens.errors![0]!.message).toMatch(/Token limit of 2000 exceeded/);
  });

  it('refuses a query over the cost limit', async () => {
    const costly = Array.from({ length: 15 }, (_, i) => `c${i}: executions(first: 100) { edges { node { events { ${'type '.repeat(40)}} } } }`).join(' ');
    const r = await gql(api().url, `{ ${costly} }`);
    expect(r.errors![0]!.message).toMatch(/^Query Cost limit of 5000 exceeded, found \d+: ask for fewer fields, aliases or smaller pages$/);
    expect(r.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', limit: true });
  });

  it('does not suggest field names', async () => {
    const r = await gql(api().url, `{ executionz(first: 1) { edges { cursor } } }`);
    expect(r.errors![0]!.message).toMatch(/Cannot query field "executionz"/);
    expect(r.text).not.toMatch(/Did you mean/);
  });

  it('serves GraphiQL to a browser from its own bundle (works offline)', async () => {
    const res = await fetch(api().url, { headers: { accept: 'text/html' }, signal: AbortSignal.timeout(10_000) });
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toMatch(/<title>Baton<\/title>/);
    expect(html).not.toMatch(/unpkg\.com|cdn\.jsdelivr/);
    // GraphiQL's introspection query is within every limit.
    const introspection = await gql(api().url, getIntrospectionQuery({ descriptions: true, inputValueDeprecation: true }));
    expect(introspection.errors).toBeUndefined();
    expect(introspection.data!.__schema.queryType.name).toBe('Query');
  });
});

describe('unexpected errors', () => {
  const api = useApi();

  it('are masked: no SQL, no stack', async () => {
    await api().db.pool.query('DROP TABLE baton_read.action_stats');
    const r = await gql(api().url, `{ actionStats { action } }`);
    expect(r.errors![0]!.message).toBe('Unexpected error.');
    expect(r.errors![0]!.extensions!.code).toBe('INTERNAL_SERVER_ERROR');
    expectNoInternals(r.text);
  });
});

describe('a database outage', () => {
  it('answers 503 SERVICE_UNAVAILABLE to reads, mutations and subscriptions, without internals', async () => {
    const pool = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none', max: 2 });
    const store = createPostgresEventStore(pool);
    const server = await startApiServer({ pool, runtime: createExecutionRuntime(store), actions, log, port: 0 });
    try {
      for (const query of [LIST, `{ workers { id } }`, `mutation { submitExecution(action: "core.noop") { executionId } }`]) {
        const r = await gql(server.url, query);
        expect(r.status, query).toBe(503);
        expect(r.errors![0]!.extensions!.code).toBe('SERVICE_UNAVAILABLE');
        expect(r.errors![0]!.message).toBe('the database is unavailable; try again shortly');
        expectNoInternals(r.text);
      }
      const sse = await fetch(server.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ query: `subscription { executionUpdated(id: "00000000-0000-4000-8000-000000000000") { id } }` }),
        signal: AbortSignal.timeout(5_000),
      });
      const text = await sse.text();
      expect(text).toMatch(/SERVICE_UNAVAILABLE/);
      expectNoInternals(text);
    } finally {
      await server.close();
      await store.close();
      await pool.end();
    }
  });
});
