// What every part of one Postgres work transport shares: its options, compiled once, the pool
// and the two wake-up channels.
import type pg from 'pg';
import type { Logger } from 'pino';
import { BatonError } from '../../errors.ts';
import { PgWakeups } from '../../eventstore/pg-wakeups.ts';
import { compileTransportOptions, GONE_WORKER_AFTER_MS, positiveInteger } from '../internal.ts';
import type { WorkTransportOptions } from '../work-transport.ts';
import { componentLogger } from '../../log.ts';

export const WORK_NOTIFY_CHANNEL = 'baton_work';
export const DEAD_LETTER_NOTIFY_CHANNEL = 'baton_dead_letters';

export interface PostgresWorkTransportOptions extends WorkTransportOptions {
  log?: Logger;
  /**
   * Longest an idle consumer sleeps before it looks again without being woken (ms). Only a
   * safety net for a lost NOTIFY: consumers are woken by publishes and sleep exactly until the
   * next nak delay or lease expiry. Default 5,000.
   */
  idlePollMs?: number;
  /**
   * Longest an onDeadLetter subscriber waits before it looks for unhandled dead letters without
   * being woken (ms); a safety net for a lost NOTIFY. Default 5,000.
   */
  deadLetterPollMs?: number;
  /** How often an onDeadLetter subscriber sweeps every worker's exhausted messages into the dead letters (ms). Default 30,000. */
  deadLetterSweepMs?: number;
  /**
   * A message no consumer has claimed for this long while it could have (its worker id is gone:
   * an autoscaled worker that never comes back) is purged by that sweep (ms): the executor
   * reclaimed its execution long before. Default 1 hour, as NATS's consumerInactiveThresholdMs.
   */
  unclaimedPurgeMs?: number;
}

export interface PostgresSettings {
  ackWaitMs: number;
  maxDeliver: number;
  idlePollMs: number;
  deadLetterPollMs: number;
  deadLetterSweepMs: number;
  unclaimedPurgeMs: number;
}

/** Throws ConfigError naming the option. */
export function compilePostgresOptions(options: PostgresWorkTransportOptions): PostgresSettings {
  return {
    ...compileTransportOptions(options),
    idlePollMs: positiveInteger('idlePollMs', options.idlePollMs, 5_000),
    deadLetterPollMs: positiveInteger('deadLetterPollMs', options.deadLetterPollMs, 5_000),
    deadLetterSweepMs: positiveInteger('deadLetterSweepMs', options.deadLetterSweepMs, 30_000),
    unclaimedPurgeMs: positiveInteger('unclaimedPurgeMs', options.unclaimedPurgeMs, GONE_WORKER_AFTER_MS),
  };
}

/** The pool, settings and wake-ups every part of one transport instance works with. */
export interface PostgresContext {
  pool: pg.Pool;
  settings: PostgresSettings;
  log: Logger | undefined;
  /** Publishes (and naks, releases, retried dead letters) wake the consumers. */
  wakeups: PgWakeups;
  /** Only subscribers LISTEN here; anything that moves a message to the dead letters notifies. */
  deadLetterWakeups: PgWakeups;
  /** After a move to the dead letters committed: log it, wake subscribers here, and elsewhere by NOTIFY. */
  deadLettered(n: number, about: Logger | undefined): void;
  /** Throws once the transport is closed. */
  assertOpen(what: string): void;
}

export function createPostgresContext(pool: pg.Pool, options: PostgresWorkTransportOptions): PostgresContext & { close(): void } {
  const settings = compilePostgresOptions(options);
  const log = options.log && componentLogger(options.log, 'work-transport', { transport: 'postgres' });
  const deadLetterWakeups = new PgWakeups(pool, log, DEAD_LETTER_NOTIFY_CHANNEL);
  let closed = false;
  return {
    pool,
    settings,
    log,
    wakeups: new PgWakeups(pool, log, WORK_NOTIFY_CHANNEL),
    deadLetterWakeups,
    deadLettered(n, about) {
      about?.warn({ deadLetters: n }, 'messages not acknowledged within max-deliver moved to the dead letters');
      deadLetterWakeups.appended();
    },
    assertOpen(what) {
      if (closed) throw new BatonError(`${what}: the Postgres work transport is closed`);
    },
    close() {
      closed = true;
    },
  };
}
