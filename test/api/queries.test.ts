// Queries over real HTTP against a projected read model: execution, executions (pagination and
// filters), events, workers, actionStats, and the batching of nested reads.
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { createLivenessStore } from '../../src/liveness/liveness-store.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';
import type { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { gql, handOff, startWorker, useApi } from './api-harness.ts';

const api = useApi();
const BASE = Date.parse('2030-01-01T00:00:00.000Z');
/** Execution ids in submission order: index i was requested at BASE + i minutes. */
const ids: string[] = [];
const at = (i: number) => new Date(BASE + i * 60_000).toISOString();

beforeAll(async () => {
  const { store, db } = api();
  // A clock per submission, so every execution has a known requestedAt.
  let now = BASE;
  const runtime = createExecutionRuntime(store, { clock: () => new Date(now) });
  for (let i = 0; i < 6; i++) {
    now = BASE + i * 60_000;
    const action = i % 2 === 0 ? 'core.noop' : 'core.echo';
    ids.push((await runtime.submit({ action, input: { i } })).executionId);
  }
  // 4: running on w1 (alive). 5: completed on w2 after 1.5 s (no liveness row).
  await handOff(runtime, ids[4]!, 'w1');
  await runtime.dispatch(ids[4]!, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
  await handOff(runtime, ids[5]!, 'w2');
  await runtime.dispatch(ids[5]!, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w2' });
  now += 1_500;
  await runtime.dispatch(ids[5]!, { type: 'ExecutionCompleted', data: { result: { ok: true } }, by: 'worker:w2' });
  await startWorker(store, 'w1');
  // Two workers offer core.echo with different limits: the later start is the one that counts.
  await startWorker(store, 'w3', { actions: ['core.echo'], policies: { 'core.echo': { concurrency: { limit: 5 } } } });
  await startWorker(store, 'w4', { actions: ['core.echo', 'core.sleep'], policies: { 'core.echo': { concurrency: { limit: 2, key: 'tenantId' } } } });
  await createLivenessStore(db.pool).beat({ workerId: 'w1', actions: ['core.noop'], runtimes: ['node'], capacity: 4, inFlight: 1, draining: false }, { starting: true });
  await api().catchUp();
});

const EXECUTION_FIELDS = `id revision status action input owner workerId attempt maxAttempts priority idempotencyKey result error
  retryPending requestedAt startedAt finishedAt updatedAt runMs totalMs owners lastHeartbeatAt refusedEvents`;

describe('execution(id)', () => {
  it('returns the projected row with typed fields', async () => {
    const r = await gql(api().url, `query($id: ID!) { execution(id: $id) { ${EXECUTION_FIELDS} } }`, { id: ids[5] });
    expect(r.errors).toBeUndefined();
    expect(r.data!.execution).toMatchObject({
      id: ids[5],
      revision: 4,
      status: 'Completed',
      action: 'core.echo',
      input: { i: 5 },
      owner: 'worker:w2',
      workerId: 'w2',
      attempt: 1,
      maxAttempts: 3,
      result: { ok: true },
      error: null,
      requestedAt: at(5),
      runMs: 1500,
      totalMs: 1500,
      owners: ['executor', 'worker:w2'],
      lastHeartbeatAt: null, // final: no worker holds it
    });
  });

  it('gives the holding worker’s last heartbeat while a worker holds it', async () => {
    const r = await gql(api().url, `query($id: ID!) { execution(id: $id) { status workerId lastHeartbeatAt } }`, { id: ids[4] });
    expect(r.data!.execution).toMatchObject({ status: 'Running', workerId: 'w1' });
    expect(Date.parse(r.data!.execution.lastHeartbeatAt)).toBeGreaterThan(Date.now() - 60_000);
  });

  it('is null for an unknown id, and refuses an id that is not a UUID, naming it', async () => {
    expect((await gql(api().url, `{ execution(id: "${randomUUID()}") { id } }`)).data).toEqual({ execution: null });
    const bad = await gql(api().url, `{ execution(id: "1; DROP TABLE executions") { id } }`);
    expect(bad.errors![0]!.message).toMatch(/^id: must be an execution id/);
    expect(bad.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'id' });
  });
});

describe('executions(filter, first, after)', () => {
  const PAGE = `query($first: Int!, $after: String, $filter: ExecutionFilter) {
    executions(first: $first, after: $after, filter: $filter) { edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }`;
  const page = (variables: Record<string, unknown>) => gql(api().url, PAGE, variables);
  const idsOf = (r: Awaited<ReturnType<typeof page>>) => r.data!.executions.edges.map((e: { node: { id: string } }) => e.node.id);

  it('walks newest first through full pages to a last page without a next one', async () => {
    const first = await page({ first: 4 });
    expect(idsOf(first)).toEqual([ids[5], ids[4], ids[3], ids[2]]);
    expect(first.data!.executions.pageInfo).toEqual({ hasNextPage: true, endCursor: first.data!.executions.edges[3].cursor });
    const middle = await page({ first: 1, after: first.data!.executions.pageInfo.endCursor });
    expect(idsOf(middle)).toEqual([ids[1]]);
    expect(middle.data!.executions.pageInfo.hasNextPage).toBe(true);
    const last = await page({ first: 4, after: middle.data!.executions.pageInfo.endCursor });
    expect(idsOf(last)).toEqual([ids[0]]);
    expect(last.data!.executions.pageInfo.hasNextPage).toBe(false);
    const beyond = await page({ first: 4, after: last.data!.executions.pageInfo.endCursor });
    expect(beyond.data!.executions).toEqual({ edges: [], pageInfo: { hasNextPage: false, endCursor: null } });
  });

  it('an exactly full last page says there is no next page', async () => {
    const all = await page({ first: 6 });
    expect(idsOf(all)).toHaveLength(6);
    expect(all.data!.executions.pageInfo.hasNextPage).toBe(false);
  });

  it('requires first from 1 to 100, naming it', async () => {
    for (const first of [0, 101, -1]) {
      const r = await page({ first });
      expect(r.errors![0]!.message).toMatch(/^first: must be from 1 to 100/);
      expect(r.errors![0]!.extensions!.code).toBe('BAD_USER_INPUT');
    }
    const missing = await gql(api().url, `{ executions { edges { cursor } } }`);
    expect(missing.errors![0]!.message).toMatch(/argument "first" of type "Int!" is required/);
  });

  it('refuses anything but a cursor it handed out, naming after', async () => {
    const valid = (await page({ first: 1 })).data!.executions.pageInfo.endCursor as string;
    const decoded = JSON.parse(Buffer.from(valid, 'base64url').toString());
    const forged = [
      'garbage!',
      Buffer.from('not json').toString('base64url'),
      Buffer.from(JSON.stringify({ ...decoded, extra: 1 })).toString('base64url'),
      Buffer.from(JSON.stringify({ ...decoded, executionId: "x' OR 1=1 --" })).toString('base64url'),
      Buffer.from(JSON.stringify({ ...decoded, requestedAt: 'yesterday' })).toString('base64url'),
      'A'.repeat(1000),
    ];
    for (const after of forged) {
      const r = await page({ first: 1, after });
      expect(r.errors?.[0]?.message, after).toMatch(/^after: not a cursor from this API/);
      expect(r.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'after' });
    }
  });

  it('filters by status, action, worker and requested time, together too', async () => {
    expect(idsOf(await page({ first: 10, filter: { status: 'Running' } }))).toEqual([ids[4]]);
    expect(idsOf(await page({ first: 10, filter: { status: 'Requested' } }))).toEqual([ids[3], ids[2], ids[1], ids[0]]);
    expect(idsOf(await page({ first: 10, filter: { action: 'core.echo' } }))).toEqual([ids[5], ids[3], ids[1]]);
    expect(idsOf(await page({ first: 10, filter: { workerId: 'w2' } }))).toEqual([ids[5]]);
    expect(idsOf(await page({ first: 10, filter: { since: at(2), until: at(5) } }))).toEqual([ids[4], ids[3], ids[2]]);
    expect(idsOf(await page({ first: 10, filter: { action: 'core.noop', since: at(1) } }))).toEqual([ids[4], ids[2]]);
    expect(idsOf(await page({ first: 10, filter: { action: "core.noop' OR '1'='1" } }))).toEqual([]);
    // Pagination inside a filter.
    const p1 = await page({ first: 2, filter: { status: 'Requested' } });
    expect(idsOf(p1)).toEqual([ids[3], ids[2]]);
    const p2 = await page({ first: 2, filter: { status: 'Requested' }, after: p1.data!.executions.pageInfo.endCursor });
    expect(idsOf(p2)).toEqual([ids[1], ids[0]]);
    expect(p2.data!.executions.pageInfo.hasNextPage).toBe(false);
  });

  it('refuses a status that is not a state and a time that is not a date-time', async () => {
    const status = await page({ first: 1, filter: { status: 'Sleeping' } });
    expect(status.errors![0]!.message).toMatch(/filter.status/);
    const since = await page({ first: 1, filter: { since: 'last tuesday' } });
    expect(since.errors![0]!.message).toBe('filter.since: must be an ISO 8601 date-time with a time zone, like 2024-05-01T12:00:00Z');
    expect(since.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'filter.since' });
  });

  it('reads nested events and heartbeats in one query each, whatever the page size (no N+1)', async () => {
    const { db } = api();
    const query = vi.spyOn(db.pool, 'query');
    try {
      const r = await gql(api().url, `{ executions(first: 6) { edges { node { id lastHeartbeatAt events { revision type } } } } }`);
      expect(r.errors).toBeUndefined();
      const nodes = r.data!.executions.edges.map((e: { node: unknown }) => e.node);
      expect(nodes[0].events.map((e: { type: string }) => e.type)).toEqual([
        'ExecutionRequested', 'SchedulingStarted', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCompleted',
      ]);
      expect(nodes[5].events).toEqual([{ revision: 0, type: 'ExecutionRequested' }]);
      expect(nodes[1].lastHeartbeatAt).not.toBeNull();
      // the page, the events of all six, the one holder's heartbeat
      expect(query).toHaveBeenCalledTimes(3);
    } finally {
      query.mockRestore();
    }
  });
});

describe('events(executionId)', () => {
  it('lists an execution’s events in order, from a revision, up to a limit', async () => {
    const r = await gql(api().url, `query($id: ID!) { events(executionId: $id) { eventId executionId revision globalPosition type by data metadata occurredAt recordedAt } }`, { id: ids[5] });
    expect(r.errors).toBeUndefined();
    const events = r.data!.events;
    expect(events.map((e: { revision: number }) => e.revision)).toEqual([0, 1, 2, 3, 4]);
    expect(events[2]).toMatchObject({ executionId: ids[5], type: 'ExecutionHandedOff', by: 'executor', data: { workerId: 'w2', attempt: 1 } });
    expect(events[4]).toMatchObject({ by: 'worker:w2', data: { result: { ok: true } } });
    const window = await gql(api().url, `query($id: ID!) { events(executionId: $id, fromRevision: 2, limit: 2) { revision } }`, { id: ids[5] });
    expect(window.data!.events).toEqual([{ revision: 2 }, { revision: 3 }]);
    const tooMany = await gql(api().url, `query($id: ID!) { events(executionId: $id, limit: 5000) { revision } }`, { id: ids[5] });
    expect(tooMany.errors![0]!.message).toMatch(/^limit: must be from 1 to 1000/);
    // An id no execution has is NOT_FOUND, naming the argument: [] would say it exists with no events there.
    const none = randomUUID();
    const unknown = await gql(api().url, `{ events(executionId: "${none}") { revision } }`);
    expect(unknown.data).toBeNull();
    expect(unknown.errors![0]!).toMatchObject({ message: `executionId: no execution ${none}`, extensions: { code: 'NOT_FOUND', argument: 'executionId' } });
    expect((await gql(api().url, `query($id: ID!) { events(executionId: $id, fromRevision: 9) { revision } }`, { id: ids[5] })).data).toEqual({ events: [] });
  });
});

// The read model's events are a view of the Postgres store's; with EventStoreDB they are a table
// the projector fills, a moment behind. Here the store holds a stream the read model never saw.
describe('events(executionId) of an execution the read model does not show yet', () => {
  const ghost = randomUUID();
  let ghostEvents: StoredEvent[] = [];
  const lagging = useApi({
    store: new Proxy({} as PostgresEventStore, {
      get(_, key) {
        const store = lagging().store;
        if (key === 'readStream') {
          return async (streamId: string, o?: { fromRevision?: bigint; limit?: number }) => {
            if (streamId !== `execution-${ghost}`) return store.readStream(streamId, o);
            const from = Number(o?.fromRevision ?? 0n);
            return ghostEvents.slice(from, from + (o?.limit ?? ghostEvents.length));
          };
        }
        const value = Reflect.get(store, key);
        return typeof value === 'function' ? value.bind(store) : value;
      },
    }),
  });

  it('reads them from the event store, not NOT_FOUND and not []', async () => {
    const { runtime, store } = lagging();
    const real = (await runtime.submit({ action: 'core.echo', input: { n: 7 } })).executionId;
    await handOff(runtime, real, 'w1');
    ghostEvents = (await store.readStream(`execution-${real}`)).map((e) => ({ ...e, streamId: `execution-${ghost}` }));
    const r = await gql(lagging().url, `query($id: ID!) { events(executionId: $id, fromRevision: 1) { executionId revision globalPosition type by data } }`, { id: ghost });
    expect(r.errors).toBeUndefined();
    expect(r.data!.events).toEqual([
      { executionId: ghost, revision: 1, globalPosition: Number(ghostEvents[1]!.globalPosition), type: 'SchedulingStarted', by: 'executor', data: {} },
      expect.objectContaining({ revision: 2, type: 'ExecutionHandedOff', data: expect.objectContaining({ workerId: 'w1' }) }),
    ]);
    expect((await gql(lagging().url, `query($id: ID!) { execution(id: $id) { id } }`, { id: ghost })).data!.execution).toBeNull(); // not projected
  });
});

describe('workers and actionStats', () => {
  it('lists workers with their counters, in-flight count and liveness', async () => {
    const r = await gql(api().url, `{ workers { id status actions capacity host started completed inFlight lastHeartbeatAt alive } }`);
    expect(r.errors).toBeUndefined();
    const [w1, w2] = r.data!.workers;
    expect(w1).toMatchObject({ id: 'w1', status: 'active', actions: ['core.noop'], capacity: 4, host: 'test', started: 1, completed: 0, inFlight: 1, alive: true });
    expect(Date.parse(w1.lastHeartbeatAt)).toBeGreaterThan(Date.now() - 60_000);
    expect(w2).toEqual({ id: 'w2', status: 'unknown', actions: [], capacity: null, host: null, started: 1, completed: 1, inFlight: 0, lastHeartbeatAt: null, alive: false });
  });

  it('gives per-action counters and run-time percentiles', async () => {
    const r = await gql(api().url, `{ actionStats { action requested queued running completed failed retried p50Ms p95Ms } }`);
    expect(r.errors).toBeUndefined();
    expect(r.data!.actionStats).toEqual([
      { action: 'core.echo', requested: 3, queued: 2, running: 0, completed: 1, failed: 0, retried: 0, p50Ms: expect.closeTo(1500, -2), p95Ms: expect.closeTo(1500, -2) },
      { action: 'core.noop', requested: 3, queued: 2, running: 1, completed: 0, failed: 0, retried: 0, p50Ms: null, p95Ms: null },
    ]);
    const one = await gql(api().url, `{ actionStats(action: "core.noop") { action } }`);
    expect(one.data!.actionStats).toEqual([{ action: 'core.noop' }]);
  });

  it('gives each action\'s concurrency limit and key, as the latest worker to start offering it advertised', async () => {
    const r = await gql(api().url, `{ actionStats { action concurrencyLimit concurrencyKey } }`);
    expect(r.errors).toBeUndefined();
    expect(r.data!.actionStats).toEqual([
      { action: 'core.echo', concurrencyLimit: 2, concurrencyKey: 'tenantId' },
      { action: 'core.noop', concurrencyLimit: null, concurrencyKey: null },
    ]);
    const one = await gql(api().url, `{ actionStats(action: "core.echo") { concurrencyLimit } }`);
    expect(one.data!.actionStats).toEqual([{ concurrencyLimit: 2 }]);
  });
});

describe('events per request', () => {
  it('refuses a request whose nested events would pass the per-request budget, naming `limit`', async () => {
    const { createLoaders } = await import('../../src/api/loaders.ts');
    const { db } = api();
    const within = createLoaders(db.pool, 5);
    expect(await within.events(0, 1000).load(ids[5]!)).toHaveLength(5); // exactly the budget
    const over = createLoaders(db.pool, 4);
    await expect(over.events(0, 1000).load(ids[5]!)).rejects.toThrow(/^limit: this request would return more than 4 events/);
  });
});

describe('stalled executions', () => {
  it('flags a run that heartbeats without progress past its stall limit, and filters on it', async () => {
    const { store } = api();
    let now = Date.now() - 10_000;
    const runtime = createExecutionRuntime(store, { clock: () => new Date(now) });
    const started = async (stallTimeoutMs: number) => {
      const { executionId } = await runtime.submit({ action: 'core.sleep', input: { ms: 1 } });
      await handOff(runtime, executionId, 'w-stall');
      await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1, stallTimeoutMs }, by: 'worker:w-stall' });
      return executionId;
    };
    const stuck = await started(1_000); // started 10 s ago, no progress since
    const progressing = await started(1_000);
    now = Date.now();
    await runtime.dispatch(progressing, { type: 'ExecutionProgressed', data: { details: { step: 2 } }, by: 'worker:w-stall' });
    await api().catchUp();
    const r = await gql(api().url, `{ executions(filter: { stalled: true, workerId: "w-stall" }, first: 10) { edges { node { id stalled stallTimeoutMs } } } }`);
    expect(r.errors).toBeUndefined();
    expect(r.data!.executions.edges.map((e: { node: unknown }) => e.node)).toEqual([{ id: stuck, stalled: true, stallTimeoutMs: 1_000 }]);
    const notStalled = await gql(api().url, `{ executions(filter: { stalled: false, workerId: "w-stall" }, first: 10) { edges { node { id stalled } } } }`);
    expect(notStalled.data!.executions.edges.map((e: { node: unknown }) => e.node)).toEqual([{ id: progressing, stalled: false }]);
  });
});

describe('worker liveness', () => {
  it('judges alive by the staleness limit the server was given', async () => {
    const { listWorkers } = await import('../../src/api/read-model-queries.ts');
    const { db } = api();
    await new Promise((r) => setTimeout(r, 20));
    const alive = async (staleAfterMs: number) => (await listWorkers(db.pool, staleAfterMs)).find((w) => w.workerId === 'w1')?.alive;
    expect(await alive(60_000)).toBe(true);
    expect(await alive(1)).toBe(false);
  });
});
