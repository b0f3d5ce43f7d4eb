import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
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
    async sendRawSignal(_workerId, payload) {
      await db.pool.query(`SELECT pg_notify('baton_signals', $1)`, [payload]);
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

describe('postgres work queue: dead letters and wake-ups', () => {
  const db = useTestDatabase({ max: 4 });

  // One statement, so both tables are read in one snapshot: two queries could see a message
  // in the queue and then, moved in between, in the dead letters too.
  async function rowsOf(messageId: string) {
    const { rows } = await db().pool.query<{ queued: { delivery_count: number } | null; dead: { deliveries: number; reason: string; handled: boolean } | null }>(
      `SELECT (SELECT json_build_object('delivery_count', delivery_count) FROM baton_work_queue WHERE message_id = $1) AS queued,
              (SELECT json_build_object('deliveries', deliveries, 'reason', reason, 'handled', handled_at IS NOT NULL)
                 FROM baton_dead_letters WHERE message_id = $1) AS dead`,
      [messageId],
    );
    return { queued: rows[0]!.queued ?? undefined, dead: rows[0]!.dead ?? undefined };
  }

  async function waitForRows(messageId: string, until: (rows: Awaited<ReturnType<typeof rowsOf>>) => boolean, timeoutMs = 5_000) {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const rows = await rowsOf(messageId);
      if (until(rows)) return rows;
      if (performance.now() > deadline) throw new Error(`rows of ${messageId} never matched; last ${JSON.stringify(rows)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  it('moves a message nak’ed on its last delivery, and one whose last lease ran out, from the queue to baton_dead_letters', async () => {
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
      const dead = { deliveries: 2, reason: 'not acknowledged after 2 deliveries', handled: false };
      expect(await waitForRows(nacked.messageId, (r) => r.dead !== undefined)).toEqual({ queued: undefined, dead });
      // The consumer wakes when the last lease expires and moves it; nothing claims it again.
      expect(await waitForRows(stuck.messageId, (r) => r.dead !== undefined)).toEqual({ queued: undefined, dead });
      expect(await transport.depth('w-exhaust')).toBe(0);
      for (const r of release) r();
      await consumer.stop();
      expect(await rowsOf(stuck.messageId)).toEqual({ queued: undefined, dead }); // the stale auto-nak changed nothing
    } finally {
      for (const r of release) r();
      await transport.close();
    }
  });

  it('a subscriber sweeps exhausted messages no consumer is left to move, and marks what it handled', async () => {
    const transport = createPostgresWorkTransport(db().pool, { ackWaitMs: 300, maxDeliver: 2 });
    try {
      // Delivered twice, the last lease over, and its worker gone: only a sweep can move it.
      const orphan = workMessage('w-gone');
      await transport.publish([orphan]);
      await db().pool.query(`UPDATE baton_work_queue SET delivery_count = 2, locked_until = now() - interval '1 second' WHERE message_id = $1`, [orphan.messageId]);
      const handed: string[] = [];
      const subscription = await transport.onDeadLetter(async (d) => {
        handed.push(d.messageId);
      });
      expect(await waitForRows(orphan.messageId, (r) => r.dead?.handled === true)).toEqual({
        queued: undefined,
        dead: { deliveries: 2, reason: 'not acknowledged after 2 deliveries', handled: true },
      });
      expect(handed.filter((id) => id === orphan.messageId)).toEqual([orphan.messageId]); // (and the earlier test's, unhandled till now)
      await subscription.stop();
      // Handled: a later subscriber is not handed it again.
      const later: string[] = [];
      const again = await transport.onDeadLetter(async (d) => {
        later.push(d.messageId);
      });
      await new Promise((r) => setTimeout(r, 300)); // a window to show nothing is handed over
      await again.stop();
      expect(later).toEqual([]); // nothing: every dead letter here was handled by the first subscriber
    } finally {
      await transport.close();
    }
  });

  it('the sweep purges what no consumer claimed for unclaimedPurgeMs (a worker id gone for good), not as a dead letter; what is claimed or young stays', async () => {
    const transport = createPostgresWorkTransport(db().pool, { unclaimedPurgeMs: 60_000 });
    try {
      const [left, leased, young] = [workMessage('w-autoscaled-away'), workMessage('w-autoscaled-away'), workMessage('w-starting')];
      await transport.publish([left, leased, young]);
      // Published two minutes ago; `leased` was claimed then, and its lease still runs.
      await db().pool.query(`UPDATE baton_work_queue SET available_at = now() - interval '2 minutes', created_at = now() - interval '2 minutes' WHERE message_id = ANY($1)`, [[left.messageId, leased.messageId]]);
      await db().pool.query(`UPDATE baton_work_queue SET delivery_count = 1, locked_until = now() + interval '20 seconds' WHERE message_id = $1`, [leased.messageId]);
      expect(await transport.depth('w-autoscaled-away')).toBe(2);
      const subscription = await transport.onDeadLetter(async () => undefined); // its sweep runs at once
      await waitForRows(left.messageId, (r) => r.queued === undefined);
      await subscription.stop();
      expect(await rowsOf(left.messageId)).toEqual({ queued: undefined, dead: undefined }); // purged, not dead-lettered
      expect((await rowsOf(leased.messageId)).queued).toBeDefined();
      expect((await rowsOf(young.messageId)).queued).toBeDefined();
      expect(await transport.depth('w-autoscaled-away')).toBe(1);
    } finally {
      await transport.close();
    }
  });

  it('wakes a dead-letter subscriber in another process through NOTIFY, not its poll or sweep', async () => {
    const otherPool = new pg.Pool({ connectionString: db().url, max: 3 });
    const subscriberSide = createPostgresWorkTransport(otherPool, { deadLetterPollMs: 60_000, deadLetterSweepMs: 60_000 });
    const workerSide = createPostgresWorkTransport(db().pool, { maxDeliver: 1 });
    try {
      const m = workMessage('w-dl-notify');
      let handed!: () => void;
      const got = new Promise<void>((r) => (handed = r));
      const subscription = await subscriberSide.onDeadLetter(async (d) => {
        if (d.messageId === m.messageId) handed();
      });
      const consumer = await workerSide.consume('w-dl-notify', (d) => d.nak(), { concurrency: 1 });
      await new Promise((r) => setTimeout(r, 100)); // let the subscriber go idle: only a wake-up can hand it over now
      const t0 = performance.now();
      await workerSide.publish([m]);
      await Promise.race([got, new Promise((_, reject) => setTimeout(() => reject(new Error('not handed over within 5 s')), 5_000).unref())]);
      console.log(`[postgres] dead letter to a subscriber in another process via NOTIFY: ${(performance.now() - t0).toFixed(2)} ms`);
      await consumer.stop();
      await subscription.stop();
    } finally {
      await subscriberSide.close();
      await workerSide.close();
      await otherPool.end();
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
