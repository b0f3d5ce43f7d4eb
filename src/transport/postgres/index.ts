// The Postgres WorkTransport: the embedded mode's work queue (no NATS), one table,
// baton_work_queue (migrations/0001_work_queue.sql), assembled from its parts.
//
// Wake-ups: a publish (or a nak, or a consumer stopping with rows it had claimed) wakes consumers
// in this process directly and other processes with a NOTIFY on `baton_work`: a publish's inside
// its own statement, which commits without waiting for a flush (./queue-sql.ts says why), the
// others coalesced and sent after their commit (src/eventstore/pg-wakeups.ts has the figures).
//
// The parts, one concern each: ./queue-sql.ts (the queue's statements, and why they are shaped
// so), ./publish.ts, ./consume.ts (claims, leases and acks, on the shared ../pull-loop.ts),
// ./dead-letters.ts (baton_dead_letters: subscribers, the sweep, `baton dlq`), ./signals.ts
// (NOTIFY on `baton_signals`), and ./context.ts (options, the pool and the wake-ups).
import type pg from 'pg';
import type { SignalSubscription, WorkerSignal, WorkTransport } from '../work-transport.ts';
import { createConsumers } from './consume.ts';
import { createPostgresContext, type PostgresWorkTransportOptions } from './context.ts';
import { createDeadLetters } from './dead-letters.ts';
import { createPublish } from './publish.ts';
import { PgSignals } from './signals.ts';

export { DEAD_LETTER_NOTIFY_CHANNEL, WORK_NOTIFY_CHANNEL, type PostgresWorkTransportOptions } from './context.ts';
export { SIGNAL_NOTIFY_CHANNEL } from './signals.ts';

export function createPostgresWorkTransport(pool: pg.Pool, options: PostgresWorkTransportOptions = {}): WorkTransport {
  const ctx = createPostgresContext(pool, options);
  const consumers = createConsumers(ctx);
  const deadLetters = createDeadLetters(ctx);
  const signals = new PgSignals(pool, ctx.log);
  let closing: Promise<void> | undefined;

  async function sendSignal(workerId: string, signal: WorkerSignal): Promise<void> {
    ctx.assertOpen('sendSignal');
    await signals.send(workerId, signal);
  }

  async function onSignal(workerId: string, handler: (signal: WorkerSignal) => void): Promise<SignalSubscription> {
    ctx.assertOpen('onSignal');
    return signals.subscribe(workerId, handler);
  }

  /**
   * Stops every consumer and dead-letter subscription (waiting for their handlers) and every
   * signal subscription, then stops listening. Does not end the pool.
   */
  function close(): Promise<void> {
    ctx.close();
    return (closing ??= (async () => {
      await consumers.stopAll();
      await deadLetters.stopAll();
      await signals.close();
      await ctx.wakeups.close();
      await ctx.deadLetterWakeups.close();
    })());
  }

  return { kind: 'postgres', publish: createPublish(ctx), ...consumers.port, ...deadLetters.port, sendSignal, onSignal, close };
}
