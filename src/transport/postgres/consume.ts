// Consuming from the Postgres work queue: claims fed to the handlers by the shared pull loop
// (../pull-loop.ts), settling (ack, nak, term, working) and the queue depth for metrics.
//
// A row is a message and, once claimed, its lease. Claiming stamps locked_until (now + ack-wait)
// and counts the delivery in one statement, FOR UPDATE SKIP LOCKED, so concurrent consumers of
// one worker never wait on each other and never get the same row. delivery_count is the fencing
// token of a delivery: ack, nak and working() name it, so a handler whose lease ran out and was
// re-claimed elsewhere cannot settle or extend the newer delivery.
//
// A consumer with nothing to claim sleeps until the earliest moment one of its worker's rows
// becomes claimable (a nak's available_at, a lease's locked_until: the claim statement computes
// it), a wake-up, or a long safety poll for lost NOTIFYs, whichever comes first. No short fixed
// sleeps, no busy loop. One claim at a time per consumer: a claim is one round trip, and one
// pooled connection per consumer is enough.
//
// Acks are group-committed: acks (and terms) that arrive while a DELETE is in flight go out
// together in the next one, so ack throughput is not one round trip per message (at
// concurrency 50, ~16 acks per DELETE).
import type pg from 'pg';
import { Running } from '../background.ts';
import { validateConsume, type ConsumePart } from '../internal.ts';
import { PULL_AGAIN, runPullLoop, type PullSource, type Settlement } from '../pull-loop.ts';
import type { ConsumeOptions, Consumer, Delivery, WorkMessage } from '../work-transport.ts';
import type { PostgresContext } from './context.ts';
import { throttleWorking, workingEveryMs, type ThrottledWorking } from '../working-throttle.ts';
import { CLAIM_SQL, DELETE_SQL, DEPTH_SQL, NAK_SQL, RELEASE_SQL, WORKING_SQL, type ClaimRow } from './queue-sql.ts';

interface Claimed {
  id: string;
  payload: WorkMessage;
  count: number;
}

/** Deletes by (message_id, delivery_count), batching whatever arrives while one DELETE is in flight. */
export class DeleteBatcher {
  #pending: { id: string; count: number; resolve: () => void; reject: (err: unknown) => void }[] = [];
  #flushing: Promise<void> | undefined;

  constructor(private readonly pool: pg.Pool) {}

  delete(id: string, count: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#pending.push({ id, count, resolve, reject });
      this.#start();
    });
  }

  #start(): void {
    this.#flushing ??= this.#flush().finally(() => {
      this.#flushing = undefined;
      // One that came after the loop's last look and before this ran was left to it: delete it now.
      if (this.#pending.length > 0) this.#start();
    });
  }

  async #flush(): Promise<void> {
    while (this.#pending.length > 0) {
      const batch = this.#pending;
      this.#pending = [];
      try {
        await this.pool.query({ name: 'baton_work_delete', text: DELETE_SQL, values: [batch.map((b) => b.id), batch.map((b) => b.count)] });
        for (const b of batch) b.resolve();
      } catch (err) {
        for (const b of batch) b.reject(err);
      }
    }
  }

  async idle(): Promise<void> {
    await this.#flushing;
  }
}

export function createConsumers(ctx: PostgresContext): ConsumePart {
  const { pool, settings, log, wakeups } = ctx;
  const { ackWaitMs, maxDeliver, idlePollMs } = settings;
  const deletes = new DeleteBatcher(pool);
  const running = new Running();

  async function consume(workerId: string, handler: (delivery: Delivery) => Promise<void>, o: ConsumeOptions): Promise<Consumer> {
    ctx.assertOpen('consume');
    validateConsume(workerId, handler, o);
    const clog = log?.child({ workerId });
    await wakeups.ensureListening();

    const settlement = (id: string, count: number): Settlement => {
      // Made on the first working() only: a run that never heartbeats pays nothing for it.
      let throttled: ThrottledWorking | undefined;
      return {
        ack: () => {
          throttled?.stop();
          return deletes.delete(id, count);
        },
        // Dropped, not dead-lettered: a terminated message is deleted like an acked one.
        term: () => {
          throttled?.stop();
          return deletes.delete(id, count);
        },
        nak: async (delayMs: number) => {
          throttled?.stop();
          const r = await pool.query<{ dead_lettered: number }>({ name: 'baton_work_nak', text: NAK_SQL, values: [id, count, maxDeliver, delayMs] });
          if (r.rows[0]!.dead_lettered > 0) ctx.deadLettered(1, clog);
          // Consumers here recompute when to wake; other processes hear the NOTIFY.
          else wakeups.appended();
        },
        // One UPDATE per call starved the pool (and the worker's own heartbeat): throttled (working-throttle.ts).
        working: () =>
          (throttled ??= throttleWorking(async () => {
            try {
              const r = await pool.query({ name: 'baton_work_working', text: WORKING_SQL, values: [id, count, ackWaitMs] });
              if (r.rowCount === 0) clog?.debug({ messageId: id, deliveryCount: count }, 'working(): the lease is gone (settled, or expired and claimed again)');
            } catch (err) {
              clog?.warn({ err, messageId: id }, 'working(): could not extend the lease; the next call tries again');
            }
          }, workingEveryMs(ackWaitMs))).working(),
      };
    };

    async function claim(limit: number): Promise<{ rows: Claimed[]; wakeInMs: number | null }> {
      const r = await pool.query<ClaimRow>({ name: 'baton_work_claim', text: CLAIM_SQL, values: [workerId, limit, maxDeliver, ackWaitMs] });
      const rows: Claimed[] = [];
      let wakeInMs: number | null = null;
      for (const row of r.rows) {
        if (row.message_id !== null) rows.push({ id: row.message_id, payload: row.payload!, count: row.delivery_count! });
        else {
          wakeInMs = row.wake_in_ms;
          if (row.dead_lettered! > 0) ctx.deadLettered(row.dead_lettered!, clog);
        }
      }
      return { rows, wakeInMs };
    }

    async function release(rows: Claimed[]): Promise<void> {
      try {
        await pool.query({ name: 'baton_work_release', text: RELEASE_SQL, values: [rows.map((r) => r.id), rows.map((r) => r.count)] });
        wakeups.appended();
      } catch (err) {
        clog?.warn({ err, messages: rows.length }, 'could not release messages claimed while stopping; they are redelivered after ack-wait');
      }
    }

    const source: PullSource = {
      // A fresh publish may retry sooner.
      backOff: (ms, signal) => wakeups.waitSince(wakeups.seq, ms, signal),
      async pull(max, take, signal) {
        const seq = wakeups.seq; // before the claim: a wake-up during it is not lost
        let claimed: Awaited<ReturnType<typeof claim>>;
        try {
          claimed = await claim(max);
        } catch (err) {
          return { next: 'back-off', why: 'work queue claim failed; retrying', err };
        }
        if (signal.aborted) {
          if (claimed.rows.length > 0) await release(claimed.rows);
          return PULL_AGAIN;
        }
        for (const row of claimed.rows) take({ message: row.payload, deliveryCount: row.count, settlement: settlement(row.id, row.count) });
        if (claimed.rows.length === max) return PULL_AGAIN; // there may be more: claim again once a slot is free
        // Nothing more is claimable now: sleep until the next row's time comes, or a wake-up.
        const untilNext = claimed.wakeInMs === null ? idlePollMs : Math.min(idlePollMs, Math.ceil(claimed.wakeInMs) + 1);
        return { next: 'wait', wait: (s) => wakeups.waitSince(seq, Math.max(1, untilNext), s) };
      },
    };

    const loop = runPullLoop(source, { concurrency: o.concurrency, handler, log: clog });
    return running.add(async () => {
      await loop.stop();
      await deletes.idle();
    });
  }

  async function depth(workerId?: string): Promise<number> {
    const r = await pool.query<{ n: number }>({ name: 'baton_work_depth', text: DEPTH_SQL, values: [workerId ?? null, maxDeliver] });
    return r.rows[0]!.n;
  }

  return {
    port: { consume, depth },
    stopAll: async () => {
      await running.stopAll();
      await deletes.idle();
    },
  };
}
