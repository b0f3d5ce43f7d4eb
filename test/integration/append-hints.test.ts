// A lone append's NOTIFY carries its events (src/eventstore/pg-append-hints.ts): another store
// instance hears them exactly as a read returns them, a follower applies them before it reads them
// (here its reads are held back, so only the NOTIFY can deliver), once each, in stream order, and
// events too large for a NOTIFY are read as before. On the real Postgres.
import pg from 'pg';
import pino from 'pino';
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { START, type StoredEvent } from '../../src/eventstore/event-store.ts';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { appendHint } from '../../src/eventstore/pg-append-hints.ts';
import { NOTIFY_CHANNEL } from '../../src/eventstore/pg-wakeups.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { followActors } from '../../src/runtime/follow-actors.ts';
import { useTestDatabase } from '../support/test-db.ts';
import { until } from '../support/until.ts';

const db = useTestDatabase();
// Far above a wake-up's few ms: nothing arrives through the idle poll during a test.
const IDLE_POLL_MS = 60_000;

const comparable = (e: StoredEvent) => ({
  eventId: e.eventId,
  streamId: e.streamId,
  revision: e.revision,
  globalPosition: e.globalPosition,
  type: e.type,
  data: e.data,
  metadata: e.metadata,
  recordedAt: e.recordedAt.getTime(),
});

describe('events heard with a lone append’s NOTIFY', () => {
  const cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });

  /** A store on a pool of its own; while `gate` is set its stream-order reads wait for it. */
  function openStore() {
    const pool = new pg.Pool({ connectionString: db().url, max: 6 });
    const control: { gate?: Promise<void>; scansDone: number } = { scansDone: 0 };
    const query = pool.query.bind(pool) as (...a: unknown[]) => Promise<unknown>;
    pool.query = (async (...args: unknown[]) => {
      const q = args[0];
      if (typeof q !== 'object' || q === null || (q as { name?: string }).name !== 'baton_scan_committed') return query(...args);
      if (control.gate) await control.gate;
      try {
        return await query(...args);
      } finally {
        control.scansDone++;
      }
    }) as typeof pool.query;
    const store = createPostgresEventStore(pool, { idlePollMs: IDLE_POLL_MS });
    cleanup.push(async () => {
      await store.close();
      await pool.end();
    });
    return Object.assign(store, { control });
  }

  /** Two stores as two processes: b's execution runtime fed by a follower, caught up. */
  async function followedPair() {
    const a = openStore();
    const b = openStore();
    const runtimeB = createExecutionRuntime(b);
    const follower = followActors({ store: b, runtimes: [runtimeB.actors], log: pino({ level: 'silent' }), who: 'test' });
    cleanup.push(() => follower.stop());
    await follower.ready;
    return { a, b, runtimeB };
  }

  it('another store hears the events as a read returns them; its own appends and events too large for a NOTIFY it does not hear', { timeout: 20_000 }, async () => {
    const a = openStore();
    const b = openStore();
    const heardByB: StoredEvent[] = [];
    const heardByA: StoredEvent[] = [];
    const stopB = b.onAppendHeard!((events) => heardByB.push(...events));
    const stopA = a.onAppendHeard!((events) => heardByA.push(...events));
    cleanup.push(async () => {
      stopA();
      stopB();
    });
    // Both listening before the appends (onAppendHeard starts it): a first append wakes nobody yet.
    await a.append(`hint-warm-${randomUUID()}`, [{ eventId: randomUUID(), type: 'Warm', data: null, metadata: {} }], { expectedRevision: 'no_stream' });
    await until('b to hear the first append', () => heardByB.length > 0).catch(() => undefined);
    heardByB.length = 0;

    const stream = `hint-${randomUUID()}`;
    const events = [
      { eventId: randomUUID(), type: 'First', data: { text: 'ünïcode ✓', n: 1.5, nested: { list: [1, null, 'x'] } }, metadata: { by: 'test' } },
      { eventId: randomUUID(), type: 'Second', data: null, metadata: {} },
    ];
    await a.append(stream, events, { expectedRevision: 'no_stream' });
    await until('b to hear both events', () => heardByB.length === 2);
    expect(heardByB.map(comparable)).toEqual((await b.readStream(stream)).map(comparable));
    await a.append(stream, [{ eventId: randomUUID(), type: 'Third', data: {}, metadata: {} }], { expectedRevision: 1n });
    await until('b to hear the third', () => heardByB.length === 3);
    expect(heardByB.map(comparable)).toEqual((await b.readStream(stream)).map(comparable));
    expect(heardByA).toEqual([]);

    // Too large for a NOTIFY (multi-byte characters count as their bytes): woken, read, not heard.
    const large = `hint-large-${randomUUID()}`;
    const got: StoredEvent[] = [];
    const ac = new AbortController();
    const reading = (async () => {
      for await (const e of b.subscribe({ after: START, streamPrefixes: ['hint-large-'], order: 'stream', signal: ac.signal })) got.push(e);
    })();
    cleanup.push(async () => {
      ac.abort();
      await reading;
    });
    await a.append(large, [{ eventId: randomUUID(), type: 'Large', data: { text: 'é'.repeat(3_900) }, metadata: {} }], { expectedRevision: 'no_stream' });
    await until('the subscription to read it', () => got.length === 1);
    expect(heardByB).toHaveLength(3);
    // Many events in one lone append: the payload stays under NOTIFY's limit (or the append would fail).
    for (const n of [60, 150, 400]) {
      const many = `hint-large-many-${n}-${randomUUID()}`;
      await a.append(many, Array.from({ length: n }, () => ({ eventId: randomUUID(), type: 'Small', data: null, metadata: {} })), { expectedRevision: 'no_stream' });
      expect(await b.readStream(many)).toHaveLength(n);
    }
    await until('the subscription to read them', () => got.length === 1 + 60 + 150 + 400);
  });

  it('a follower applies what it hears before reading it, once per revision, in order', { timeout: 30_000 }, async () => {
    const { a, b, runtimeB } = await followedPair();
    const changes: { id: string; revisions: bigint[] }[] = [];
    runtimeB.onChange((c) => changes.push({ id: c.id, revisions: c.events.map((e) => e.revision) }));

    // Reads held back: whatever the follower applies now it heard.
    let release!: () => void;
    b.control.gate = new Promise<void>((resolve) => (release = resolve));
    const runtimeA = createExecutionRuntime(a);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const { executionId } = await runtimeA.submit({ action: 'test.hinted', input: { i } });
      await runtimeA.dispatch(executionId, { type: 'SchedulingStarted', by: 'executor', data: { maxAttempts: 3 } });
      await runtimeA.dispatch(executionId, { type: 'ExecutionHandedOff', by: 'executor', data: { workerId: 'w-1', attempt: 1, deadline: new Date(Date.now() + 60_000).toISOString() } });
      ids.push(executionId);
    }
    await until('b to hold every execution handed off', () => ids.every((id) => runtimeB.cached(id)?.revision === 2n));
    expect(ids.map((id) => runtimeB.cached(id)!.snapshot.value)).toEqual(ids.map(() => 'Scheduled'));

    // Now the reads come through: they find everything applied, and change nothing.
    const seen = changes.length;
    const scans = b.control.scansDone;
    release();
    b.control.gate = undefined;
    await until('the held reads to run', () => b.control.scansDone > scans);
    await runtimeA.submit({ action: 'test.hinted', input: { last: true } }); // one more wake-up and read
    await until('the last one', () => changes.length === seen + 1);
    expect(changes.length).toBe(seen + 1);
    for (const id of ids) expect(changes.filter((c) => c.id === id).flatMap((c) => c.revisions)).toEqual([0n, 1n, 2n]);
  });

  it('a heard event the store does not hold at that revision is replaced by the stored one when the follower reads it', { timeout: 20_000 }, async () => {
    const { a, runtimeB } = await followedPair();
    const runtimeA = createExecutionRuntime(a);
    const { executionId } = await runtimeA.submit({ action: 'test.hinted', input: null });
    await until('b to hold it', () => runtimeB.cached(executionId)?.revision === 0n);

    // Any session may NOTIFY: a payload naming an event that was never stored is applied at first…
    const stream = `execution-${executionId}`;
    const metadata = JSON.stringify({ by: 'executor', occurredAt: new Date().toISOString(), machineVersion: '6' });
    const forged = appendHint(stream, [{ eventId: randomUUID(), type: 'SchedulingStarted' }], [JSON.stringify({ maxAttempts: 7 })], [metadata])!;
    const { rows } = await db().pool.query<{ now: string }>('SELECT now()::text AS now');
    await db().pool.query('SELECT pg_notify($1, $2)', [NOTIFY_CHANNEL, `forger\n${rows[0]!.now}\n1:999999999\n${forged}`]);
    await until('b to apply the forged event', () => runtimeB.cached(executionId)?.revision === 1n);
    expect(runtimeB.cached(executionId)!.snapshot.context.maxAttempts).toBe(7);

    // …and replaced by what the store holds at that revision once the follower reads it.
    await runtimeA.dispatch(executionId, { type: 'SchedulingStarted', by: 'executor', data: { maxAttempts: 2 } });
    await until('b to hold the stored event', () => runtimeB.cached(executionId)?.snapshot.context.maxAttempts === 2);
    expect(runtimeB.cached(executionId)!.revision).toBe(1n);
  });
});
