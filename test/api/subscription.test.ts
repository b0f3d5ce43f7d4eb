// executionUpdated over SSE: the current row, then each change the projector commits, until a
// final status; every subscriber shares one LISTEN connection per server.
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { EXECUTIONS_CHANGED_CHANNEL, createExecutionUpdates } from '../../src/api/live-updates.ts';
import { createSubscriptionSlots } from '../../src/api/subscription-slots.ts';
import { startApiServer } from '../../src/api/server.ts';
import type { ExecutionRow } from '../../projections/executions.ts';
import { actions, catchUpFully, handOff, log, openSse, useApi } from './api-harness.ts';

const api = useApi();
const SUBSCRIBE = `subscription($id: ID!) { executionUpdated(id: $id) { id status revision owner } }`;

/** Open a GraphQL-over-SSE subscription; `next()` resolves with the next event (bounded). */
const subscribe = (url: string, id: string, headers: Record<string, string> = {}) => openSse(url, SUBSCRIBE, { id }, { headers });

const listeners = async () => {
  const r = await api().db.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE $1`,
    [`LISTEN ${EXECUTIONS_CHANGED_CHANNEL}`],
  );
  return r.rows[0]!.n;
};

describe('executionUpdated', () => {
  it('pushes the current row, then each projected change, and ends after the final status', async () => {
    const { runtime, url } = api();
    const { executionId: id } = await runtime.submit({ action: 'core.noop' });
    await api().catchUp();
    const sub = await subscribe(url, id);
    try {
      expect(sub.res.status).toBe(200);
      expect(sub.res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      expect(await sub.next()).toEqual({ event: 'next', data: { data: { executionUpdated: { id, status: 'Requested', revision: 0, owner: 'executor' } } } });

      await handOff(runtime, id, 'w1');
      await api().catchUp();
      expect((await sub.next())!.data.data.executionUpdated).toMatchObject({ status: 'Scheduled', revision: 2, owner: 'worker:w1' });

      await runtime.dispatch(id, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
      await api().catchUp();
      expect((await sub.next())!.data.data.executionUpdated).toMatchObject({ status: 'Running', revision: 3 });

      await runtime.dispatch(id, { type: 'ExecutionCompleted', data: { result: 42 }, by: 'worker:w1' });
      await api().catchUp();
      expect((await sub.next())!.data.data.executionUpdated).toMatchObject({ status: 'Completed', revision: 4 });
      expect((await sub.next())?.event).toBe('complete');
    } finally {
      await sub.close();
    }
  });

  it('waits for an execution the read model has not seen yet, and shares one LISTEN connection', async () => {
    const { runtime, url } = api();
    const { executionId: id } = await runtime.submit({ action: 'core.noop' });
    const a = await subscribe(url, id);
    const b = await subscribe(url, id);
    try {
      expect(a.res.status).toBe(200);
      expect(b.res.status).toBe(200);
      await expect(a.next(300)).rejects.toThrow(/no SSE event/); // nothing projected yet
      await api().catchUp();
      for (const sub of [a, b]) expect((await sub.next())!.data.data.executionUpdated).toMatchObject({ id, status: 'Requested' });
      expect(await listeners()).toBe(1);
      await runtime.dispatch(id, { type: 'ExecutionCancelled', data: { reason: 'test' }, by: 'executor' });
      await api().catchUp();
      for (const sub of [a, b]) {
        expect((await sub.next())!.data.data.executionUpdated).toMatchObject({ status: 'Cancelled' });
        expect((await sub.next())?.event).toBe('complete');
      }
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('keeps following after the LISTEN connection dies (reconnects, then reads what it missed)', async () => {
    const { runtime, url, db } = api();
    const { executionId: id } = await runtime.submit({ action: 'core.noop' });
    await api().catchUp();
    const sub = await subscribe(url, id);
    try {
      expect((await sub.next())!.data.data.executionUpdated).toMatchObject({ status: 'Requested' });
      const killed = await db.pool.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE $1`,
        [`LISTEN ${EXECUTIONS_CHANGED_CHANNEL}`],
      );
      expect(killed.rowCount).toBe(1);
      await runtime.dispatch(id, { type: 'SchedulingStarted', data: {}, by: 'executor' });
      await api().catchUp(); // its NOTIFY finds nobody listening
      expect((await sub.next(5_000))!.data.data.executionUpdated).toMatchObject({ status: 'Scheduling' });
      expect(await listeners()).toBe(1);
    } finally {
      await sub.close();
    }
  });

  it('close() ends open subscriptions and releases the LISTEN connection at once', async () => {
    const { runtime, store, db } = api();
    const before = await listeners(); // the file's own server may be listening already
    const server = await startApiServer({ pool: db.pool, runtime, actions, log, port: 0 });
    const { executionId: id } = await runtime.submit({ action: 'core.noop' });
    await catchUpFully(db.pool, store);
    const sub = await subscribe(server.url, id);
    try {
      expect((await sub.next())!.data.data.executionUpdated).toMatchObject({ id });
      expect(await listeners()).toBe(before + 1);
      const started = Date.now();
      await server.close();
      expect(Date.now() - started).toBeLessThan(2_000);
      expect((await sub.next())?.event).toBe('complete');
      expect(await listeners()).toBe(before);
    } finally {
      await sub.close();
      await server.close();
    }
  });

  // History is folded from the event store, which has every event before the projector runs
  // (the read model's events table may trail the row a moment, so it would race).
  it('reads each update afresh (nested history too), a large result whole', async () => {
    const { runtime, url } = api();
    const { executionId: id } = await runtime.submit({ action: 'core.noop' });
    await api().catchUp();
    const sub = await openSse(url, `subscription($id: ID!) { executionUpdated(id: $id) { status result history { type } } }`, { id });
    try {
      expect((await sub.next())!.data.data.executionUpdated).toEqual({ status: 'Requested', result: null, history: [{ type: 'ExecutionRequested' }] });
      await handOff(runtime, id, 'w1');
      await runtime.dispatch(id, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
      await api().catchUp();
      expect((await sub.next())!.data.data.executionUpdated.history).toHaveLength(4);
      const result = { blob: 'z'.repeat(40 * 1024) };
      await runtime.dispatch(id, { type: 'ExecutionCompleted', data: { result }, by: 'worker:w1' });
      await api().catchUp();
      const last = (await sub.next())!.data.data.executionUpdated;
      expect(last.status).toBe('Completed');
      expect(last.result).toEqual(result);
      expect(last.history.map((e: { type: string }) => e.type)).toEqual(['ExecutionRequested', 'SchedulingStarted', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCompleted']);
    } finally {
      await sub.close();
    }
  });

  it('refuses an id that is not a UUID, naming it', async () => {
    const sub = await subscribe(api().url, 'not-a-uuid');
    try {
      const first = await sub.next();
      expect(first!.data.errors[0].message).toMatch(/^id: must be an execution id/);
    } finally {
      await sub.close();
    }
  });
});

it('a subscription that arrives once close() has begun (a client following again during a deploy) ends at once, not at the grace cut', async () => {
  const slots = createSubscriptionSlots({ maxSubscriptions: 10, maxSubscriptionsPerClient: 10 });
  const updates = createExecutionUpdates({ pool: api().db.pool, readRows: async () => [], namespaceOf: async () => undefined, slots, log });
  await updates.close();
  const late = updates.follow('00000000-0000-4000-8000-000000000000', '127.0.0.1');
  const ended = await Promise.race([late.next(), new Promise<'waiting'>((resolve) => setTimeout(() => resolve('waiting'), 2_000).unref())]);
  expect(ended).toEqual({ done: true, value: undefined });
  expect(slots.open).toBe(0);
});

it('close() does not wait out the keep-alive timeout of a connection whose request was in flight when it began', async () => {
  const { runtime, db } = api();
  const server = await startApiServer({ pool: db.pool, runtime, actions, log, port: 0 });
  const { port } = new URL(server.url);
  const body = JSON.stringify({ query: '{ __typename }' });
  const socket = net.connect(Number(port), '127.0.0.1');
  try {
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const answered = new Promise<string>((resolve) => {
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk.toString();
        if (text.includes('\r\n\r\n')) resolve(text);
      });
    });
    const socketClosed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    // Headers and half the body now, so the request is in flight (not idle) when close() begins.
    socket.write(`POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = performance.now();
    const closing = server.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    socket.write(body.slice(5));
    expect(await answered).toMatch(/^HTTP\/1.1 200/);
    await closing;
    // The old server held this keep-alive connection, and so close(), for its 5 s keep-alive timeout.
    expect(performance.now() - started).toBeLessThan(2_000);
    await socketClosed;
  } finally {
    socket.destroy();
    await server.close();
  }
});

it('two followers of one id subscribing a few microtasks apart both get its row (one asked for while the read before it was ending was never read)', async () => {
  const slots = createSubscriptionSlots({ maxSubscriptions: 10, maxSubscriptionsPerClient: 10 });
  const finalRow = (id: string) => ({ executionId: id, revision: 3, status: 'Completed', namespace: 'default' }) as unknown as ExecutionRow;
  const updates = createExecutionUpdates({ pool: api().db.pool, readRows: async (ids) => ids.map(finalRow), namespaceOf: async () => 'default', slots, log });
  const ticks = async (n: number) => {
    for (let i = 0; i < n; i++) await null;
  };
  try {
    // The gap was a few microtasks wide: every offset across it, each on an id of its own.
    for (let offset = 0; offset < 30; offset++) {
      const id = randomUUID();
      const first = updates.follow(id, '127.0.0.1').next();
      await ticks(offset);
      const second = updates.follow(id, '127.0.0.1').next();
      const both = await Promise.race([Promise.all([first, second]), new Promise<'waiting'>((resolve) => setTimeout(() => resolve('waiting'), 1_000).unref())]);
      expect(both, `the second ${offset} microtasks after the first`).not.toBe('waiting');
    }
  } finally {
    await updates.close();
  }
});
