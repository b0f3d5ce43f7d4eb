import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { START } from '../../src/eventstore/event-store.ts';
import { createTestDatabase } from '../support/test-db.ts';
import { eventStoreContract, newEvent, type EventStoreHarness } from './event-store.contract.ts';

async function postgresHarness(): Promise<EventStoreHarness & { store: PostgresEventStore; db: Awaited<ReturnType<typeof createTestDatabase>> }> {
  const db = await createTestDatabase({ max: 60 });
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

eventStoreContract('postgres', postgresHarness, { openTransactions: true });

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
      const all = (await store.readAll({ after: START, limit: 1000 })).filter((e) => e.streamId === s);
      expect(all.map((e) => e.type)).toEqual(['First', 'Second']);
    } finally {
      await h.close();
    }
  });

});
