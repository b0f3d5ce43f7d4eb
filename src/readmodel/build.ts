// Building a projection's tables from the events into any schema: a rebuild's aside schema or
// verify's scratch schema. No checkpoint row: the caller keeps the position.
import type pg from 'pg';
import { projections as allProjections, type Projection } from '../../projections/index.ts';
import type { EventStore, StoredEvent } from '../eventstore/event-store.ts';
import { BatonError } from '../errors.ts';
import { eventsOf } from '../../projections/projection.ts';
import { CATCH_UP_BATCH_SIZE, readBatches } from './projector.ts';
import { eventSourceOf } from './event-source.ts';
import { inTransaction } from './tables.ts';
import { prefixPatterns } from '../eventstore/pg-follow.ts';
import { archivedStreamIds } from '../retention/store-side.ts';

export interface BuildProgress {
  projection: string;
  events: number;
}

export interface BuildOptions {
  pool: pg.Pool;
  store: EventStore;
  projection: Projection;
  schema: string;
  /** Resume after this position (START for a build from nothing). */
  from: bigint;
  /** Stop right after applying the event at this position; it must come. Absent: to the current end. */
  until?: bigint;
  /** Apply inside this client's open transaction instead of one transaction per batch. */
  client?: pg.ClientBase;
  batchSize?: number;
  onProgress?(p: BuildProgress): void;
}

export interface BuildResult {
  position: bigint;
  events: number;
  lastRecordedAt: Date | null;
}

export async function buildInto(o: BuildOptions): Promise<BuildResult> {
  let position = o.from;
  let count = 0;
  let lastRecordedAt: Date | null = null;
  // EventStoreDB keeps a deleted stream's events in $all until a scavenge: leave out the streams
  // retention archived (their rows left the live read model with them).
  const archived = o.store.deletedStreamsStayInReadAll ? await archivedStreamIds(o.pool) : undefined;
  const source = eventSourceOf(o.store, o.pool);
  const applyAll = (events: StoredEvent[]) =>
    o.client ? o.projection.apply(o.client, o.schema, events, source) : inTransaction(o.pool, (c) => o.projection.apply(c, o.schema, events, source));
  const apply = async (events: StoredEvent[]) => {
    const kept = archived ? events.filter((e) => !archived.has(e.streamId)) : events;
    if (kept.length > 0) await applyAll(kept);
  };
  // A checkpoint that followed in a group may stand at another projection's event
  // (group-follow.ts): to find it, read every projection's streams and apply only our own.
  const read = o.until === undefined ? o.projection : { streamPrefixes: [...new Set([...o.projection.streamPrefixes, ...allProjections.flatMap((p) => p.streamPrefixes)])] };
  const until = o.until === undefined || source === undefined ? o.until : await storedUntil(o.pool, source.eventsTable, o.until, read.streamPrefixes);
  if (until !== undefined && until === o.from) return { position, events: 0, lastRecordedAt };
  for await (const batch of readBatches(o.store, read, o.from, o.batchSize ?? CATCH_UP_BATCH_SIZE)) {
    const stopAt = until === undefined ? -1 : batch.findIndex((e) => e.globalPosition === until);
    const upTo = stopAt >= 0 ? batch.slice(0, stopAt + 1) : batch;
    const events = read === o.projection ? upTo : eventsOf(o.projection, upTo);
    await apply(events);
    position = upTo[upTo.length - 1]!.globalPosition;
    const last = events[events.length - 1];
    if (last) lastRecordedAt = last.recordedAt;
    count += events.length;
    o.onProgress?.({ projection: o.projection.name, events: count });
    if (stopAt >= 0) return { position, events: count, lastRecordedAt };
  }
  if (until !== undefined && until !== 0n) {
    throw new BatonError(`projection ${o.projection.name}: the store ended before position ${until}, where the live checkpoint is`);
  }
  return { position, events: count, lastRecordedAt };
}

/**
 * Where a build up to checkpoint `until` stops: there, unless retention removed that event since
 * (baton_removed_positions, as every quiet store's newest events are once archived); then at the
 * last event of `prefixes` still stored before it in commit order (START when none). The events
 * removed after that belonged to archived streams, whose rows left the read model with them.
 */
async function storedUntil(pool: pg.Pool, eventsTable: string, until: bigint, prefixes: readonly string[]): Promise<bigint> {
  if (until === 0n) return until;
  const r = await pool.query<{ removed: boolean; stored: string | null }>(
    `WITH c AS (SELECT transaction_id, global_position FROM baton_removed_positions WHERE global_position = $1)
     SELECT EXISTS (SELECT 1 FROM c) AS removed,
            (SELECT e.global_position FROM ${eventsTable} e, c
              WHERE (e.transaction_id, e.global_position) < (c.transaction_id, c.global_position) AND e.stream_id LIKE ANY($2::text[])
              ORDER BY e.transaction_id DESC, e.global_position DESC LIMIT 1)::text AS stored`,
    [until.toString(), prefixPatterns(prefixes) ?? ['%']],
  );
  const { removed, stored } = r.rows[0]!;
  return removed ? BigInt(stored ?? 0) : until;
}

