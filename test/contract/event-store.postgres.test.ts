import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { START, type EventStore, type StoredEvent } from '../../src/eventstore/event-store.ts';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';
import { eventStoreContract, newEvent, readAllDeliverable, type EventStoreHarness } from './event-store.contract.ts';

async function postgresHarness(): Promise<EventStoreHarness & { store: PostgresEventStore; db: Awaited<ReturnType<typeof createTestDatabase>> }> {
  const db = await createTestDatabase({ max: 25 });
  const store = createPostgresEventStore(db.pool);
  return {
    db,
    store,
    async openAppend(streamId, events, expectedRevision) {
      const client = await db.pool.connect();
      await client.query('BEGIN');
      await store.appendWithin(client, streamId, events, { expectedRevision });
      return {
        async commit() {
          await client.query('COMMIT');
          client.release();
          store.notifyAppended();
        },
      };
    },
    async close() {
      await store.close();
      await db.drop();
    },
  };
}

eventStoreContract('postgres', postgresHarness, { openTransactions: true, snapshots: true });

describe('postgres event store: per-stream order matches commit order', () => {
  it('retries an append whose transaction id is older than the stream’s last writer, so readAll keeps stream order', async () => {
    const h = await postgresHarness();
    try {
      const { store, db } = h;
      const s = `order-${randomUUID()}`;
      // T_old takes its transaction id first (by writing elsewhere), then T_new appends to s and commits.
      const tOld = await db.pool.connect();
      await tOld.query('BEGIN');
      await store.appendWithin(tOld, `elsewhere-${randomUUID()}`, [newEvent()], { expectedRevision: 'no_stream' });
      await store.append(s, [newEvent('First')], { expectedRevision: 'no_stream' });
      // T_old now appends to s after it: its older id would sort before First, so it is refused.
      await expect(store.appendWithin(tOld, s, [newEvent('Second')], { expectedRevision: 0n })).rejects.toThrow(/TransactionOrder|order/i);
      await tOld.query('ROLLBACK');
      tOld.release();
      // A plain append (new transaction, newer id) succeeds, and readAll shows stream order.
      await store.append(s, [newEvent('Second')], { expectedRevision: 0n });
      const all = await readAllDeliverable(store, s, 2);
      expect(all.map((e) => e.type)).toEqual(['First', 'Second']);
    } finally {
      await h.close();
    }
  });

});

describe('postgres event store: one transaction per batch', () => {
  const transactionsOf = async (db: TestDatabase, streams: string[]) =>
    Number((await db.pool.query<{ n: string }>('SELECT count(DISTINCT transaction_id) AS n FROM baton_events WHERE stream_id = ANY($1)', [streams])).rows[0]!.n);

  it('stores an appendMany in one transaction, in the requests’ order, without the stream that conflicts', async () => {
    const h = await postgresHarness();
    try {
      const prefix = `one${randomUUID().slice(0, 8)}`;
      const streams = Array.from({ length: 6 }, (_, i) => `${prefix}-${i}-${randomUUID()}`);
      await h.store.append(streams[3]!, [newEvent()], { expectedRevision: 'no_stream' });
      const out = await h.store.appendMany(
        streams.map((s, i) => ({ streamId: s, events: [newEvent(`R${i}`), newEvent(`R${i}`)], expectedRevision: i === 3 ? 7n : ('no_stream' as const) })),
      );
      expect(out.map((o) => o.ok)).toEqual([true, true, true, false, true, true]);
      const batch = streams.filter((_, i) => i !== 3);
      expect(await transactionsOf(h.db, batch)).toBe(1);
      const all = await readAllDeliverable(h.store, prefix, 11);
      expect(all.slice(1).map((e) => e.type)).toEqual(['R0', 'R0', 'R1', 'R1', 'R2', 'R2', 'R4', 'R4', 'R5', 'R5']);
    } finally {
      await h.close();
    }
  });

  it('coalesces concurrent appends of one process into fewer transactions (group commit), each with its own outcome', async () => {
    const h = await postgresHarness();
    try {
      const streams = Array.from({ length: 64 }, () => `gc-${randomUUID()}`);
      const results = await Promise.all(streams.map((s) => h.store.append(s, [newEvent()], { expectedRevision: 'no_stream' })));
      expect(results.every((r) => r.nextExpectedRevision === 0n && !r.idempotentReplay)).toBe(true);
      const transactions = await transactionsOf(h.db, streams);
      // The first goes alone, the others queue behind it and share the next transaction(s).
      expect(transactions).toBeLessThan(64);
      expect(transactions).toBeGreaterThanOrEqual(2);
    } finally {
      await h.close();
    }
  });
});

describe('postgres event store: wake-ups across processes', () => {
  /** First event of `prefix` seen by `store`'s subscription, and how long it took. */
  function firstDelivery(store: EventStore, prefix: string): { ready: Promise<void>; delivered: Promise<StoredEvent>; stop(): void } {
    const ac = new AbortController();
    let markReady!: () => void;
    const ready = new Promise<void>((r) => (markReady = r));
    const delivered = (async () => {
      const iterator = store.subscribe({ after: START, streamPrefixes: [prefix], signal: ac.signal })[Symbol.asyncIterator]();
      const next = iterator.next();
      // The subscription has read once and now waits: only a wake-up can deliver what comes next.
      setTimeout(markReady, 100);
      const r = await Promise.race([
        next,
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('nothing delivered within 10 s: no wake-up reached the subscription')), 10_000).unref()),
      ]);
      await iterator.return?.();
      if (r.done) throw new Error('subscription ended before delivering');
      return r.value;
    })();
    return { ready, delivered, stop: () => ac.abort() };
  }

  /**
   * Two stores on one database, as two processes would have: a subscriber with its own pool and a
   * one-minute fallback poll (so delivery within seconds can only come from a wake-up), and an appender.
   */
  async function twoProcesses(test: (p: { db: TestDatabase; subscriber: EventStore; appender: EventStore }) => Promise<void>) {
    const db = await createTestDatabase();
    const subscriberPool = new pg.Pool({ connectionString: db.url, max: 3, application_name: 'baton-listener-test' });
    subscriberPool.on('error', () => undefined); // the listener may be killed on purpose
    const subscriber = createPostgresEventStore(subscriberPool, { idlePollMs: 60_000 });
    const appender = createPostgresEventStore(db.pool);
    try {
      await test({ db, subscriber, appender });
    } finally {
      await subscriber.close();
      await appender.close();
      await subscriberPool.end();
      await db.drop();
    }
  }

  it('wakes a subscriber of another store (another process) through NOTIFY, not the fallback poll', () =>
    twoProcesses(async ({ subscriber, appender }) => {
      const prefix = `xp${randomUUID().slice(0, 8)}`;
      const d = firstDelivery(subscriber, prefix);
      await d.ready;
      const t0 = performance.now();
      await appender.append(`${prefix}-1`, [newEvent('Remote')], { expectedRevision: 'no_stream' });
      const e = await d.delivered;
      const ms = performance.now() - t0;
      console.log(`[postgres] cross-process wake-up (NOTIFY) latency: ${ms.toFixed(2)} ms`);
      expect(e.type).toBe('Remote');
      expect(ms).toBeLessThan(5_000);
      d.stop();
    }));

  it('re-listens after its LISTEN connection is killed, and delivers what was appended meanwhile', () =>
    twoProcesses(async ({ db, subscriber, appender }) => {
      const prefix = `rl${randomUUID().slice(0, 8)}`;
      const d = firstDelivery(subscriber, prefix);
      await d.ready;
      const killed = await db.pool.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'baton-listener-test' AND query LIKE 'LISTEN%'",
      );
      expect(killed.rowCount).toBe(1);
      await appender.append(`${prefix}-1`, [newEvent('WhileDown')], { expectedRevision: 'no_stream' });
      const e = await d.delivered; // the reconnect re-reads, so nothing waits for the 60 s poll
      expect(e.type).toBe('WhileDown');
      d.stop();
    }));
});
