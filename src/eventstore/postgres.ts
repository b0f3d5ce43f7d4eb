// The Postgres EventStore adapter (the default).
//
// Reading all streams without skipping late commits. A bigserial position is handed out when
// a row is inserted, not when its transaction commits: transaction A can take position 10,
// transaction B position 11, B commits first, and a reader that saw 11 and checkpointed it
// would never see 10. We order and filter by the writing transaction instead:
//   - every event row records transaction_id = pg_current_xact_id();
//   - readAll only returns rows whose transaction_id < pg_snapshot_xmin(pg_current_snapshot()),
//     i.e. written by transactions older than every transaction still in progress, so nothing
//     older can still appear; rows of newer transactions wait until that holds;
//   - it delivers them in (transaction_id, global_position) order, and resumes strictly after the
//     (transaction_id, global_position) of the checkpointed event.
// Any row that becomes visible later has a transaction_id >= the horizon of every earlier read,
// so it sorts after everything already delivered. The price: a long-running writing transaction
// anywhere in the cluster holds back delivery until it ends, so keep transactions short.
//
// Per-stream order must agree with that delivery order: if T2 appends to a stream after T1
// committed to it, T2 must have the larger transaction id. A transaction that got its id early
// (by an earlier write) could break that, so every append also checks and moves the stream's
// last_xid; an append that would go backwards is retried in a new transaction.
import pg from 'pg';
import type { Logger } from 'pino';
import { DuplicateEventIdError, WrongExpectedRevisionError, BatonError } from '../errors.ts';
import type {
  AppendResult,
  EventStore,
  ExpectedRevision,
  NewEvent,
  ReadAllOptions,
  StoredEvent,
  SubscribeOptions,
} from './event-store.ts';
import { PgWakeups } from './pg-wakeups.ts';
import { appendEach, validateAppend } from './append-validation.ts';
import { createPostgresSnapshotStore } from './snapshots.ts';

export interface PostgresEventStoreOptions {
  log?: Logger;
  /** Fallback poll when no NOTIFY arrives (ms). Only a safety net: wake-ups are pushed. */
  idlePollMs?: number;
}

export interface PostgresEventStore extends EventStore {
  /** Append inside a transaction the caller controls (group commit, tests). Caller commits. */
  appendWithin(client: pg.ClientBase, streamId: string, events: NewEvent[], options: { expectedRevision: ExpectedRevision }): Promise<AppendResult>;
  /** Tell subscribers that the caller committed appends made with appendWithin. */
  notifyAppended(): void;
  /** deleteStream inside a transaction the caller controls (retention removes the read model's rows in the same one). Caller commits. */
  deleteStreamWithin(client: pg.ClientBase, streamId: string, options: { expectedRevision: bigint }): Promise<{ deleted: number }>;
}

/**
 * Thrown by appendWithin when the caller's transaction id is older than the stream's last
 * writer's (it wrote something before that writer committed). Roll back and retry in a new
 * transaction; append() does this itself.
 */
export class TransactionOrderConflict extends BatonError {
  constructor(readonly streamId: string) {
    super(`${streamId}: this transaction is older than the stream's last writer; retry the append in a new transaction`);
  }
}

const MAX_ORDER_RETRIES = 5;

interface EventRow {
  global_position: string;
  event_id: string;
  stream_id: string;
  revision: string;
  type: string;
  data: unknown;
  metadata: Record<string, unknown>;
  recorded_at: Date;
  transaction_id: string;
}

interface Cursor {
  xid: string;
  position: bigint;
}

const EVENT_COLUMNS = 'global_position, event_id, stream_id, revision, type, data, metadata, recorded_at, transaction_id';

const toStored = (r: EventRow, streamId = r.stream_id): StoredEvent => ({
  eventId: r.event_id,
  streamId,
  revision: BigInt(r.revision),
  globalPosition: BigInt(r.global_position),
  type: r.type,
  data: r.data,
  metadata: r.metadata,
  recordedAt: r.recorded_at,
});

/** `LIKE` patterns for stream prefixes, with LIKE's wildcards escaped. */
const prefixPatterns = (prefixes?: string[]) =>
  prefixes && prefixes.length > 0 ? prefixes.map((p) => p.replace(/[\\%_]/g, (c) => `\\${c}`) + '%') : null;

/** How many events the streams with these prefixes hold (for a progress bar's total). */
export async function countEvents(pool: pg.Pool, streamPrefixes: readonly string[]): Promise<number> {
  const r = await pool.query<{ n: string }>('SELECT count(*) AS n FROM baton_events WHERE stream_id LIKE ANY($1::text[])', [prefixPatterns([...streamPrefixes])]);
  return Number(r.rows[0]!.n);
}

export function createPostgresEventStore(pool: pg.Pool, options: PostgresEventStoreOptions = {}): PostgresEventStore {
  const log = options.log;
  const idlePollMs = options.idlePollMs ?? 1000;
  const wakeups = new PgWakeups(pool, log);

  /**
   * One statement per append: the stream row's compare-and-swap and the batch insert, so an
   * append outside a transaction is a single round trip (atomic on its own, no BEGIN/COMMIT).
   * The stream CTE returns the revision before the append (-1 for a new stream) only when the
   * swap succeeded; otherwise nothing is inserted and the caller finds out why.
   */
  const streamStep: Record<'no_stream' | 'any' | 'exact', string> = {
    no_stream: `INSERT INTO baton_streams (stream_id, revision, last_xid) VALUES ($1, $2::bigint - 1, pg_current_xact_id())
                ON CONFLICT (stream_id) DO NOTHING RETURNING revision - $2::bigint AS base`,
    any: `INSERT INTO baton_streams AS s (stream_id, revision, last_xid) VALUES ($1, $2::bigint - 1, pg_current_xact_id())
          ON CONFLICT (stream_id) DO UPDATE SET revision = s.revision + $2::bigint, last_xid = pg_current_xact_id()
          WHERE s.last_xid <= pg_current_xact_id()
          RETURNING revision - $2::bigint AS base`,
    exact: `UPDATE baton_streams SET revision = $7::bigint + $2::bigint, last_xid = pg_current_xact_id()
            WHERE stream_id = $1 AND revision = $7::bigint AND last_xid <= pg_current_xact_id()
            RETURNING revision - $2::bigint AS base`,
  };
  const appendStatement = (mode: keyof typeof streamStep) => `
    WITH stream AS (${streamStep[mode]}),
    ins AS (
      INSERT INTO baton_events (event_id, stream_id, revision, type, data, metadata)
      SELECT e.id, $1, stream.base + e.ord, e.type, e.data, e.metadata
      FROM stream, unnest($3::uuid[], $4::text[], $5::jsonb[], $6::jsonb[]) WITH ORDINALITY AS e(id, type, data, metadata, ord)
      ORDER BY e.ord
      RETURNING revision, global_position)
    SELECT max(revision) AS last_revision, max(global_position) AS last_position FROM ins`;

  async function runAppend(client: pg.ClientBase | pg.Pool, streamId: string, events: NewEvent[], expected: ExpectedRevision): Promise<AppendResult | 'refused'> {
    const mode = typeof expected === 'bigint' ? 'exact' : expected;
    const values: unknown[] = [
      streamId,
      events.length,
      events.map((e) => e.eventId),
      events.map((e) => e.type),
      events.map((e) => JSON.stringify(e.data ?? null)),
      events.map((e) => JSON.stringify(e.metadata ?? {})),
    ];
    if (mode === 'exact') values.push(String(expected));
    const r = await client.query<{ last_revision: string | null; last_position: string | null }>({
      name: `baton_append_${mode}`,
      text: appendStatement(mode),
      values,
    });
    const row = r.rows[0];
    if (!row?.last_revision || !row.last_position) return 'refused';
    return { nextExpectedRevision: BigInt(row.last_revision), lastPosition: BigInt(row.last_position), idempotentReplay: false };
  }

  /** Why the stream step refused: a revision mismatch, or (inside one transaction) an order conflict. */
  async function explainRefusal(client: pg.ClientBase | pg.Pool, streamId: string, expected: ExpectedRevision): Promise<Error> {
    const r = await client.query<{ revision: string }>('SELECT revision FROM baton_streams WHERE stream_id = $1', [streamId]);
    const actual = r.rows[0] ? BigInt(r.rows[0].revision) : ('no_stream' as const);
    if (expected === 'any' || actual === expected) return new TransactionOrderConflict(streamId);
    return new WrongExpectedRevisionError(streamId, expected, actual);
  }

  async function appendWithin(client: pg.ClientBase, streamId: string, events: NewEvent[], o: { expectedRevision: ExpectedRevision }): Promise<AppendResult> {
    validateAppend(streamId, events, o.expectedRevision);
    const result = await runAppend(client, streamId, events, o.expectedRevision);
    if (result === 'refused') throw await explainRefusal(client, streamId, o.expectedRevision);
    return result;
  }

  /**
   * After a failed append: if every event is already stored, in this stream, in this order, the
   * append is a retry of one that succeeded, and we return what it returned.
   */
  async function findEarlierAppend(streamId: string, events: NewEvent[]): Promise<AppendResult | 'none'> {
    const ids = events.map((e) => e.eventId);
    const r = await pool.query<{ event_id: string; stream_id: string; revision: string; global_position: string }>(
      'SELECT event_id, stream_id, revision, global_position FROM baton_events WHERE event_id = ANY($1::uuid[]) ORDER BY revision',
      [ids],
    );
    if (r.rowCount === 0) return 'none';
    const byId = new Map(r.rows.map((row) => [row.event_id, row]));
    const rows = ids.map((id) => byId.get(id));
    const firstRevision = rows[0] ? BigInt(rows[0].revision) : -1n;
    const sameAppend = rows.every((row, i) => row && row.stream_id === streamId && BigInt(row.revision) === firstRevision + BigInt(i));
    if (!sameAppend) throw new DuplicateEventIdError(streamId, r.rows.map((row) => row.event_id));
    const last = rows[rows.length - 1]!;
    return { nextExpectedRevision: BigInt(last.revision), lastPosition: BigInt(last.global_position), idempotentReplay: true };
  }

  async function append(streamId: string, events: NewEvent[], o: { expectedRevision: ExpectedRevision }): Promise<AppendResult> {
    validateAppend(streamId, events, o.expectedRevision);
    for (let attempt = 1; ; attempt++) {
      let failure: unknown;
      try {
        const result = await runAppend(pool, streamId, events, o.expectedRevision);
        if (result !== 'refused') {
          wakeups.appended();
          return result;
        }
        failure = await explainRefusal(pool, streamId, o.expectedRevision);
      } catch (err) {
        failure = err;
      }
      // A lone statement takes its transaction id at its first write, so this is rare; bounded.
      if (failure instanceof TransactionOrderConflict && attempt < MAX_ORDER_RETRIES) continue;
      const duplicateId = (failure as { constraint?: string }).constraint === 'baton_events_event_id_key';
      if (failure instanceof WrongExpectedRevisionError || duplicateId) {
        const earlier = await findEarlierAppend(streamId, events);
        if (earlier !== 'none') return earlier;
      }
      throw failure;
    }
  }

  async function readStream(streamId: string, o: { fromRevision?: bigint; limit?: number } = {}): Promise<StoredEvent[]> {
    // Only the columns a stream read needs: on a 100,000-event stream, leaving out stream_id and
    // transaction_id cut the read from ~470 ms to ~380 ms here.
    const r = await pool.query<EventRow>({
      name: 'baton_read_stream',
      text: `SELECT global_position, event_id, revision, type, data, metadata, recorded_at
             FROM baton_events WHERE stream_id = $1 AND revision >= $2 ORDER BY revision LIMIT $3`,
      values: [streamId, (o.fromRevision ?? 0n).toString(), o.limit ?? null],
    });
    return r.rows.map((row) => toStored(row, streamId));
  }

  async function cursorAfter(position: bigint): Promise<Cursor> {
    if (position === 0n) return { xid: '0', position: 0n };
    // An event retention removed keeps its place (baton_removed_positions): a reader that
    // checkpointed it resumes exactly where it was.
    const r = await pool.query<{ transaction_id: string }>(
      `SELECT transaction_id FROM baton_events WHERE global_position = $1
       UNION ALL SELECT transaction_id FROM baton_removed_positions WHERE global_position = $1 LIMIT 1`,
      [position.toString()],
    );
    if (r.rowCount === 0) throw new BatonError(`readAll: no event at global position ${position}; resume only from a position this store delivered`);
    return { xid: r.rows[0]!.transaction_id, position };
  }

  async function readFrom(cursor: Cursor, limit: number, prefixes: string[] | null): Promise<EventRow[]> {
    const r = await pool.query<EventRow>({
      name: 'baton_read_all',
      text: `SELECT ${EVENT_COLUMNS} FROM baton_events
             WHERE transaction_id < pg_snapshot_xmin(pg_current_snapshot())
               AND (transaction_id, global_position) > ($1::xid8, $2::bigint)
               AND ($4::text[] IS NULL OR stream_id LIKE ANY($4::text[]))
             ORDER BY transaction_id, global_position
             LIMIT $3`,
      values: [cursor.xid, cursor.position.toString(), limit, prefixes],
    });
    return r.rows;
  }

  /**
   * A subscription's read: scan the next `limit` deliverable events of every stream and return
   * those matching the prefixes, plus where the scan ended. The cursor moves past events that
   * did not match, so a narrow subscription never rescans what it already passed over (a
   * filter in the plain readFrom would leave the cursor behind and rescan on every wake-up).
   */
  async function scanFrom(cursor: Cursor, limit: number, prefixes: string[] | null): Promise<{ rows: EventRow[]; end: Cursor | null; scanned: number }> {
    if (!prefixes) {
      const rows = await readFrom(cursor, limit, null);
      const last = rows[rows.length - 1];
      return { rows, end: last ? { xid: last.transaction_id, position: BigInt(last.global_position) } : null, scanned: rows.length };
    }
    const r = await pool.query<EventRow & { scan_end: boolean; scanned: string }>({
      name: 'baton_scan_all',
      text: `WITH scanned AS (
               SELECT transaction_id, global_position, stream_id FROM baton_events
               WHERE transaction_id < pg_snapshot_xmin(pg_current_snapshot())
                 AND (transaction_id, global_position) > ($1::xid8, $2::bigint)
               ORDER BY transaction_id, global_position
               LIMIT $3)
             SELECT ${EVENT_COLUMNS.split(', ').map((c) => `e.${c}`).join(', ')}, false AS scan_end, NULL::bigint AS scanned
               FROM scanned s JOIN baton_events e ON e.global_position = s.global_position
               WHERE s.stream_id LIKE ANY($4::text[])
             UNION ALL
             (SELECT global_position, NULL, NULL, NULL, NULL, NULL, NULL, NULL, transaction_id, true, (SELECT count(*) FROM scanned)
                FROM scanned ORDER BY transaction_id DESC, global_position DESC LIMIT 1)
             ORDER BY transaction_id, global_position, scan_end`,
      values: [cursor.xid, cursor.position.toString(), limit, prefixes],
    });
    const marker = r.rows[r.rows.length - 1];
    if (!marker?.scan_end) return { rows: [], end: null, scanned: 0 };
    return {
      rows: r.rows.slice(0, -1),
      end: { xid: marker.transaction_id, position: BigInt(marker.global_position) },
      scanned: Number(marker.scanned),
    };
  }

  /** True when committed events exist that the horizon still holds back (an older transaction is open). */
  async function heldBack(cursor: Cursor): Promise<boolean> {
    const r = await pool.query<{ held: boolean }>({
      name: 'baton_held_back',
      text: `SELECT EXISTS (SELECT 1 FROM baton_events
               WHERE transaction_id >= pg_snapshot_xmin(pg_current_snapshot())
                 AND (transaction_id, global_position) > ($1::xid8, $2::bigint)) AS held`,
      values: [cursor.xid, cursor.position.toString()],
    });
    return r.rows[0]!.held;
  }

  async function readAll(o: ReadAllOptions): Promise<StoredEvent[]> {
    if (!Number.isInteger(o.limit) || o.limit < 1) throw new BatonError('readAll: limit must be a positive integer');
    const rows = await readFrom(await cursorAfter(o.after), o.limit, prefixPatterns(o.streamPrefixes));
    return rows.map((row) => toStored(row));
  }

  async function* subscribe(o: SubscribeOptions): AsyncGenerator<StoredEvent> {
    const batchSize = o.batchSize ?? 500;
    const prefixes = prefixPatterns(o.streamPrefixes);
    let cursor = await cursorAfter(o.after);
    await wakeups.ensureListening();
    let backoffMs = 1;
    while (!o.signal?.aborted) {
      const seq = wakeups.seq; // read before querying, so a wake-up during the query is not lost
      const { rows, end, scanned } = await scanFrom(cursor, batchSize, prefixes);
      for (const row of rows) {
        yield toStored(row);
        if (o.signal?.aborted) return;
      }
      if (end) cursor = end;
      if (scanned === batchSize) continue;
      if (await heldBack(cursor)) {
        // Committed events wait behind an open transaction that may never NOTIFY: re-check soon.
        await wakeups.waitSince(seq, backoffMs, o.signal);
        backoffMs = Math.min(backoffMs * 2, 100);
      } else {
        backoffMs = 1;
        await wakeups.waitSince(seq, idlePollMs, o.signal);
      }
    }
  }

  /**
   * Removes the stream row (the compare-and-swap every append goes through, so an append racing
   * this one waits for it and then finds no stream), its events (keeping each one's place for
   * cursorAfter) and its snapshot, in one statement. The id may be used again afterwards: a new
   * stream of that name starts at revision 0. The space is reclaimed by autovacuum.
   */
  async function deleteStreamWithin(client: pg.ClientBase | pg.Pool, streamId: string, o: { expectedRevision: bigint }): Promise<{ deleted: number }> {
    const r = await client.query<{ streams: string; deleted: string }>({
      name: 'baton_delete_stream',
      text: `WITH s AS (DELETE FROM baton_streams WHERE stream_id = $1 AND revision = $2 RETURNING stream_id),
             gone AS (DELETE FROM baton_events e USING s WHERE e.stream_id = s.stream_id RETURNING e.global_position, e.transaction_id),
             kept AS (INSERT INTO baton_removed_positions (global_position, transaction_id) SELECT global_position, transaction_id FROM gone ON CONFLICT DO NOTHING),
             snap AS (DELETE FROM baton_snapshots WHERE stream_id IN (SELECT stream_id FROM s))
             SELECT (SELECT count(*) FROM s) AS streams, (SELECT count(*) FROM gone) AS deleted`,
      values: [streamId, o.expectedRevision.toString()],
    });
    if (r.rows[0]!.streams !== '0') return { deleted: Number(r.rows[0]!.deleted) };
    const now = await client.query<{ revision: string }>('SELECT revision FROM baton_streams WHERE stream_id = $1', [streamId]);
    if (now.rowCount === 0) return { deleted: 0 };
    throw new WrongExpectedRevisionError(streamId, o.expectedRevision, BigInt(now.rows[0]!.revision));
  }

  return {
    append,
    appendMany: (requests) => appendEach(append, requests),
    deleteStream: (streamId, o) => deleteStreamWithin(pool, streamId, o),
    deleteStreamWithin,
    snapshots: createPostgresSnapshotStore(pool, { events: true }),
    appendWithin,
    notifyAppended: () => wakeups.appended(),
    readStream,
    readAll,
    subscribe,
    close: () => wakeups.close(),
  };
}
