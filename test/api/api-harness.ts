// One API server per test file over a fresh database, and a fetch-based GraphQL client.
// Events go in through the runtime; catchUp() projects them, as the projector would.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { fetch as undiciFetch, type Dispatcher } from 'undici';
import { afterAll, beforeAll } from 'vitest';
import { builtinActions } from '../../src/actions/builtin.ts';
import { createActionRegistry } from '../../src/actions/registry.ts';
import { CSRF_HEADER, startApiServer, type ApiServer, type ApiServerOptions } from '../../src/api/server.ts';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { silentLogger } from '../../src/log.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createPostgresWorkTransport, type PostgresWorkTransportOptions } from '../../src/transport/postgres/index.ts';
import type { WorkTransport } from '../../src/transport/work-transport.ts';
import { catchUpFully } from '../support/read-model.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

export const actions = createActionRegistry([...builtinActions]);
export const log: Logger = silentLogger();

export interface GqlResponse<D = Record<string, any>> {
  status: number;
  headers: Headers;
  data: D | null | undefined;
  errors: { message: string; path?: string[]; extensions?: Record<string, any> }[] | undefined;
  text: string;
}

export interface GqlOptions {
  token?: string;
  /** Extra headers; by default a JSON POST (which passes CSRF prevention). */
  headers?: Record<string, string>;
}

/** POST one operation as JSON, as any GraphQL client does. */
export async function gql<D = Record<string, any>>(url: string, query: string, variables: Record<string, unknown> = {}, o: GqlOptions = {}): Promise<GqlResponse<D>> {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json, application/json',
      ...(o.token && { authorization: `Bearer ${o.token}` }),
      ...o.headers,
    },
    body: JSON.stringify({ query, variables }),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  let body: { data?: D | null; errors?: GqlResponse['errors'] } = {};
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON (a 413 page, say); the test looks at status and text
  }
  return { status: res.status, headers: res.headers, data: body.data, errors: body.errors, text };
}

export { CSRF_HEADER };

export interface ApiFixture {
  db: TestDatabase;
  store: PostgresEventStore;
  runtime: ExecutionRuntime;
  server: ApiServer;
  url: string;
  /** The Postgres work transport over the same database, when useApi was asked for one. */
  transport: WorkTransport | undefined;
  /** Project everything appended so far (the lead's projector, run to the end of the store). */
  catchUp(): Promise<void>;
}

/**
 * A database, runtime and API server for the file (or describe block), torn down after it.
 * With `harness.transport`, the server also gets a Postgres work transport over that database.
 */
export function useApi(
  options: Partial<Omit<ApiServerOptions, 'pool' | 'runtime' | 'actions' | 'transport'>> = {},
  harness: { transport?: PostgresWorkTransportOptions } = {},
): () => ApiFixture {
  let fixture: ApiFixture | undefined;
  beforeAll(async () => {
    const db = await createTestDatabase({ max: 20 });
    const store = createPostgresEventStore(db.pool);
    const runtime = createExecutionRuntime(store);
    const transport = harness.transport && createPostgresWorkTransport(db.pool, harness.transport);
    const server = await startApiServer({ pool: db.pool, runtime, store, actions, log, port: 0, ...options, ...(transport && { transport }) });
    fixture = { db, store, runtime, server, url: server.url, transport, catchUp: () => catchUpFully(db.pool, store) };
  });
  afterAll(async () => {
    const f = fixture;
    fixture = undefined;
    await f?.server.close();
    await f?.transport?.close();
    await f?.store.close();
    await f?.db.drop();
  });
  return () => {
    if (!fixture) throw new Error('useApi(): only inside tests and hooks');
    return fixture;
  };
}

export { catchUpFully };

export interface SseEvent {
  event: string;
  data: any;
}

/**
 * Open a GraphQL-over-SSE subscription; `next()` resolves with the next event (bounded).
 * `dispatcher` (an undici Agent) picks how to connect, e.g. from another local address.
 */
export async function openSse(url: string, query: string, variables: Record<string, unknown>, o: { headers?: Record<string, string>; dispatcher?: Dispatcher } = {}) {
  const controller = new AbortController();
  const res = await undiciFetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...o.headers },
    body: JSON.stringify({ query, variables }),
    signal: controller.signal,
    ...(o.dispatcher && { dispatcher: o.dispatcher }),
  });
  const reader = (res.body as unknown as ReadableStream<BufferSource>).pipeThrough(new TextDecoderStream()).getReader();
  let buffered = '';
  let pending: Promise<ReadableStreamReadResult<string>> | undefined;
  async function next(timeoutMs = 5_000): Promise<SseEvent | undefined> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const end = buffered.indexOf('\n\n');
      if (end >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const lines = block.split('\n');
        if (lines.every((l) => l.startsWith(':'))) continue; // keep-alive comment
        const field = (name: string) => lines.find((l) => l.startsWith(`${name}:`))?.slice(name.length + 1).trim();
        const data = field('data');
        return { event: field('event') ?? 'message', data: data ? JSON.parse(data) : undefined };
      }
      const left = until - Date.now();
      if (left <= 0) throw new Error(`no SSE event within ${timeoutMs} ms (buffered: ${JSON.stringify(buffered)})`);
      let timer: NodeJS.Timeout | undefined;
      // A read that outlived an earlier timeout still holds the next chunk: reuse it.
      pending ??= reader.read();
      const chunk = await Promise.race([
        pending,
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no SSE event within ${timeoutMs} ms`)), left))),
      ]).finally(() => clearTimeout(timer));
      pending = undefined;
      if (chunk.done) return undefined;
      buffered += chunk.value;
    }
  }
  const close = () => {
    controller.abort();
    return reader.cancel().catch(() => undefined);
  };
  return { res, next, close };
}


export const deadline = () => new Date(Date.now() + 60_000).toISOString();

/** Take an execution through scheduling and hand it to `workerId` (the executor's part). */
export async function handOff(runtime: ExecutionRuntime, executionId: string, workerId: string): Promise<void> {
  await runtime.dispatch(executionId, [
    { type: 'SchedulingStarted', data: {}, by: 'executor' },
    { type: 'ExecutionHandedOff', data: { workerId, attempt: 1, deadline: deadline() }, by: 'executor' },
  ]);
}

/** Announce a worker in its own stream, as a worker host does at start (`data` replaces fields of WorkerStarted). */
export async function startWorker(store: PostgresEventStore, workerId: string, data: Record<string, unknown> = {}): Promise<void> {
  await store.append(
    `worker-${workerId}`,
    [{ eventId: randomUUID(), type: 'WorkerStarted', data: { actions: ['core.noop'], runtimes: ['node'], capacity: 4, host: 'test', ...data }, metadata: { by: `worker:${workerId}`, occurredAt: new Date().toISOString() } }],
    { expectedRevision: 'any' },
  );
}
