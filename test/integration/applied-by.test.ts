// A `stream` subscription is not woken by the appends of the appenders it lists in `appliedBy`
// (they apply their own events to what it keeps), and Postgres leaves the rows of their
// transactions out of its reads (pg-own-commits.ts); everyone else's appends wake it and are
// delivered. On the real Postgres, with the follower's idle poll
// at a minute, so only a wake-up can deliver in time.
// Then the same through the actor runtime: a follower fed by runtime A is not woken by A's
// dispatches, yet hears runtime B's (another runtime on the same store) at once.
import pg from 'pg';
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import pino from 'pino';
import { START, type StoredEvent } from '../../src/eventstore/event-store.ts';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { followActors } from '../../src/runtime/follow-actors.ts';
import { useTestDatabase } from '../support/test-db.ts';
import { until } from '../support/until.ts';

const db = useTestDatabase();
const IDLE_POLL_MS = 60_000;
// How long a delivery that no wake-up asked for must stay away: far above a wake-up's few ms.
const QUIET_MS = 400;

const event = () => ({ eventId: randomUUID(), type: 'Probe', data: {}, metadata: {} });


describe('appliedBy: appenders whose appends do not wake a stream subscription', () => {
  const cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });

  /** A store on a pool of its own; `scans()` counts the stream-order reads it has made. */
  async function openStore() {
    const pool = new pg.Pool({ connectionString: db().url, max: 6 });
    let scans = 0;
    const query = pool.query.bind(pool) as (...a: unknown[]) => unknown;
    pool.query = ((...args: unknown[]) => {
      const q = args[0];
      if (typeof q === 'object' && q !== null && (q as { name?: string }).name === 'baton_scan_committed') scans++;
      return query(...args);
    }) as typeof pool.query;
    const store = createPostgresEventStore(pool, { idlePollMs: IDLE_POLL_MS });
    cleanup.push(async () => {
      await store.close();
      await pool.end();
    });
    return Object.assign(store, { scans: () => scans });
  }

  /** Collects what a subscription delivers, from the start. */
  function collect(store: Awaited<ReturnType<typeof openStore>>, o: { prefix: string; appliedBy?: ReadonlySet<object> }) {
    const ac = new AbortController();
    const got: StoredEvent[] = [];
    const running = (async () => {
      for await (const e of store.subscribe({ after: START, streamPrefixes: [o.prefix], order: 'stream', signal: ac.signal, ...(o.appliedBy && { appliedBy: o.appliedBy }) })) got.push(e);
    })();
    cleanup.push(async () => {
      ac.abort();
      await running;
    });
    return got;
  }

  it('appends of a listed appender, batched or lone, neither wake it nor are read back; anyone else’s wakes it at once, and comes in order', { timeout: 20_000 }, async () => {
    const store = await openStore();
    const prefix = `ab-${randomUUID().slice(0, 8)}-`;
    const mine = { appender: 'mine' };
    const quiet = collect(store, { prefix, appliedBy: new Set([mine]) });
    const everyone = collect(store, { prefix });
    await store.append(`${prefix}warm`, [event()], { expectedRevision: 'no_stream', origin: { appender: 'another' } });
    await until('both to start', () => quiet.length === 1 && everyone.length === 1);

    // A batch of several appends (as under load) by `mine`: only the other subscription wakes.
    const batch = async (streams: string[]) =>
      store.appendMany(
        streams.map((s) => ({ streamId: `${prefix}${s}`, events: [event(), event()], expectedRevision: 'no_stream' as const })),
        { origin: mine },
      );
    await batch(['b', 'c']);
    await until('the subscription without appliedBy to get them', () => everyone.length === 5);
    await new Promise((r) => setTimeout(r, QUIET_MS));
    expect(quiet.map((e) => e.streamId), 'delivered without a wake-up').toEqual([`${prefix}warm`]);

    // Anyone else's append (here one naming no appender) wakes it: that comes, and the scan passes
    // over the rows of `mine`'s batch, which `mine` applied for it.
    await store.append(`${prefix}x`, [event()], { expectedRevision: 'no_stream' });
    await until('the quiet subscription to get it', () => quiet.length === 2);
    await store.append(`${prefix}x`, [event()], { expectedRevision: 0n });
    await until('the next one too', () => quiet.length === 3);
    expect(quiet.map((e) => [e.streamId, e.revision])).toEqual([[`${prefix}warm`, 0n], [`${prefix}x`, 0n], [`${prefix}x`, 1n]]);

    // A lone append (nothing else of the store in flight) by `mine` is remembered as its own too:
    // it does not wake the subscription, and the next wake-up (anyone else's append) passes over it
    // with the batch before it. At light load that was one read of the store per execution less.
    await batch(['d', 'e']);
    await store.append(`${prefix}a`, [event()], { expectedRevision: 'no_stream', origin: mine });
    await until('the other subscription to get them', () => everyone.length === 12);
    await new Promise((r) => setTimeout(r, QUIET_MS));
    expect(quiet, 'delivered without a wake-up').toHaveLength(3);
    await store.append(`${prefix}y`, [event()], { expectedRevision: 'no_stream' });
    await until('the quiet subscription to get it', () => quiet.length === 4);
    await until('the other subscription to get everything', () => everyone.length === 13);
    const mineStreams = new Set(['b', 'c', 'd', 'e', 'a'].map((s) => `${prefix}${s}`));
    expect(quiet.map((e) => e.eventId)).toEqual(everyone.filter((e) => !mineStreams.has(e.streamId)).map((e) => e.eventId));
  });

  it('a follower fed by a runtime is not woken by that runtime’s dispatches, and hears another runtime’s at once', { timeout: 20_000 }, async () => {
    const store = await openStore();
    const a = createExecutionRuntime(store);
    const b = createExecutionRuntime(store);
    const follower = followActors({ store, runtimes: [a.actors], log: pino({ level: 'silent' }), who: 'test' });
    cleanup.push(() => follower.stop());
    await follower.ready;
    const heard: { id: string; source: string; revisions: bigint[] }[] = [];
    a.actors.onChange((c) => heard.push({ id: c.id, source: c.source, revisions: c.events.map((e) => e.revision) }));

    // Submitted through B: A's follower is woken and A hears it.
    const { executionId } = await b.submit({ action: 'noop', input: null });
    await until('A to hear B’s submission', () => heard.some((h) => h.id === executionId));
    expect(heard).toEqual([{ id: executionId, source: 'observed', revisions: [0n] }]);

    // A moves two on itself in one batch (as its executor does under load): A hears each once, as
    // its own, and its follower does not read them back (no read of the store) until something
    // else wakes it: B's next submission.
    const second = await b.submit({ action: 'noop', input: null });
    await until('A to hear B’s second submission', () => heard.some((h) => h.id === second.executionId));
    heard.length = 0;
    const scans = store.scans();
    const start = { type: 'SchedulingStarted', data: {}, by: 'executor' } as never;
    const outcomes = await a.actors.dispatchMany([executionId, second.executionId].map((id) => ({ id, commands: start })));
    expect(outcomes.map((o) => o.ok)).toEqual([true, true]);
    expect(heard).toEqual([executionId, second.executionId].map((id) => ({ id, source: 'own', revisions: [1n] })));
    await new Promise((r) => setTimeout(r, QUIET_MS));
    expect(store.scans(), 'reads of the store after A’s own dispatches').toBe(scans);
    const third = await b.submit({ action: 'noop', input: null });
    await until('A to hear B’s third submission', () => heard.some((h) => h.id === third.executionId));
    expect(store.scans()).toBeGreaterThan(scans);
    expect(heard.slice(2)).toEqual([{ id: third.executionId, source: 'observed', revisions: [0n] }]);
  });
});
