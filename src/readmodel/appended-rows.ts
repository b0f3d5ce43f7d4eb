// BATON_EXECUTION_ROWS=appenders: a process writes the read model's `executions` rows of the
// executions it moved on itself, from the snapshots its runtime already holds, instead of the
// projector reading those events back and folding them a second time. Rows are coalesced: each
// execution's latest snapshot waits at most FLUSH_INTERVAL_MS and is written once per flush, one
// transaction for all of them (projections/execution-row-writes.ts: row locks, never backwards,
// stats counted once). Measured in the peers harness (20,000 jobs, C=50, 2026-11-29, two
// alternated pairs each): written this way with no projector at all, 0.22–0.25× the best peer
// against 0.21–0.23× with the projector; written at every append instead, no gain (each row was
// written twice in a run, against the projector's ~1.1 per batch).
//
// What is not written (a crash between an append and its flush, a flush that kept failing, an
// appender without a writer) the projector repairs (executionsRepairProjection): it leaves the
// appenders REPAIR_HOLD_BACK_MS, then folds each row still behind its stream.
import type pg from 'pg';
import type { Logger } from 'pino';
import type { ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { writeAppendedRows } from '../../projections/execution-row-writes.ts';
import { rowOf } from '../../projections/executions.ts';
import { Backoff } from '../async/backoff.ts';
import { channelOf, readModelSchemaOf } from '../db/db-schema.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';
import { EXECUTIONS_CHANGED_CHANNEL } from './notifications.ts';
import { MIN_READ_INTERVAL_MS, SETTLE_MS, notifyChanged } from './projector.ts';
import { inTransaction } from './tables.ts';

/**
 * Least time between two flushes: the projector's pacing (MIN_READ_INTERVAL_MS), whose batches
 * write a row ~1.1 times per run; a row waits at most this long plus a flush under load.
 */
export const FLUSH_INTERVAL_MS = MIN_READ_INTERVAL_MS;

export interface AppendedRowWriter {
  /** Write what is pending now (and wait for a flush in flight). */
  flush(): Promise<void>;
  /** Stop listening, and write what is pending: a process ending leaves nothing to repair. */
  stop(): Promise<void>;
}

interface Pending {
  snapshot: ExecutionSnapshot;
  revision: number;
}

export function startAppendedRowWriter(o: {
  runtime: Pick<ExecutionRuntime, 'onChange' | 'onSubmitted'>;
  pool: pg.Pool;
  log: Logger;
  /** How long a change waits to be written, whatever the load (tests: a writer that writes only when flushed). Default: see schedule. */
  waitMs?: number;
}): AppendedRowWriter {
  const schema = readModelSchemaOf(o.pool);
  const channel = channelOf(o.pool, EXECUTIONS_CHANGED_CHANNEL);
  const pending = new Map<string, Pending>();
  const backoff = new Backoff();
  let timer: NodeJS.Timeout | undefined;
  let flushing: Promise<void> | undefined;
  let lastFlushAt = 0;
  let stopped = false;

  function hold(id: string, snapshot: ExecutionSnapshot, revision: number) {
    if ((pending.get(id)?.revision ?? -1) >= revision) return;
    pending.set(id, { snapshot, revision });
    schedule();
  }
  const unsubscribe = [
    o.runtime.onSubmitted((s) => hold(s.executionId, s.snapshot, 0)),
    o.runtime.onChange((c) => {
      // Only what this process appended: what it observes, its appender writes.
      const last = c.events[c.events.length - 1];
      if (c.source === 'own' && last) hold(c.id, c.after, Number(last.revision));
    }),
  ];

  // After a quiet spell the first change is written SETTLE_MS later, with what follows it at once
  // (the projector's reason, projector.ts); under load, FLUSH_INTERVAL_MS after the last flush.
  function schedule(delayMs = o.waitMs ?? Math.max(SETTLE_MS, lastFlushAt + FLUSH_INTERVAL_MS - Date.now())) {
    if (timer || flushing || stopped || pending.size === 0) return;
    timer = setTimeout(() => {
      timer = undefined;
      void flush();
    }, delayMs);
    timer.unref(); // stop() writes what is left
  }

  async function writePending(): Promise<void> {
    if (pending.size === 0) return;
    const batch = [...pending];
    pending.clear();
    lastFlushAt = Date.now();
    try {
      await inTransaction(
        o.pool,
        async (client) => {
          const rows = batch.map(([executionId, p]) => rowOf({ executionId, snapshot: p.snapshot, revision: p.revision, refusedEvents: 0 }));
          await notifyChanged(client, channel, await writeAppendedRows(client, schema, rows));
        },
        // Not durable at COMMIT, as the projector's batches: the rows are derived from events stored durably, and the projector repairs any a crash takes back.
        { durable: false },
      );
      backoff.reset();
    } catch (err) {
      // Back, unless a newer snapshot of the same execution came meanwhile.
      for (const [id, p] of batch) if ((pending.get(id)?.revision ?? -1) < p.revision) pending.set(id, p);
      throw err;
    }
  }

  function flush(): Promise<void> {
    flushing ??= writePending()
      .then(
        () => {
          flushing = undefined;
          schedule();
        },
        (err: unknown) => {
          flushing = undefined;
          const retryInMs = backoff.take();
          o.log.warn({ err, rows: pending.size, retryInMs }, 'could not write executions rows; retrying (the projector repairs any left behind)');
          schedule(retryInMs);
        },
      );
    return flushing;
  }

  return {
    async flush() {
      await flushing;
      await flush();
    },
    async stop() {
      stopped = true;
      for (const off of unsubscribe) off();
      clearTimeout(timer);
      timer = undefined;
      await flushing;
      try {
        await writePending();
      } catch (err) {
        o.log.warn({ err, rows: pending.size }, 'could not write executions rows while stopping; the projector repairs them');
      }
    },
  };
}
