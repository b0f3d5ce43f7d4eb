// Dead letters in the Postgres work queue (migrations/0002_dead_letters.sql): the statement that
// gives up on a message (a nak on its last delivery, or the claim that finds its last lease run
// out: ./queue-sql.ts) deletes it from the queue and inserts it into baton_dead_letters, so a
// message is always in exactly one of the two. onDeadLetter subscribers lease unhandled rows (FOR
// UPDATE SKIP LOCKED, like claims), run the handler, then stamp handled_at: at least once, as the
// port says. They are woken by a NOTIFY on `baton_dead_letters` after each move, and sweep the
// whole queue every deadLetterSweepMs for exhausted messages no consumer is left to move (their
// worker is gone). This module holds that side: the subscriptions, the sweep, and the list /
// get / retry / delete of `baton dlq` and the API.
import { NotFoundError } from '../../errors.ts';
import { repeatEvery, Running } from '../background.ts';
import { deadLetterRetryDelayMs, validateDeadLetterHandler, validateListDeadLetters, validateMessageId, type DeadLetterPart } from '../internal.ts';
import { PULL_AGAIN, repeatPulls, type PullEnd } from '../pull-loop.ts';
import type { DeadLetter, DeadLetterSubscription, ListDeadLettersOptions, WorkMessage } from '../work-transport.ts';
import type { PostgresContext } from './context.ts';
import { MOVE_TO_DEAD_LETTERS } from './queue-sql.ts';

interface DeadLetterRow {
  message_id: string;
  seq: string;
  payload: WorkMessage;
  worker_id: string;
  deliveries: number;
  reason: string;
  dead_lettered_at: Date;
  handler_failures: number;
}

const DEAD_LETTER_COLUMNS = 'message_id, seq::text AS seq, payload, worker_id, deliveries, reason, dead_lettered_at, handler_failures';

const toDeadLetter = (r: DeadLetterRow): DeadLetter => ({
  messageId: r.message_id,
  message: r.payload,
  workerId: r.worker_id,
  deliveries: r.deliveries,
  deadLetteredAt: r.dead_lettered_at.toISOString(),
  reason: r.reason,
  cursor: r.seq,
});

/** A subscriber's lease on a dead letter while its handler runs; past it, another subscriber may take it. */
const DEAD_LETTER_LEASE_MS = 30_000;
/** Dead letters one subscriber leases at a time (handled one after another). */
const DEAD_LETTER_BATCH = 16;

const DL_CLAIM_SQL = `
  WITH next AS (
    SELECT message_id FROM baton_dead_letters
    WHERE handled_at IS NULL AND (handling_until IS NULL OR handling_until <= now())
    ORDER BY seq LIMIT $1
    FOR UPDATE SKIP LOCKED
  )
  UPDATE baton_dead_letters d SET handling_until = now() + $2::float8 * interval '1 millisecond'
  FROM next WHERE d.message_id = next.message_id
  RETURNING d.message_id, d.seq::text AS seq, d.payload, d.worker_id, d.deliveries, d.reason, d.dead_lettered_at, d.handler_failures`;

/** In how many ms the next leased or backed-off dead letter falls due (NULL: none). */
const DL_NEXT_DUE_SQL = `
  SELECT EXTRACT(EPOCH FROM min(handling_until) - now())::float8 * 1000 AS due_in_ms
  FROM baton_dead_letters WHERE handled_at IS NULL AND handling_until > now()`;

/** seq fences a stale handler: a message that died again since has a new seq and stays unhandled. */
const DL_HANDLED_SQL = `
  UPDATE baton_dead_letters SET handled_at = now(), handling_until = NULL WHERE message_id = $1 AND seq = $2::bigint`;

const DL_FAILED_SQL = `
  UPDATE baton_dead_letters SET handling_until = now() + $3::float8 * interval '1 millisecond', handler_failures = handler_failures + 1
  WHERE message_id = $1 AND seq = $2::bigint AND handled_at IS NULL`;

const DL_UNLEASE_SQL = `
  UPDATE baton_dead_letters d SET handling_until = NULL
  FROM unnest($1::uuid[], $2::bigint[]) AS x(message_id, seq)
  WHERE d.message_id = x.message_id AND d.seq = x.seq AND d.handled_at IS NULL`;

const DL_LIST_SQL = `SELECT ${DEAD_LETTER_COLUMNS} FROM baton_dead_letters WHERE seq > $1::bigint ORDER BY seq LIMIT $2`;

const DL_GET_SQL = `SELECT ${DEAD_LETTER_COLUMNS} FROM baton_dead_letters WHERE message_id = $1`;

/**
 * Back into the queue with a fresh delivery count, and out of the dead letters, in one statement.
 * A message with the same id already queued (published again meanwhile) is left as it is.
 */
const DL_RETRY_SQL = `
  WITH d AS (
    DELETE FROM baton_dead_letters WHERE message_id = $1 RETURNING ${DEAD_LETTER_COLUMNS}
  ), q AS (
    INSERT INTO baton_work_queue (message_id, worker_id, runtime, payload)
    SELECT message_id, worker_id, payload->>'runtime', payload FROM d
    ON CONFLICT (message_id) DO NOTHING
  )
  SELECT * FROM d`;

const DL_DELETE_SQL = `DELETE FROM baton_dead_letters WHERE message_id = $1 RETURNING ${DEAD_LETTER_COLUMNS}`;

/**
 * Every worker's exhausted messages, for a subscriber's periodic sweep: a message whose last
 * lease ran out is otherwise moved only when a consumer of its worker next goes idle, and that
 * worker may be gone. A sequential scan of the queue (no index covers delivery_count, on purpose:
 * see CLAIM_SQL), so it runs every deadLetterSweepMs, not per claim; the queue holds only work not
 * yet acked, so it is short.
 */
const SWEEP_SQL = `
  WITH gone AS (
    DELETE FROM baton_work_queue
    WHERE exhausted_at IS NULL AND delivery_count >= $1 AND (locked_until IS NULL OR locked_until <= now())
    RETURNING message_id, worker_id, runtime, payload, delivery_count
  ), ${MOVE_TO_DEAD_LETTERS}, unclaimed AS (
    DELETE FROM baton_work_queue
    WHERE exhausted_at IS NULL AND delivery_count < $1
      AND available_at <= now() - $2::float8 * interval '1 millisecond'
      AND (locked_until IS NULL OR locked_until <= now() - $2::float8 * interval '1 millisecond')
    RETURNING message_id, worker_id, payload->>'executionId' AS execution_id, created_at
  )
  SELECT (SELECT count(*) FROM dead)::int AS dead_lettered,
         (SELECT coalesce(json_agg(unclaimed), '[]') FROM unclaimed) AS purged`;

export function createDeadLetters(ctx: PostgresContext): DeadLetterPart {
  const { pool, settings, log, wakeups, deadLetterWakeups } = ctx;
  const running = new Running();

  async function sweep(): Promise<number> {
    const r = await pool.query<{ dead_lettered: number; purged: { message_id: string; worker_id: string; execution_id: string; created_at: string }[] }>({
      name: 'baton_work_sweep',
      text: SWEEP_SQL,
      values: [settings.maxDeliver, settings.unclaimedPurgeMs],
    });
    const { dead_lettered: n, purged } = r.rows[0]!;
    if (n > 0) ctx.deadLettered(n, log);
    for (const m of purged) {
      log?.warn(
        { messageId: m.message_id, executionId: m.execution_id, workerId: m.worker_id, publishedAt: m.created_at },
        'work message purged: no consumer claimed it for longer than unclaimedPurgeMs (its worker is gone); the event store says what still has to run',
      );
    }
    if (purged.length > 0) log?.info({ purged: purged.length }, 'dead-letter sweep purged messages left by gone workers');
    return n;
  }

  async function onDeadLetter(handler: (deadLetter: DeadLetter) => Promise<void>): Promise<DeadLetterSubscription> {
    ctx.assertOpen('onDeadLetter');
    validateDeadLetterHandler(handler);
    const dlog = log?.child({ subscription: 'dead-letters' });
    await deadLetterWakeups.ensureListening();
    const stopping = new AbortController();
    // At once, then every deadLetterSweepMs: exhausted messages may have waited for a subscriber.
    // What a sweep moves wakes the loop below like any other move.
    const sweeping = repeatEvery(settings.deadLetterSweepMs, sweep, 'dead-letter sweep failed; trying again at the next one', dlog);

    async function handle(row: DeadLetterRow): Promise<void> {
      const deadLetter = toDeadLetter(row);
      const about = { messageId: row.message_id, executionId: row.payload.executionId, workerId: row.worker_id };
      try {
        await handler(deadLetter);
      } catch (err) {
        const retryInMs = deadLetterRetryDelayMs(row.handler_failures + 1);
        dlog?.warn({ err, ...about, retryInMs }, 'dead-letter handler failed; handing the dead letter over again later');
        await pool.query({ name: 'baton_dl_failed', text: DL_FAILED_SQL, values: [row.message_id, row.seq, retryInMs] }).catch((e: unknown) => {
          dlog?.warn({ err: e, ...about }, 'could not record the failure; the dead letter is handed over again when its lease runs out');
        });
        return;
      }
      try {
        await pool.query({ name: 'baton_dl_handled', text: DL_HANDLED_SQL, values: [row.message_id, row.seq] });
      } catch (err) {
        // At least once: it is handed over again when the lease runs out.
        dlog?.warn({ err, ...about }, 'could not mark the dead letter handled; it will be handed over again');
      }
    }

    async function pullOnce(signal: AbortSignal): Promise<PullEnd> {
      const seq = deadLetterWakeups.seq; // before the claim: a wake-up during it is not lost
      let rows: DeadLetterRow[];
      try {
        rows = (await pool.query<DeadLetterRow>({ name: 'baton_dl_claim', text: DL_CLAIM_SQL, values: [DEAD_LETTER_BATCH, DEAD_LETTER_LEASE_MS] })).rows;
      } catch (err) {
        return { next: 'back-off', why: 'dead-letter claim failed; retrying', err };
      }
      rows.sort((a, b) => (BigInt(a.seq) < BigInt(b.seq) ? -1 : 1));
      let i = 0;
      for (; i < rows.length && !signal.aborted; i++) await handle(rows[i]!);
      if (i < rows.length) {
        // Stopping: give back the leases we will not use, so another subscriber need not wait them out.
        const rest = rows.slice(i);
        await pool
          .query({ name: 'baton_dl_unlease', text: DL_UNLEASE_SQL, values: [rest.map((r) => r.message_id), rest.map((r) => r.seq)] })
          .catch((err: unknown) => dlog?.warn({ err }, 'could not give back dead-letter leases; they are handed over when the leases run out'));
        return PULL_AGAIN;
      }
      if (rows.length === DEAD_LETTER_BATCH) return PULL_AGAIN;
      // Nothing more to hand over now: sleep until a lease or a failed handler's back-off runs
      // out (asked after the handlers ran: a failure just set one), a wake-up, or the safety poll.
      let dueInMs: number | null = null;
      try {
        dueInMs = (await pool.query<{ due_in_ms: number | null }>({ name: 'baton_dl_next_due', text: DL_NEXT_DUE_SQL })).rows[0]!.due_in_ms;
      } catch (err) {
        dlog?.warn({ err }, 'could not read when the next dead letter falls due; polling');
      }
      const untilDue = dueInMs === null ? Infinity : Math.ceil(dueInMs) + 1;
      return { next: 'wait', wait: (s) => deadLetterWakeups.waitSince(seq, Math.max(1, Math.min(settings.deadLetterPollMs, untilDue)), s) };
    }

    const loop = repeatPulls(pullOnce, {
      signal: stopping.signal,
      log: dlog,
      backOff: (ms, signal) => deadLetterWakeups.waitSince(deadLetterWakeups.seq, ms, signal),
    });
    return running.add(async () => {
      stopping.abort();
      await sweeping.stop();
      await loop;
    });
  }

  async function listDeadLetters(o: ListDeadLettersOptions): Promise<DeadLetter[]> {
    const { limit, after } = validateListDeadLetters(o);
    const r = await pool.query<DeadLetterRow>({ name: 'baton_dl_list', text: DL_LIST_SQL, values: [after.toString(), limit] });
    return r.rows.map(toDeadLetter);
  }

  async function getDeadLetter(messageId: string): Promise<DeadLetter | undefined> {
    const id = validateMessageId('getDeadLetter', messageId);
    const r = await pool.query<DeadLetterRow>({ name: 'baton_dl_get', text: DL_GET_SQL, values: [id] });
    return r.rows[0] && toDeadLetter(r.rows[0]);
  }

  async function retryDeadLetter(messageId: string): Promise<DeadLetter> {
    ctx.assertOpen('retryDeadLetter');
    const id = validateMessageId('retryDeadLetter', messageId);
    const r = await pool.query<DeadLetterRow>({ name: 'baton_dl_retry', text: DL_RETRY_SQL, values: [id] });
    if (!r.rows[0]) throw new NotFoundError('dead letter', id);
    wakeups.appended(); // it is work again: wake its worker's consumers
    const deadLetter = toDeadLetter(r.rows[0]);
    log?.info({ messageId: id, executionId: deadLetter.message.executionId, workerId: deadLetter.workerId }, 'dead letter published again');
    return deadLetter;
  }

  async function deleteDeadLetter(messageId: string): Promise<DeadLetter> {
    const id = validateMessageId('deleteDeadLetter', messageId);
    const r = await pool.query<DeadLetterRow>({ name: 'baton_dl_delete', text: DL_DELETE_SQL, values: [id] });
    if (!r.rows[0]) throw new NotFoundError('dead letter', id);
    log?.info({ messageId: id, executionId: r.rows[0].payload.executionId }, 'dead letter deleted');
    return toDeadLetter(r.rows[0]);
  }

  return { port: { onDeadLetter, listDeadLetters, getDeadLetter, retryDeadLetter, deleteDeadLetter }, stopAll: () => running.stopAll() };
}
