// What the projector's followers share: batch sizes and pacing, reading batches in commit order,
// the change notification and refusal logging. Applying batches with their checkpoints is
// group-follow.ts's (a lone projection is a group of one); the host is projector-host.ts.
import type pg from 'pg';
import type { Logger } from 'pino';
import type { Projection } from '../../projections/index.ts';
import type { BatchResult } from '../../projections/projection.ts';
import type { EventStore, StoredEvent } from '../eventstore/event-store.ts';

export const DEFAULT_BATCH_SIZE = 500;
/**
 * Events per batch while catching up (a new or rebuilt projection, a projector that was behind):
 * nobody waits for a row there, so only the cost per event counts, and per-batch costs (the
 * transaction, the checkpoint, one statement per table) are what 500 leaves. `baton bench
 * projections` (120,000 events, one projection from 0, two runs each, taken together), events/s at
 * 500 / 5,000: executions 24,819–28,801 / 28,641–31,758; execution_events 44,326–46,823 /
 * 46,520–56,309; workers 83,176–87,523 / 116,450–140,100. A batch of 5,000 is a few MB in memory
 * and a transaction of well under a second.
 */
export const CATCH_UP_BATCH_SIZE = 5_000;
/**
 * Least time between two reads of a projection's live subscription (minReadIntervalMs): under
 * load the projector then reads and commits fewer, larger batches instead of rescanning the
 * store on every wake-up. Each live batch costs a transaction (BEGIN, checkpoint, 1–4 writes,
 * NOTIFY, COMMIT) and each wake-up a scan, per projection: in a 3,000-execution `baton bench`
 * the projector's four followers made ~65% of all SQL statements (6,300 of 9,766), with
 * batches ~50 ms apart per projection and three scans per batch. After a quiet spell the first
 * event is read at once; lag grows by at most this much.
 */
export const MIN_READ_INTERVAL_MS = 100;
/**
 * How long the projector's first read after a quiet spell waits (settleMs): the submit that woke it
 * is followed within milliseconds by its handoff, start and, for a short run, its outcome, which
 * then come in one batch, and the projector's read and commit stay off the pickup path (2 cores:
 * they ran beside the executor's handoff append). Lag at light load grows by this much. Measured
 * in the peers harness's latency phase at 2 submits/s (three runs each, alternated, 22 samples a
 * run): the handoff's append took 3.6–4.1 ms on average at 0 and 2.1–2.3 ms at 10; pickup mean
 * 4.0–4.7 → 3.2–3.5 ms, p90 6.2–7.6 → 4.4–4.6 ms. At 50/s (reads paced by MIN_READ_INTERVAL_MS
 * anyway) no difference beyond the noise.
 */
export const SETTLE_MS = 10;
// pg_notify payloads are limited to 8,000 bytes: 200 uuids and commas fit.
const IDS_PER_NOTIFICATION = 200;

/** Read batches of a projection's (or any prefixes') events after `after`, until the store has no more deliverable. */
export async function* readBatches(store: EventStore, p: Pick<Projection, 'streamPrefixes'>, after: bigint, batchSize = DEFAULT_BATCH_SIZE): AsyncGenerator<StoredEvent[]> {
  for (;;) {
    const events = await store.readAll({ after, limit: batchSize, streamPrefixes: [...p.streamPrefixes] });
    if (events.length === 0) return;
    yield events;
    after = events[events.length - 1]!.globalPosition;
    if (events.length < batchSize) return;
  }
}

export async function notifyChanged(client: pg.ClientBase, channel: string, ids: readonly string[]): Promise<void> {
  for (let i = 0; i < ids.length; i += IDS_PER_NOTIFICATION) {
    await client.query('SELECT pg_notify($1, $2)', [channel, ids.slice(i, i + IDS_PER_NOTIFICATION).join(',')]);
  }
}

export function logRefused(log: Logger | undefined, p: Projection, result: BatchResult) {
  for (const r of result.refused) {
    log?.warn({ projection: p.name, streamId: r.streamId, revision: String(r.revision), reason: r.reason }, 'stored event refused by the machine; row left as it was');
  }
}

export interface FollowHooks {
  /** After each committed batch. */
  onBatch?(p: Projection, events: readonly StoredEvent[], result: BatchResult): void;
}
