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
//
// appendMany (./pg-append-many.ts) stores many streams' appends in one statement, one transaction:
// each stream is checked against its own expected revision, a stream that conflicts is reported
// and the others commit together; one NOTIFY per transaction.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { Logger } from 'pino';
import { DuplicateEventIdError, WrongExpectedRevisionError, BatonError } from '../errors.ts';
import type {
  AppendRequest,
  AppendResult,
  EventStore,
  ExpectedRevision,
  NewEvent,
  StoredEvent,
  AppendOptions,
  AppendNotice,
} from './event-store.ts';
import { PgWakeups } from './pg-wakeups.ts';
import { createPgFollow, prefixPatterns, toStored, type EventRow } from './pg-follow.ts';
import { validateAppend } from './append-validation.ts';
import { appendHint, heardEvents, hintedPayloadSql } from './pg-append-hints.ts';
import { GroupCommitter, type GroupCommitOptions } from './group-commit.ts';
import { OwnCommits } from './pg-own-commits.ts';
import { appendManyPostgres, appendRound, earlierAppend, readStoredIds, roundValues, type AppendManyDeps } from './pg-append-many.ts';
import { deleteStreamWithin } from './pg-delete-stream.ts';
import { createPostgresSnapshotStore } from './snapshots.ts';

export interface PostgresEventStoreOptions {
  log?: Logger;
  /** Fallback poll when no NOTIFY arrives (ms). Only a safety net: wake-ups are pushed. */
  idlePollMs?: number;
  /** append() through this store's group committer (./group-commit.ts), or `false`: one statement per append. */
  groupCommit?: GroupCommitOptions | false;
}

export interface PostgresEventStore extends EventStore {
  /** Append inside a transaction the caller controls (group commit, tests). Caller commits. */
  appendWithin(client: pg.ClientBase, streamId: string, events: NewEvent[], options: { expectedRevision: ExpectedRevision }): Promise<AppendResult>;
  /** Tell subscribers that the caller committed appends made with appendWithin. */
  notifyAppended(): void;
  /**
   * Resolves once every transaction running on the server when called has ended, so that
   * readAll (`global` order) returns everything committed before the call. For a reader that
   * learnt of events some other way (a `stream` subscription, readStream) and then reads all.
   */
  settled(o?: { timeoutMs?: number }): Promise<void>;
  /**
   * The events table as a connection of `pool` names it, when `pool` is this store's own (so the
   * same database and search_path); undefined otherwise. Projections copy from it in SQL.
   */
  eventsTableFor(pool: pg.Pool): string | undefined;
  /** deleteStream inside a transaction the caller controls (retention removes the read model's rows in the same one). Caller commits. */
  deleteStreamWithin(client: pg.ClientBase, streamId: string, options: { expectedRevision: bigint }): Promise<{ deleted: number }>;
  /**
   * Open up to `connections` of the pool's connections (never more than it may hold) and run the
   * hot path's statements once on each, writing nothing: a host calls it before it starts, so its
   * first executions do not pay for them (see warmConnection).
   */
  warmUp(connections?: number): Promise<void>;
}

/**
 * Connections a host warms by default: what one uses at light load. Measured without the warm-up,
 * the peers harness's worker process (executor, orchestrator, one worker) had opened 5 (Postgres
 * queue) and 6 (JetStream) connections by the end of its 200 light-load pickups.
 */
export const WARM_CONNECTIONS = 6;

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

/** How many events the streams with these prefixes hold (for a progress bar's total). */
export async function countEvents(pool: pg.Pool, streamPrefixes: readonly string[]): Promise<number> {
  const r = await pool.query<{ n: string }>('SELECT count(*) AS n FROM baton_events WHERE stream_id LIKE ANY($1::text[])', [prefixPatterns([...streamPrefixes])]);
  return Number(r.rows[0]!.n);
}

export function createPostgresEventStore(pool: pg.Pool, options: PostgresEventStoreOptions = {}): PostgresEventStore {
  const log = options.log;
  const idlePollMs = options.idlePollMs ?? 1000;
  const wakeups = new PgWakeups(pool, log);
  const ownCommits = new OwnCommits();
  const follow = createPgFollow(pool, wakeups, idlePollMs, ownCommits);

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
  // A lone append (no other append statement of this store in flight) carries its own NOTIFY: one
  // statement and one commit instead of the append and then a NOTIFY of its own. Inside a commit a
  // NOTIFY serialises the commits of concurrent notifying transactions (pg-wakeups.ts), so appends
  // that overlap notify after their commit as before. Measured at light load (hop trace, one
  // execution at a time): see the README's Benchmarks.
  let statementsInFlight = 0;
  async function counted<T>(run: () => Promise<T>): Promise<T> {
    statementsInFlight++;
    try {
      return await run();
    } finally {
      statementsInFlight--;
    }
  }
  const appendStatement = (mode: keyof typeof streamStep, notify: boolean) => `
    WITH stream AS (${streamStep[mode]}),
    ins AS (
      INSERT INTO baton_events (event_id, stream_id, revision, type, data, metadata)
      SELECT e.id, $1, stream.base + e.ord, e.type, e.data, e.metadata
      FROM stream, unnest($3::uuid[], $4::text[], $5::jsonb[], $6::jsonb[]) WITH ORDINALITY AS e(id, type, data, metadata, ord)
      ORDER BY e.ord
      RETURNING revision, global_position)
    SELECT max(revision) AS last_revision, max(global_position) AS last_position, pg_current_xact_id_if_assigned()::text AS xid${notify ? `, ${notifySql(mode === 'exact' ? 8 : 7)}` : ''} FROM ins`;
  // The NOTIFY carries the events when they fit (./pg-append-hints.ts): parameters channel, sender, hint.
  const notifySql = (first: number) => `pg_notify($${first}, ${hintedPayloadSql(`$${first + 1}`, `$${first + 2}`)})`;

  /** `notify`: the statement also NOTIFYs the store's channel (sent at its commit). `xid`: the transaction it wrote in. */
  async function runAppend(client: pg.ClientBase | pg.Pool, streamId: string, events: NewEvent[], expected: ExpectedRevision, notify = false): Promise<{ result: AppendResult; xid: string | null } | 'refused'> {
    const mode = typeof expected === 'bigint' ? 'exact' : expected;
    const dataTexts = events.map((e) => JSON.stringify(e.data ?? null));
    const metadataTexts = events.map((e) => JSON.stringify(e.metadata ?? {}));
    const values: unknown[] = [streamId, events.length, events.map((e) => e.eventId), events.map((e) => e.type), dataTexts, metadataTexts];
    if (mode === 'exact') values.push(String(expected));
    if (notify) values.push(wakeups.channel, wakeups.payload, appendHint(streamId, events, dataTexts, metadataTexts));
    const r = await client.query<{ last_revision: string | null; last_position: string | null; xid: string | null }>({
      name: `baton_append_${mode}${notify ? '_notify' : ''}`,
      text: appendStatement(mode, notify),
      values,
    });
    const row = r.rows[0];
    if (!row?.last_revision || !row.last_position) return 'refused';
    return { result: { nextExpectedRevision: BigInt(row.last_revision), lastPosition: BigInt(row.last_position), idempotentReplay: false }, xid: row.xid };
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
    const appended = await runAppend(client, streamId, events, o.expectedRevision);
    if (appended === 'refused') throw await explainRefusal(client, streamId, o.expectedRevision);
    return appended.result;
  }

  /**
   * After a failed append: if every event is already stored, in this stream, in this order, the
   * append is a retry of one that succeeded, and we return what it returned.
   */
  async function findEarlierAppend(streamId: string, events: NewEvent[]): Promise<AppendResult | 'none'> {
    const ids = events.map((e) => e.eventId);
    const earlier = earlierAppend(streamId, ids, await readStoredIds(pool, ids));
    if (earlier instanceof DuplicateEventIdError) throw earlier;
    return earlier;
  }

  /** One append, its own statement (and transaction). */
  async function appendAlone(streamId: string, events: NewEvent[], o: AppendOptions): Promise<AppendResult> {
    validateAppend(streamId, events, o.expectedRevision);
    for (let attempt = 1; ; attempt++) {
      let failure: unknown;
      try {
        // Carries its NOTIFY when nothing else of ours is in flight and someone elsewhere waits (AppendNotice).
        const alone = statementsInFlight === 0 && o.othersWait !== false;
        const appended = await counted(() => runAppend(pool, streamId, events, o.expectedRevision, alone));
        if (appended !== 'refused') {
          // The appender's own followers pass over its rows (OwnCommits) and are not woken for them:
          // at 50 pickups/s the executor's follower read back every outcome its worker appended
          // alone, one read of the store per execution (409 against 208 in 200 pickups).
          ownCommits.add(appended.xid, o.origin);
          // Other processes heard a lone statement's own NOTIFY.
          if (alone) wakeups.wake(o.origin);
          else wakeups.appended(o.origin);
          return appended.result;
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

  const appendManyDeps = ({ origin, othersWait }: AppendNotice): AppendManyDeps => ({
    pool,
    appendOne: (r: AppendRequest) => appendAlone(r.streamId, r.events, { expectedRevision: r.expectedRevision, origin, othersWait }),
    appended: (xid) => {
      ownCommits.add(xid, origin);
      wakeups.appended(origin);
    },
    ...(log && { log }),
  });
  // A batch's statements count as in flight; a batch of one is a lone append (appendManyPostgres).
  const appendMany = (requests: readonly AppendRequest[], o: AppendNotice = {}) => {
    const deps = appendManyDeps(o);
    return requests.length > 1 ? counted(() => appendManyPostgres(deps, requests)) : appendManyPostgres(deps, requests);
  };
  /**
   * A new connection pays for each statement the first time it runs it: measured here, connecting
   * 17–19 ms, the first baton_append_many 22–24 ms (the function's plans) and 1.1–1.4 ms after,
   * the first stream scan 3.3–4.0 ms and 0.8–0.9 after, the first lone append ~10 ms: the first
   * pickups after a host started paid them (15–70 ms each, against ~3 ms warm). Each statement here
   * is one a host runs at light load, made to change nothing: an empty appendMany, a scan from past
   * every transaction, and the lone append with and without its NOTIFY to a stream that does not
   * exist (refused; the NOTIFY only wakes other processes' followers once).
   */
  async function warmConnection(client: pg.ClientBase): Promise<void> {
    await appendRound(client, roundValues([])!);
    await follow.warmScan(client);
    const nowhere = `baton-warm-up-${randomUUID()}`;
    const event: NewEvent = { eventId: randomUUID(), type: 'WarmUp', data: null, metadata: {} };
    for (const notify of [false, true]) await runAppend(client, nowhere, [event], 0n, notify);
  }

  const committer = options.groupCommit === false ? undefined : new GroupCommitter(appendMany, options.groupCommit);
  const append = async (streamId: string, events: NewEvent[], o: AppendOptions): Promise<AppendResult> => {
    // Refuse a malformed append at once, with the message every adapter gives, not from a batch.
    validateAppend(streamId, events, o.expectedRevision);
    return committer ? committer.append(streamId, events, o) : appendAlone(streamId, events, o);
  };

  return {
    append,
    appendMany,
    appendWithin,
    notifyAppended: () => wakeups.appended(),
    onAppendHeard(listener) {
      void wakeups.ensureListening();
      return wakeups.onPayload((payload) => {
        const events = heardEvents(payload);
        if (events) listener(events);
      });
    },
    async settled(o = {}) {
      const target = (await pool.query<{ x: string }>('SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS x')).rows[0]!.x;
      const deadline = Date.now() + (o.timeoutMs ?? 30_000);
      for (let waitMs = 1; ; waitMs = Math.min(waitMs * 2, 50)) {
        const r = await pool.query<{ done: boolean }>('SELECT pg_snapshot_xmin(pg_current_snapshot()) >= $1::xid8 AS done', [target]);
        if (r.rows[0]!.done) return;
        if (Date.now() > deadline) throw new BatonError(`the transactions running since ${target} did not all end within ${o.timeoutMs ?? 30_000} ms${await oldestOpenTransactions(pool)}`);
        await new Promise((resolve) => setTimeout(resolve, waitMs));
      }
    },
    eventsTableFor: (other) => (other === pool ? 'baton_events' : undefined),
    deleteStream: (streamId, o) => deleteStreamWithin(pool, streamId, o),
    deleteStreamWithin,
    snapshots: createPostgresSnapshotStore(pool, { events: true }),
    readStream,
    readAll: follow.readAll,
    oldestCommittedAfter: follow.oldestCommittedAfter,
    subscribe: follow.subscribe,
    async warmUp(connections = WARM_CONNECTIONS) {
      // Every connection it got goes back, also when another could not be had (a role's or the
      // server's connection limit): one kept would hold the pool's end, and the host's stop, for good.
      const got = await Promise.allSettled(Array.from({ length: Math.min(connections, pool.options.max ?? 10) }, () => pool.connect()));
      const clients = got.flatMap((g) => (g.status === 'fulfilled' ? [g.value] : []));
      const warmed = await Promise.allSettled(clients.map(warmConnection));
      // A connection whose warm-up failed is closed (release(true)) rather than pooled: it may be broken.
      clients.forEach((c, i) => c.release(warmed[i]!.status === 'rejected'));
      const failed = [...got, ...warmed].find((g) => g.status === 'rejected');
      if (failed) throw failed.reason;
    },
    close: () => wakeups.close(),
  };
}

/**
 * The global order of events waits for every transaction that writes on the server, in any
 * database: for a message that says which ones held it back, the oldest still open (what
 * pg_stat_activity shows this role: another role's query is hidden, its database and age are not).
 */
async function oldestOpenTransactions(pool: pg.Pool): Promise<string> {
  try {
    const r = await pool.query<{ pid: number; datname: string | null; application_name: string; seconds: number; state: string | null }>(
      `SELECT pid, datname, application_name, extract(epoch FROM now() - xact_start)::int AS seconds, state
         FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid() ORDER BY xact_start LIMIT 3`,
    );
    if (r.rows.length === 0) return '';
    const open = r.rows.map((t) => `pid ${t.pid} in database ${JSON.stringify(t.datname ?? '?')}${t.application_name ? ` (${t.application_name})` : ''}, open ${t.seconds} s${t.state ? `, ${t.state}` : ''}`);
    return `: every transaction that writes on this Postgres server, in any database, holds back the order of events until it ends; the oldest open: ${open.join('; ')}. End it (pg_terminate_backend) or wait for it, then try again`;
  } catch {
    return '';
  }
}
