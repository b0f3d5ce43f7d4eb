// Postgres appendMany: many streams' appends in ONE statement, hence one implicit transaction,
// one round trip and one commit, each stream checked against its own expected revision.
//
// Why one statement rather than BEGIN / lock / insert / COMMIT: each of those is a round trip,
// and round trips, not rows, are what appends cost here (Postgres takes ~60,000 events/s when
// rows are batched; see `baton bench eventstore` for appends/s with and without batching).
//
// Correct under concurrency, and why:
// - Compare-and-swap under row locks. `locked` takes FOR UPDATE locks on the batch's existing
//   stream rows, in stream_id order, and the UPDATE only moves a stream whose locked (latest
//   committed) revision is the one expected. READ COMMITTED's FOR UPDATE waits for a concurrent
//   writer and then returns the row it committed, so two appenders at one revision cannot both
//   win. New streams are created with INSERT … ON CONFLICT DO NOTHING: of two creators, the
//   second waits for the first and then inserts nothing (refused, reported, never an error).
// - No deadlock between two batches: before any row lock, a batch takes a transaction advisory
//   lock per stream, in key order (a statement of its own, before the one that appends), so two
//   batches sharing streams queue behind one another instead of each holding some of the other's
//   rows. A single-stream append (postgres.ts) holds at most one row lock, so it closes no cycle.
// - Fewer order refusals: advisory locks take no transaction id, so ours is assigned at the first
//   row lock, after every batch we waited for has committed; and the appending statement takes its
//   snapshot after the locks, so it sees what those batches wrote. Measured with 8 clients each
//   appending to 12 of the same 30 streams per batch: 264 requests of 2,100 batches had to be
//   retried one by one without these locks; with them, taken inside the appending statement (whose
//   snapshot then missed the streams the batch waited for had created), 36–57 of 8,640 requests in
//   720 batches; taken first, none (migrations/0005_append_many_by_row.sql).
// - Nothing in the statement errors on a conflict, so one stream's conflict never aborts the
//   others: a request whose event ids are already stored (`dup`) is left out and explained after
//   (an idempotent retry, or DuplicateEventIdError); the caller puts requests that share a stream
//   or an event id in separate rounds (splitRounds). What can still raise (a concurrent writer
//   storing the same event id in between, a lost connection) fails the statement, which wrote
//   nothing; postgres.ts then appends those requests one by one to give each its own outcome.
// - Order (see postgres.ts): a stream whose last writer's transaction id is newer than ours is
//   refused here and retried one by one in a new transaction, so per-stream order still agrees
//   with the readAll order.
import type pg from 'pg';
import type { Logger } from 'pino';
import { DuplicateEventIdError, WrongExpectedRevisionError } from '../errors.ts';
import { mapLimit } from '../async/map-limit.ts';
import { arrayLiteral } from '../db/pg-array.ts';
import { validateAppend } from './append-validation.ts';
import type { AppendOutcome, AppendRequest, AppendResult, ExpectedRevision } from './event-store.ts';

/** What the statement did with one request (in the order of the round's requests). */
export type RoundRow =
  | { written: true; lastRevision: bigint; lastPosition: bigint }
  | {
      written: false;
      /** The stream's revision when locked, or 'no_stream' if it did not exist then. */
      current: bigint | 'no_stream';
      /** Some of its event ids were already stored. */
      hasDuplicateIds: boolean;
    };

const modeOf = (e: ExpectedRevision) => (typeof e === 'bigint' ? 'exact' : e);

// The statement itself is the function baton_append_many (migrations/0003_append_many_function.sql,
// as replaced by 0005_append_many_by_row.sql), planned once per connection with lookups by key and
// the compare-and-swap by the locked rows' ids; its advisory locks' class (the first of the
// two-int4 keys, a key space apart from the one-bigint locks used elsewhere) is
// hashtext('baton_streams') = -1543916604.
// `xid`: the statement's transaction (null if it wrote nothing), read once the function has run
// (its rows are materialised first), so a follower of the appender can pass over its rows (pg-own-commits.ts).
const APPEND_MANY =
  'SELECT ord, last_revision, last_position, current_revision, has_dup, pg_current_xact_id_if_assigned()::text AS xid FROM baton_append_many($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)';

/** What one round's statement did: each request's row, and its transaction (null if it wrote nothing). */
export interface Round {
  rows: RoundRow[];
  xid: string | null;
}

/**
 * The most text a round's events' data (or metadata) may take as one JSON parameter; a round past
 * it is appended in halves (runRound). Events may each carry an input of up to ~4 MiB: 140 of them
 * in one `baton submit --file` batch made a string longer than V8's longest (~512 MiB), which
 * JSON.stringify refuses with a RangeError. 64 MiB keeps Postgres's parse of the parameter (jsonb
 * takes about its size again) and the transaction's time in bounds; a drain's rounds of small
 * events are ~0.2 KiB an event, thousands of times below it.
 */
export const MAX_ROUND_TEXT = 64 * 1024 * 1024;

/**
 * The append statement's parameters for one round, or undefined when its events' data or metadata
 * would take more than `maxText` characters (and it holds more than one request, so halves exist).
 * Measured once, as the statement needs it anyway: no cost for the rounds that fit.
 */
export function roundValues(requests: readonly AppendRequest[], maxText = MAX_ROUND_TEXT): unknown[] | undefined {
  const evReq: number[] = [];
  const evK: number[] = [];
  const ids: string[] = [];
  const types: string[] = [];
  const data: unknown[] = [];
  const metadata: unknown[] = [];
  requests.forEach((r, i) =>
    r.events.forEach((e, k) => {
      evReq.push(i + 1);
      evK.push(k + 1);
      ids.push(e.eventId);
      types.push(e.type);
      data.push(e.data ?? null);
      metadata.push(e.metadata ?? {});
    }),
  );
  const splittable = requests.length > 1;
  const json = (values: unknown[]): string | undefined => {
    try {
      const text = JSON.stringify(values);
      return text.length > maxText && splittable ? undefined : text;
    } catch (err) {
      if (err instanceof RangeError && splittable) return undefined; // past V8's longest string
      throw err;
    }
  };
  const dataText = json(data);
  const metadataText = dataText === undefined ? undefined : json(metadata);
  if (dataText === undefined || metadataText === undefined) return undefined;
  // Array literals of our own (src/db/pg-array.ts): node-postgres's allocated 14 times their size.
  return [
    arrayLiteral(requests.map((q) => q.streamId)),
    arrayLiteral(requests.map((q) => modeOf(q.expectedRevision))),
    arrayLiteral(requests.map((q) => (typeof q.expectedRevision === 'bigint' ? q.expectedRevision : null))),
    arrayLiteral(requests.map((q) => q.events.length)),
    arrayLiteral(evReq),
    arrayLiteral(evK),
    arrayLiteral(ids),
    arrayLiteral(types),
    dataText,
    metadataText,
  ];
}

/**
 * One round: requests with distinct streams and distinct event ids (see splitRounds), already
 * validated, as `roundValues` gave them. Runs as one statement on `client` (a pool: its own
 * implicit transaction).
 */
export async function appendRound(client: pg.Pool | pg.ClientBase, values: unknown[]): Promise<Round> {
  // Named: parsed once per connection; the function keeps its plan (see the migration for why it
  // can: on a store planned while empty, the plain statement read all of baton_streams per call).
  const r = await client.query<{ ord: string; last_revision: string | null; last_position: string | null; current_revision: string | null; has_dup: boolean; xid: string | null }>({
    name: 'baton_append_many',
    text: APPEND_MANY,
    values,
  });
  return {
    rows: r.rows.map((row): RoundRow =>
      row.last_revision !== null && row.last_position !== null
        ? { written: true, lastRevision: BigInt(row.last_revision), lastPosition: BigInt(row.last_position) }
        : { written: false, current: row.current_revision === null ? 'no_stream' : BigInt(row.current_revision), hasDuplicateIds: row.has_dup },
    ),
    xid: r.rows[0]?.xid ?? null,
  };
}

/**
 * Splits requests (keeping their order) into rounds in which no stream and no event id appears
 * twice, so that a later request of one stream sees the earlier one's revision, as if appended
 * one after the other. Returns, per round, the indexes of its requests.
 */
export function splitRounds(requests: readonly AppendRequest[]): number[][] {
  const rounds: { indexes: number[]; streams: Set<string>; ids: Set<string> }[] = [];
  const lastRoundOfStream = new Map<string, number>();
  requests.forEach((req, i) => {
    // A request goes after every earlier request of its stream, in the first round free of its ids.
    let at = (lastRoundOfStream.get(req.streamId) ?? -1) + 1;
    while (at < rounds.length && req.events.some((e) => rounds[at]!.ids.has(e.eventId))) at++;
    const round = (rounds[at] ??= { indexes: [], streams: new Set(), ids: new Set() });
    round.indexes.push(i);
    round.streams.add(req.streamId);
    for (const e of req.events) round.ids.add(e.eventId);
    lastRoundOfStream.set(req.streamId, at);
  });
  return rounds.map((r) => r.indexes);
}

/** An earlier append's stored events, by event id (what findEarlierAppends reads). */
export interface StoredIdRow {
  event_id: string;
  stream_id: string;
  revision: string;
  global_position: string;
}

/**
 * Whether a refused append is a retry of one already stored: every event stored, in this stream,
 * at consecutive revisions in this order → what that append returned; some stored elsewhere →
 * DuplicateEventIdError; none stored → 'none'.
 */
export function earlierAppend(streamId: string, eventIds: readonly string[], stored: ReadonlyMap<string, StoredIdRow>): AppendResult | DuplicateEventIdError | 'none' {
  const rows = eventIds.map((id) => stored.get(id));
  const found = rows.filter((r) => r !== undefined);
  if (found.length === 0) return 'none';
  const firstRevision = rows[0] ? BigInt(rows[0].revision) : -1n;
  const sameAppend = rows.every((row, i) => row && row.stream_id === streamId && BigInt(row.revision) === firstRevision + BigInt(i));
  if (!sameAppend) return new DuplicateEventIdError(streamId, found.map((r) => r.event_id));
  const last = rows[rows.length - 1]!;
  return { nextExpectedRevision: BigInt(last.revision), lastPosition: BigInt(last.global_position), idempotentReplay: true };
}

export async function readStoredIds(pool: pg.Pool, ids: readonly string[]): Promise<Map<string, StoredIdRow>> {
  // Unnamed, as the append statement above: a generic plan made on a small table scans all events.
  const r = await pool.query<StoredIdRow>({
    text: 'SELECT event_id, stream_id, revision, global_position FROM baton_events WHERE event_id = ANY($1::uuid[])',
    values: [ids],
  });
  return new Map(r.rows.map((row) => [row.event_id, row]));
}

export interface AppendManyDeps {
  pool: pg.Pool;
  /** The single-stream append (its own statement, retries and explanations). */
  appendOne(request: AppendRequest): Promise<AppendResult>;
  /** Called once after a round stored something (one NOTIFY per transaction), with its transaction id. */
  appended(xid: string | null): void;
  log?: Logger;
}

// What a batch statement can meet in normal operation: another writer storing the same event id
// at the same moment (unique_violation), or a deadlock with a writer outside these rules.
const EXPECTED_FAILURES = new Set(['23505', '40P01']);

const outcomeOf = (p: Promise<AppendResult>): Promise<AppendOutcome> =>
  p.then(
    (result): AppendOutcome => ({ ok: true, result }),
    (error: unknown): AppendOutcome => ({ ok: false, error: error instanceof Error ? error : new Error(String(error)) }),
  );

/** appendMany for Postgres: validated requests in rounds (splitRounds), one statement each. */
export async function appendManyPostgres(deps: AppendManyDeps, requests: readonly AppendRequest[]): Promise<AppendOutcome[]> {
  const outcomes: AppendOutcome[] = new Array(requests.length);
  const valid: number[] = [];
  requests.forEach((r, i) => {
    try {
      validateAppend(r.streamId, r.events, r.expectedRevision);
      valid.push(i);
    } catch (error) {
      outcomes[i] = { ok: false, error: error as Error };
    }
  });
  // A lone append takes the single-stream statement: the same one round trip, a simpler plan.
  if (valid.length === 1) outcomes[valid[0]!] = await outcomeOf(deps.appendOne(requests[valid[0]!]!));
  else {
    for (const round of splitRounds(valid.map((i) => requests[i]!))) {
      const indexes = round.map((j) => valid[j]!);
      await runRound(deps, indexes.map((i) => requests[i]!), (k, o) => (outcomes[indexes[k]!] = o));
    }
  }
  return outcomes;
}

/**
 * Appends one at a time that stand in for a round (its statement failed, or some of its requests
 * must be retried alone), a few at once: all at once, a failed round of hundreds waited for more
 * connections than the pool has and timed out connecting.
 */
const ONE_BY_ONE_IN_PARALLEL = 8;

async function runRound(deps: AppendManyDeps, requests: readonly AppendRequest[], settle: (k: number, o: AppendOutcome) => void): Promise<void> {
  let values: unknown[] | Error | undefined;
  try {
    values = roundValues(requests);
  } catch (err) {
    values = err instanceof Error ? err : new Error(String(err)); // a lone request past the longest string: failed below
  }
  if (values === undefined) {
    // Too much text for one statement: each half is a round of its own (distinct streams still).
    const half = Math.ceil(requests.length / 2);
    await runRound(deps, requests.slice(0, half), settle);
    await runRound(deps, requests.slice(half), (k, o) => settle(half + k, o));
    return;
  }
  let rows: RoundRow[];
  let xid: string | null;
  try {
    if (values instanceof Error) throw values;
    ({ rows, xid } = await appendRound(deps.pool, values));
  } catch (err) {
    const code = (err as { code?: string }).code;
    deps.log?.[code && EXPECTED_FAILURES.has(code) ? 'debug' : 'warn']({ err, requests: requests.length }, 'appendMany: the batch statement failed; appending its requests one by one');
    // The statement wrote nothing (a race on an event id, a deadlock, a lost connection):
    // append one by one, so each request gets the outcome it would have had on its own.
    const each = await mapLimit(requests, ONE_BY_ONE_IN_PARALLEL, (r) => outcomeOf(deps.appendOne(r)));
    each.forEach((o, k) => settle(k, o));
    return;
  }
  if (rows.some((r) => r.written)) deps.appended(xid);
  const explain: number[] = [];
  const again: number[] = [];
  rows.forEach((row, k) => {
    const req = requests[k]!;
    if (row.written) settle(k, { ok: true, result: { nextExpectedRevision: row.lastRevision, lastPosition: row.lastPosition, idempotentReplay: false } });
    else if (row.hasDuplicateIds || (req.expectedRevision !== 'any' && row.current !== req.expectedRevision)) explain.push(k);
    // At the expected revision yet refused: the stream's last writer is a newer transaction, or
    // the stream was created concurrently. The single append retries and explains.
    else again.push(k);
  });
  if (explain.length > 0) {
    const stored = await readStoredIds(deps.pool, explain.flatMap((k) => requests[k]!.events.map((e) => e.eventId)));
    for (const k of explain) {
      const req = requests[k]!;
      const row = rows[k] as Extract<RoundRow, { written: false }>;
      const earlier = earlierAppend(req.streamId, req.events.map((e) => e.eventId), stored);
      if (earlier === 'none') {
        if (row.hasDuplicateIds) again.push(k); // stored ids gone from view: cannot happen, but never guess
        else settle(k, { ok: false, error: new WrongExpectedRevisionError(req.streamId, req.expectedRevision, row.current) });
      } else if (earlier instanceof DuplicateEventIdError) settle(k, { ok: false, error: earlier });
      else settle(k, { ok: true, result: earlier });
    }
  }
  const retried = await mapLimit(again, ONE_BY_ONE_IN_PARALLEL, (k) => outcomeOf(deps.appendOne(requests[k]!)));
  retried.forEach((o, j) => settle(again[j]!, o));
}
