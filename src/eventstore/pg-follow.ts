// Reading and following all streams of the Postgres event store (readAll, subscribe), in the two
// orders of the port (see SubscriptionOrder in event-store.ts and the header of postgres.ts).
//
// `global`: rows are delivered in (transaction_id, global_position) order and only below the
// snapshot horizon (pg_snapshot_xmin): older transactions have all ended, so nothing can still
// appear behind the cursor. A transaction open anywhere on the server holds this back.
//
// `stream`: rows are delivered as soon as our snapshot sees them, in (transaction_id,
// global_position) order, with no horizon. State: a cursor A (every row at or before it is
// delivered, except rows of `pending` transactions) and `pending`, the transactions our last
// snapshot listed as in progress (pg_snapshot_xip) below A: they may still commit rows behind A,
// and each read also fetches their rows. Each read is one statement, so the rows, the new A and
// the new pending list come from one snapshot; a transaction that has ended since is no longer in
// progress, so its rows are in that read and it leaves the list. Why each stream stays in order:
// an append to a stream waits for (and then checks, through baton_streams.last_xid) the previous
// writer of that stream, so a stream's later event has the larger transaction id and is only
// visible once the earlier one is; both come in the same read or the earlier one before.
//
// Plans. These statements run on every wake-up, so they must cost the same at any history size.
// A prepared statement's plan is cached generically after five runs, and a plan made while the
// table was small was a sequential scan: heldBack's EXISTS took 8–50 ms at 100,000 rows here
// (12.5 ms at 50,000 in a bench), growing with history; a join back to the table for the full
// rows became a hash join over a sequential scan too. So: every statement here has a shape whose
// only sensible plan walks the (transaction_id, global_position) index from a cursor (ORDER BY
// that index LIMIT n, full rows read in that walk, no join back), the held-back check reads only the
// newest row, and readAll reads through the same scan as a `global` subscription. With plans cached at
// 16 rows, at 100,000 rows: the held-back check 0.04 ms, each scan 0.06–0.3 ms
// (test/integration/follow-plans.test.ts counts their reads). The `stream` scan is a function
// planned once per connection: as a named statement it was re-planned on most calls, at twice the
// cost of running it, on every wake-up of every host (see its migration).
import pg from 'pg';
import { sleep } from '../async/sleep.ts';
import { BatonError } from '../errors.ts';
import type { ReadAllOptions, StoredEvent, SubscribeOptions } from './event-store.ts';
import type { PgWakeups, Waiter } from './pg-wakeups.ts';
import type { OwnCommits } from './pg-own-commits.ts';

export interface EventRow {
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

/** A `stream`-order subscription's state (kept in SubscriptionResume.state). */
interface StreamState extends Cursor {
  pending: string[];
}

const EVENT_COLUMNS = 'global_position, event_id, stream_id, revision, type, data, metadata, recorded_at, transaction_id';
/** Rows readAll's first scan reads at least, and its longest scan (see readAll). */
const READ_ALL_SCAN = 500;
const READ_ALL_MAX_SCAN = 20_000;

export const toStored = (r: Omit<EventRow, 'stream_id' | 'transaction_id'> & { stream_id?: string }, streamId = r.stream_id!): StoredEvent => ({
  eventId: r.event_id,
  streamId,
  revision: BigInt(r.revision),
  globalPosition: BigInt(r.global_position),
  type: r.type,
  data: r.data,
  metadata: r.metadata,
  recordedAt: r.recorded_at,
});

/** Not parsed yet (LazyStoredEvent). */
const UNREAD: unknown = Symbol('unread');
const JSONB_OID = 3802;
const TIMESTAMPTZ_OID = 1184;
/** A timestamptz's text as pg would parse it (the scans read recorded_at as text; ./pg-append-hints.ts a NOTIFY's). */
export const parseTime = pg.types.getTypeParser(TIMESTAMPTZ_OID, 'text') as (text: string) => Date;
/** The scans' types: jsonb and timestamptz columns come as their text, for LazyStoredEvent. */
const TEXT_OF_JSON_AND_TIME: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === JSONB_OID || oid === TIMESTAMPTZ_OID ? (text: string) => text : pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
};

/** An EventRow as the scans read it: JSON and time as their text (TEXT_OF_JSON_AND_TIME). */
type TextRow = Omit<EventRow, 'data' | 'metadata' | 'recorded_at'> & { data: string; metadata: string; recorded_at: string };

/**
 * A stored event from a subscription's scan whose data, metadata and time are parsed from their
 * text when first read. The hosts' follower reads back events its own process appended, which their
 * cache already holds (actor-runtime.ts, observe), and passes them over unread: the protocol parse
 * fell from 1.84 to 1.2–1.5 s of the hosts' ~10.7 s busy in a 20,000-execution `baton bench`. The
 * projector reads every event's data but few events' times (parsing them all was 3% of it).
 * A class: an object literal with getters is built through V8's slow path, ~1.9 µs an event here
 * (as much as parsing it), a class instance ~0.26 µs. Its getters live on the prototype, so read
 * it by property (every consumer does): a spread would not copy them; JSON.stringify (logs) goes
 * through toJSON. readAll returns plain parsed objects instead (parsedStored): its callers may.
 */
class LazyStoredEvent implements StoredEvent {
  readonly eventId: string;
  readonly streamId: string;
  readonly revision: bigint;
  readonly globalPosition: bigint;
  readonly type: string;
  #row: TextRow;
  #data: unknown = UNREAD;
  #metadata: unknown = UNREAD;
  #recordedAt: unknown = UNREAD;

  constructor(row: TextRow) {
    this.#row = row;
    this.eventId = row.event_id;
    this.streamId = row.stream_id;
    this.revision = BigInt(row.revision);
    this.globalPosition = BigInt(row.global_position);
    this.type = row.type;
  }

  get data(): unknown {
    return this.#data === UNREAD ? (this.#data = JSON.parse(this.#row.data)) : this.#data;
  }

  get metadata(): Record<string, unknown> {
    return (this.#metadata === UNREAD ? (this.#metadata = JSON.parse(this.#row.metadata)) : this.#metadata) as Record<string, unknown>;
  }

  get recordedAt(): Date {
    return (this.#recordedAt === UNREAD ? (this.#recordedAt = parseTime(this.#row.recorded_at)) : this.#recordedAt) as Date;
  }

  toJSON(): StoredEvent {
    const { eventId, streamId, revision, globalPosition, type, data, metadata, recordedAt } = this;
    return { eventId, streamId, revision, globalPosition, type, data, metadata, recordedAt };
  }
}

/** A scanned row as a plain StoredEvent, parsed now (readAll's callers may copy or spread events): the lazy event's own parse, taken whole. */
const parsedStored = (row: TextRow): StoredEvent => new LazyStoredEvent(row).toJSON();

/** `LIKE` patterns for stream prefixes, with LIKE's wildcards escaped. */
export const prefixPatterns = (prefixes?: readonly string[]) =>
  prefixes && prefixes.length > 0 ? prefixes.map((p) => p.replace(/[\\%_]/g, (c) => `\\${c}`) + '%') : null;

/** The largest xid8: a cursor no transaction is past. */
const MAX_XID8 = '18446744073709551615';

const xidLess = (a: string, b: string) => BigInt(a) < BigInt(b);

export function createPgFollow(pool: pg.Pool, wakeups: Waiter & Pick<PgWakeups, 'ensureListening' | 'alarm'>, idlePollMs: number, ownCommits: OwnCommits) {
  async function cursorAfter(position: bigint): Promise<Cursor> {
    if (position === 0n) return { xid: '0', position: 0n };
    // An event retention removed keeps its place (baton_removed_positions, pg-delete-stream.ts):
    // a reader that checkpointed it resumes exactly where it was.
    const r = await pool.query<{ transaction_id: string }>({
      name: 'baton_cursor_after',
      text: `SELECT transaction_id FROM baton_events WHERE global_position = $1
             UNION ALL SELECT transaction_id FROM baton_removed_positions WHERE global_position = $1 LIMIT 1`,
      values: [position.toString()],
    });
    if (r.rowCount === 0) throw new BatonError(`readAll: no event at global position ${position}; resume only from a position this store delivered`);
    return { xid: r.rows[0]!.transaction_id, position };
  }

  /** EventStore.oldestCommittedAfter: readAll's scan without its horizon (what is committed and visible now). */
  async function oldestCommittedAfter(after: bigint, prefixes?: readonly string[]): Promise<Date | undefined> {
    const cursor = await cursorAfter(after);
    const r = await pool.query<{ recorded_at: Date }>({
      name: 'baton_oldest_committed_after',
      text: `SELECT recorded_at FROM baton_events
              WHERE (transaction_id, global_position) > ($1::xid8, $2::bigint) AND stream_id LIKE ANY($3::text[])
              ORDER BY transaction_id, global_position LIMIT 1`,
      values: [cursor.xid, cursor.position.toString(), prefixPatterns(prefixes) ?? ['%']],
    });
    return r.rows[0]?.recorded_at;
  }

  /**
   * A `global` subscription's read: scan the next `limit` deliverable events of every stream and
   * return those matching the prefixes (all when none are given), where the scan ended, and
   * whether committed events lie after that end, held back by the horizon (an older transaction
   * is open) or committed since (see `held` below). The cursor moves past events that did not
   * match, so a narrow subscription never rescans what it already passed over. One statement: the
   * held-back check was a second round trip after every short scan, about as many statements as
   * the scans themselves (1,663 of 9,766 in a 3,000-execution `baton bench`).
   */
  async function scanFrom(cursor: Cursor, limit: number, prefixes: string[] | null): Promise<{ rows: TextRow[]; end: Cursor; scanned: number; held: boolean }> {
    const r = await pool.query<TextRow & { scan_end: boolean; scanned: string | null; held: boolean | null }>({
      name: 'baton_scan_all',
      text: `WITH scanned AS (
               SELECT ${EVENT_COLUMNS} FROM baton_events
               WHERE transaction_id < pg_snapshot_xmin(pg_current_snapshot())
                 AND (transaction_id, global_position) > ($1::xid8, $2::bigint)
               ORDER BY transaction_id, global_position
               LIMIT $3)
             SELECT ${EVENT_COLUMNS}, false AS scan_end, NULL::bigint AS scanned, NULL::boolean AS held
               FROM scanned WHERE stream_id LIKE ANY($4::text[])
             UNION ALL
             SELECT e.global_position, NULL, NULL, NULL, NULL, NULL, NULL, NULL, e.transaction_id, true, (SELECT count(*) FROM scanned),
                    (SELECT (n.transaction_id, n.global_position) > (e.transaction_id, e.global_position)
                       FROM baton_events n ORDER BY n.transaction_id DESC, n.global_position DESC LIMIT 1)
               FROM (SELECT COALESCE(last.transaction_id, $1::xid8) AS transaction_id, COALESCE(last.global_position, $2::bigint) AS global_position
                       FROM (SELECT NULL) one LEFT JOIN LATERAL (
                         SELECT transaction_id, global_position FROM scanned ORDER BY transaction_id DESC, global_position DESC LIMIT 1) last ON true) e
             ORDER BY scan_end, transaction_id, global_position`,
      values: [cursor.xid, cursor.position.toString(), limit, prefixes ?? ['%']],
      // As text: readAll parses each row (parsedStored), the subscription when read (LazyStoredEvent).
      types: TEXT_OF_JSON_AND_TIME,
    });
    const marker = r.rows[r.rows.length - 1]!;
    return {
      rows: r.rows.slice(0, -1),
      end: { xid: marker.transaction_id, position: BigInt(marker.global_position) },
      scanned: Number(marker.scanned),
      held: marker.held ?? false,
    };
  }

  /**
   * A `stream` subscription's read (see the header): the next `limit` visible rows after the
   * cursor, the rows of the pending transactions, both filtered by prefix and without the rows of
   * `own` transactions (pg-own-commits.ts), and one last row with where the scan ended, how many it
   * scanned, and the transactions still in progress.
   */
  async function streamScan(state: StreamState, limit: number, prefixes: string[] | null, own: readonly string[] = [], client: pg.Pool | pg.ClientBase = pool) {
    const r = await client.query<TextRow & { scan_end: boolean; scanned: string | null; in_progress: string[] | null }>({
      name: 'baton_scan_committed',
      // A function (migrations/0004_stream_scan_function.sql, 0007_…): planned once per connection.
      text: 'SELECT * FROM baton_scan_committed($1, $2, $3, $4, $5, $6)',
      values: [state.xid, state.position.toString(), limit, prefixes, state.pending, own],
      types: TEXT_OF_JSON_AND_TIME,
    });
    const marker = r.rows[r.rows.length - 1]!;
    const end: Cursor = marker.transaction_id ? { xid: marker.transaction_id, position: BigInt(marker.global_position) } : state;
    return {
      rows: r.rows.slice(0, -1),
      next: { xid: end.xid, position: end.position, pending: (marker.in_progress ?? []).filter((x) => xidLess(x, end.xid)) } satisfies StreamState,
      scanned: Number(marker.scanned),
    };
  }

  /**
   * Through the `global` subscription's scan, until `limit` rows match or a scan finds the end.
   * Planned per call with its own filter, ORDER BY and LIMIT, a read whose table statistics lagged
   * its growth (as after a bulk append) was a bitmap scan of every row after the cursor and a sort:
   * 33 ms per batch of 500 at 120,000 events, so a catch-up from 0 grew with the square of history
   * (3.9 s against 0.73 s for those 120,000). Each scan reads at least READ_ALL_SCAN rows and twice
   * as many as the last while few match, up to READ_ALL_MAX_SCAN: a narrow read (one event of a rare
   * prefix) passes 100,000 others in ~8 statements, not one per event.
   */
  async function readAll(o: ReadAllOptions): Promise<StoredEvent[]> {
    if (!Number.isInteger(o.limit) || o.limit < 1) throw new BatonError('readAll: limit must be a positive integer');
    const prefixes = prefixPatterns(o.streamPrefixes);
    let cursor = await cursorAfter(o.after);
    const rows: TextRow[] = [];
    for (let size = Math.max(o.limit, READ_ALL_SCAN); ; size = Math.min(size * 2, Math.max(o.limit, READ_ALL_MAX_SCAN))) {
      const scan = await scanFrom(cursor, size, prefixes);
      for (const row of scan.rows) rows.push(row); // not push(...rows): a large limit would overflow the stack
      if (rows.length >= o.limit || scan.scanned < size) return rows.slice(0, o.limit).map(parsedStored);
      cursor = scan.end;
    }
  }

  async function* subscribeGlobal(o: SubscribeOptions): AsyncGenerator<StoredEvent> {
    const batchSize = o.batchSize ?? 500;
    const prefixes = prefixPatterns(o.streamPrefixes);
    let cursor = await cursorAfter(o.after);
    await wakeups.ensureListening();
    let backoffMs = 1;
    // When the last short scan (one that found the end) began: a catch-up, scan after full scan, is not paced.
    let lastShortScanAt = -Infinity;
    // Whether the last scan found the end with nothing held back: the next one follows a wake-up from idle.
    let idle = false;
    while (!o.signal?.aborted) {
      const rest = Math.max(lastShortScanAt + (o.minReadIntervalMs ?? 0) - performance.now(), idle ? (o.settleMs ?? 0) : 0);
      if (rest > 0) await sleep(rest, o.signal);
      if (o.signal?.aborted) return;
      const scanAt = performance.now();
      const seq = wakeups.seq; // read before querying, so a wake-up during the query is not lost
      const { rows, end, scanned, held } = await scanFrom(cursor, batchSize, prefixes);
      for (const row of rows) {
        yield new LazyStoredEvent(row);
        if (o.signal?.aborted) return;
      }
      cursor = end;
      idle = false;
      if (scanned === batchSize) continue;
      lastShortScanAt = scanAt;
      // `held`: the newest row lies after the end, so committed events wait behind the horizon (an
      // older transaction is open) or passed it since the scan began (its wake-up possibly spent
      // already): look again soon rather than idle. Testing only "at or above the horizon" missed
      // the second case and left pickups waiting for the 1 s idle poll.
      if (held) {
        // Committed events wait behind an open transaction that may never NOTIFY: re-check soon.
        await wakeups.waitSince(seq, backoffMs, o.signal);
        backoffMs = Math.min(backoffMs * 2, 100);
      } else {
        backoffMs = 1;
        await wakeups.waitSince(seq, idlePollMs, o.signal);
        idle = true;
      }
    }
  }

  async function* subscribeStreamOrder(o: SubscribeOptions): AsyncGenerator<StoredEvent> {
    const batchSize = o.batchSize ?? 500;
    const prefixes = prefixPatterns(o.streamPrefixes);
    const resume = o.resume ?? {};
    // A fresh start from `after` (a gapless position, or START) has nothing pending behind it.
    resume.state ??= { ...(await cursorAfter(o.after)), pending: [] } satisfies StreamState;
    await wakeups.ensureListening();
    // Not rung by the appends of the subscriber's own appenders (appliedBy): it has their events.
    const alarm = wakeups.alarm(o.appliedBy);
    try {
      while (!o.signal?.aborted) {
        alarm.reset();
        const state = resume.state as StreamState;
        // Rows our appliedBy appenders committed and applied are passed over, not read back.
        const { rows, next, scanned } = await streamScan(state, batchSize, prefixes, ownCommits.of(o.appliedBy, state.xid, state.pending));
        for (const row of rows) {
          yield new LazyStoredEvent(row);
          if (o.signal?.aborted) return;
        }
        // Every row of the batch was handled (the subscriber asked for the next): move on.
        resume.state = next;
        if (scanned === batchSize) continue;
        // Pending transactions notify when they commit (ours do); the poll is the safety net.
        await alarm.wait(idlePollMs, o.signal);
      }
    } finally {
      alarm.close();
    }
  }

  return {
    readAll,
    oldestCommittedAfter,
    /** Run the `stream` scan once on `client` (warmUp in postgres.ts): from past any transaction, so it reads nothing. */
    warmScan: async (client: pg.ClientBase) => void (await streamScan({ xid: MAX_XID8, position: 0n, pending: [] }, 1, null, [], client)),
    subscribe: (o: SubscribeOptions): AsyncGenerator<StoredEvent> => (o.order === 'stream' ? subscribeStreamOrder(o) : subscribeGlobal(o)),
  };
}
