import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createPostgresWorkTransport } from '../../src/transport/postgres.ts';
import type { WorkTransport, WorkTransportOptions } from '../../src/transport/work-transport.ts';
import { createTestDatabase, useTestDatabase } from '../support/test-db.ts';
import { workMessage, workTransportContract, type WorkTransportHarness } from './work-transport.contract.ts';

/**
 * Each open() gets its own pool, so its LISTEN connection and wake-ups are another process's.
 * Pools stay small (5, one of them the LISTEN connection): the test server is shared by every
 * file running at once and by other runs, and has max_connections 100.
 */
async function postgresHarness(): Promise<WorkTransportHarness> {
  const db = await createTestDatabase({ max: 2 });
  const opened: { transport: WorkTransport; pool: pg.Pool }[] = [];
  return {
    async open(options: WorkTransportOptions) {
      const pool = new pg.Pool({ connectionString: db.url, max: 5 });
      const transport = createPostgresWorkTransport(pool, options);
      opened.push({ transport, pool });
      return transport;
    },
    async close() {
      for (const { transport, pool } of opened) {
        await transport.close();
        await pool.end();
      }
      await db.drop();
    },
  };
}

workTransportContract('postgres', postgresHarness);

describe('postgres work queue: exhausted messages stay in the table, flagged', () => {
  const db = useTestDatabase({ max: 4 });

  async function rowOf(messageId: string) {
    const r = await db().pool.query<{ delivery_count: number; exhausted: boolean; locked: boolean }>(
      'SELECT delivery_count, exhausted_at IS NOT NULL AS exhausted, locked_until IS NOT NULL AS locked FROM baton_work_queue WHERE message_id = $1',
      [messageId],
    );
    return r.rows[0];
  }

  async function waitForRow(messageId: string, until: (row: Awaited<ReturnType<typeof rowOf>>) => boolean, timeoutMs = 5_000) {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const row = await rowOf(messageId);
      if (until(row)) return row;
      if (performance.now() > deadline) throw new Error(`row ${messageId} never matched; last ${JSON.stringify(row)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  it('flags a message nak’ed on its last delivery, and one whose last lease ran out', async () => {
    const transport = createPostgresWorkTransport(db().pool, { ackWaitMs: 300, maxDeliver: 2 });
    const release: (() => void)[] = [];
    try {
      const nacked = workMessage('w-exhaust');
      const stuck = workMessage('w-exhaust', { action: 'stuck' });
      const consumer = await transport.consume(
        'w-exhaust',
        async (d) => {
          if (d.message.action === 'stuck') await new Promise<void>((r) => release.push(r)); // never settles in time
          else await d.nak();
        },
        { concurrency: 4 },
      );
      await transport.publish([nacked, stuck]);
      expect(await waitForRow(nacked.messageId, (r) => r?.exhausted === true)).toEqual({ delivery_count: 2, exhausted: true, locked: false });
      // The consumer wakes when the last lease expires and flags it; nothing claims it again.
      expect(await waitForRow(stuck.messageId, (r) => r?.exhausted === true)).toEqual({ delivery_count: 2, exhausted: true, locked: false });
      expect(await transport.depth('w-exhaust')).toBe(0);
      for (const r of release) r();
      await consumer.stop();
      expect((await rowOf(stuck.messageId))?.delivery_count).toBe(2); // the stale auto-nak changed nothing
    } finally {
      for (const r of release) r();
      await transport.close();
    }
  });

  it('wakes a consumer in another process through NOTIFY, not its safety poll', async () => {
    const otherPool = new pg.Pool({ connectionString: db().url, max: 3 });
    // A one-minute safety poll: delivery within seconds can only come from the NOTIFY.
    const consumerSide = createPostgresWorkTransport(otherPool, { idlePollMs: 60_000 });
    const publisherSide = createPostgresWorkTransport(db().pool);
    try {
      let delivered!: () => void;
      const got = new Promise<void>((r) => (delivered = r));
      const consumer = await consumerSide.consume('w-notify', async (d) => {
        await d.ack();
        delivered();
      }, { concurrency: 1 });
      await new Promise((r) => setTimeout(r, 100)); // let it go idle: only a wake-up can deliver now
      const t0 = performance.now();
      await publisherSide.publish([workMessage('w-notify')]);
      await Promise.race([got, new Promise((_, reject) => setTimeout(() => reject(new Error('not delivered within 5 s')), 5_000).unref())]);
      console.log(`[postgres] cross-process pickup via NOTIFY: ${(performance.now() - t0).toFixed(2)} ms`);
      await consumer.stop();
    } finally {
      await consumerSide.close();
      await publisherSide.close();
      await otherPool.end();
    }
  });
});
