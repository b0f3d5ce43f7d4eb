// The projector: follows the event store in commit order and applies each projection's batch
// together with its checkpoint in one transaction, so every event counts exactly once even if
// the process dies at any point, and a second projector (or a rebuild's swap) moving the same
// checkpoint makes this one start over from the stored position instead of applying twice.
import type pg from 'pg';
import type { Logger } from 'pino';
import type { Projection } from '../../projections/index.ts';
import { channelOf, readModelSchemaOf } from '../db/db-schema.ts';
import type { BatchResult, EventSource } from '../../projections/projection.ts';
import type { EventStore, StoredEvent } from '../eventstore/event-store.ts';
import { advanceCheckpoint, readCheckpoint } from './checkpoints.ts';
import { eventSourceOf } from './event-source.ts';
import { EXECUTIONS_CHANGED_CHANNEL } from './notifications.ts';
import { inTransaction } from './tables.ts';

export const DEFAULT_BATCH_SIZE = 500;
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

/**
 * Apply a batch to the live tables and move the checkpoint from `expected`, in one transaction.
 * Returns null, having written nothing, when the checkpoint was no longer at `expected`.
 */
export async function applyLiveBatch(pool: pg.Pool, p: Projection, expected: bigint, events: readonly StoredEvent[], source?: EventSource): Promise<BatchResult | null> {
  const last = events[events.length - 1]!;
  return inTransaction(pool, async (client) => {
    // The checkpoint first: its row lock orders us against any other mover before we write rows.
    const moved = await advanceCheckpoint(client, p.name, expected, { position: last.globalPosition, events: events.length, lastRecordedAt: last.recordedAt });
    if (!moved) return null;
    const result = await p.apply(client, readModelSchemaOf(pool), events, source);
    // NOTIFY is transactional: listeners hear of the change only once the rows are committed.
    await notifyChanged(client, channelOf(pool, EXECUTIONS_CHANGED_CHANNEL), result.changedExecutions);
    return result;
  });
}

export function logRefused(log: Logger | undefined, p: Projection, result: BatchResult) {
  for (const r of result.refused) {
    log?.warn({ projection: p.name, streamId: r.streamId, revision: String(r.revision), reason: r.reason }, 'stored event refused by the machine; row left as it was');
  }
}

/** Bring one projection's live tables up to the current end of the store, then return. */
export async function catchUpProjection(o: { pool: pg.Pool; store: EventStore; projection: Projection; log?: Logger; batchSize?: number }): Promise<number> {
  let applied = 0;
  for (let restarts = 0; restarts < 100; restarts++) {
    let position = (await readCheckpoint(o.pool, o.projection.name)).position;
    let conflict = false;
    for await (const events of readBatches(o.store, o.projection, position, o.batchSize)) {
      const result = await applyLiveBatch(o.pool, o.projection, position, events, eventSourceOf(o.store, o.pool));
      if (!result) {
        conflict = true; // someone else moved it: start again from where they left it
        break;
      }
      logRefused(o.log, o.projection, result);
      applied += events.length;
      position = events[events.length - 1]!.globalPosition;
    }
    if (!conflict) return applied;
  }
  throw new Error(`projection ${o.projection.name}: checkpoint kept moving under us; is another projector running flat out?`);
}

export interface FollowHooks {
  /** After each committed batch. */
  onBatch?(p: Projection, events: readonly StoredEvent[], result: BatchResult): void;
}
