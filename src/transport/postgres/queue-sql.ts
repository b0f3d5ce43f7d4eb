// The Postgres work queue's statements on baton_work_queue (migrations/0001_work_queue.sql),
// for publishing, consuming and giving up on messages; the figures behind their shape are
// beside each.
import { ASYNC_COMMIT } from '../../db/async-commit.ts';
import type { WorkMessage } from '../work-transport.ts';

/**
 * Moves the rows of a CTE named `gone` (message_id, worker_id, runtime, payload, delivery_count,
 * just deleted from the queue) into baton_dead_letters. A message that already has a dead letter
 * (published again while dead, then exhausted again) gets a fresh one: a new seq, unhandled.
 * The reason's words are deadLetterReason()'s.
 */
export const MOVE_TO_DEAD_LETTERS = `
  dead AS (
    INSERT INTO baton_dead_letters (message_id, worker_id, runtime, payload, deliveries, reason)
    SELECT message_id, worker_id, runtime, payload, delivery_count,
           'not acknowledged after ' || delivery_count || CASE WHEN delivery_count = 1 THEN ' delivery' ELSE ' deliveries' END
    FROM gone
    ON CONFLICT (message_id) DO UPDATE SET
      seq = nextval(pg_get_serial_sequence('baton_dead_letters', 'seq')),
      worker_id = EXCLUDED.worker_id, runtime = EXCLUDED.runtime, payload = EXCLUDED.payload,
      deliveries = EXCLUDED.deliveries, reason = EXCLUDED.reason, dead_lettered_at = now(),
      handled_at = NULL, handling_until = NULL, handler_failures = 0
    RETURNING 1
  )`.trim();

/*
 * Claims, acks and publishes commit without waiting for their WAL flush (ASYNC_COMMIT). A claim or
 * an ack lost to a server crash only makes its message deliverable again, and the event store
 * fences a second delivery, as it does for JetStream's fire-and-forget acks; a lost publish is
 * published again (PUBLISH_SQL). Appends still wait: the next of them flushes the WAL written
 * before it, these statements' included. Measured in `baton bench` (20,000 executions, Postgres
 * queue), for claims and acks: WAL flushes 6,222 → 3,875, and alternated with the build before,
 * 1,638 / 1,875 / 1,853 → 1,953 / 1,849 / 2,055 executions/s, pickup p50 4.15 / 4.33 / 4.32 →
 * 4.07 / 3.97 / 4.08 ms.
 */

export interface ClaimRow {
  message_id: string | null;
  payload: WorkMessage | null;
  delivery_count: number | null;
  wake_in_ms: number | null;
  dead_lettered: number | null;
}

/**
 * One round trip per claim: (1) claim up to $2 deliverable rows; and only when fewer than $2
 * were claimable (the consumer is about to go idle, so the worker's claimable range is nearly
 * empty and cheap to scan): (2) move final deliveries whose lease ran out (they reached
 * maxDeliver) to baton_dead_letters, in this same statement, and (3) return in how many ms the
 * next row becomes claimable (the earliest future nak delay or lease end; NULL: nothing
 * pending), so the consumer sleeps exactly that long, and how many rows (2) moved.
 *
 * A claim changes only unindexed columns (locked_until, delivery_count), so with the table's
 * fillfactor it is mostly a HOT update: no index writes on the hot path. Measured here (2 cores,
 * PG 15, fsync on, 20,000 no-op jobs, one consumer, acks group-committed): with an index on
 * locked_until, or with claims also moving available_at (an SQS-style visibility timeout), every
 * claim rewrote index entries and consume+ack ran 7,300 msgs/s at concurrency 50 and 2,350 at
 * 10; with HOT claims, 15,400-18,800 and 5,900-6,100. The price: rows in flight stay at the
 * front of the claim index and each claim filters them out (at most `concurrency` per consumer).
 *
 * The subqueries in (3) read the snapshot from before (1), so the leases taken by (1) are added
 * separately: a stuck handler's message must be redelivered (or dead-lettered) when its lease
 * ends, not at the next safety poll.
 *
 * A claim commits without waiting for its WAL flush (ASYNC_COMMIT).
 */
export const CLAIM_SQL = `
  WITH next AS MATERIALIZED (
    SELECT message_id FROM baton_work_queue
    WHERE worker_id = $1 AND exhausted_at IS NULL AND available_at <= now()
      AND (locked_until IS NULL OR locked_until <= now()) AND delivery_count < $3
    ORDER BY available_at, created_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
  ), claimed AS (
    UPDATE baton_work_queue q
    SET locked_until = now() + $4::float8 * interval '1 millisecond', delivery_count = q.delivery_count + 1
    FROM next, (SELECT ${ASYNC_COMMIT}) AS async_commit
    WHERE q.message_id = next.message_id
    RETURNING q.message_id, q.payload, q.delivery_count
  ), idle AS (
    SELECT (SELECT count(*) FROM claimed) < $2 AS yes
  ), gone AS (
    DELETE FROM baton_work_queue
    WHERE (SELECT yes FROM idle) AND worker_id = $1 AND exhausted_at IS NULL AND available_at <= now()
      AND delivery_count >= $3 AND locked_until <= now()
    RETURNING message_id, worker_id, runtime, payload, delivery_count
  ), ${MOVE_TO_DEAD_LETTERS}
  SELECT message_id, payload, delivery_count, NULL::float8 AS wake_in_ms, NULL::int AS dead_lettered FROM claimed
  UNION ALL
  SELECT NULL, NULL, NULL, EXTRACT(EPOCH FROM LEAST(
      (SELECT min(available_at) FROM baton_work_queue
        WHERE worker_id = $1 AND exhausted_at IS NULL AND available_at > now()),
      (SELECT min(locked_until) FROM baton_work_queue
        WHERE worker_id = $1 AND exhausted_at IS NULL AND available_at <= now() AND locked_until > now()),
      (SELECT now() + $4::float8 * interval '1 millisecond' FROM claimed LIMIT 1)
    ) - now())::float8 * 1000,
    (SELECT count(*) FROM dead)::int
  WHERE (SELECT yes FROM idle)`;

/**
 * A nak on a delivery's last allowed attempt moves the message to baton_dead_letters; any other
 * makes it claimable again after the delay. Either way only while that delivery is current.
 */
export const NAK_SQL = `
  WITH gone AS (
    DELETE FROM baton_work_queue
    WHERE message_id = $1 AND delivery_count = $2 AND exhausted_at IS NULL AND delivery_count >= $3
    RETURNING message_id, worker_id, runtime, payload, delivery_count
  ), ${MOVE_TO_DEAD_LETTERS}, again AS (
    UPDATE baton_work_queue SET locked_until = NULL, available_at = now() + $4::float8 * interval '1 millisecond'
    WHERE message_id = $1 AND delivery_count = $2 AND exhausted_at IS NULL AND delivery_count < $3
  )
  SELECT (SELECT count(*) FROM dead)::int AS dead_lettered`;

export const WORKING_SQL = `
  UPDATE baton_work_queue SET locked_until = now() + $3::float8 * interval '1 millisecond'
  WHERE message_id = $1 AND delivery_count = $2 AND locked_until IS NOT NULL AND exhausted_at IS NULL`;

/** Ack and term: both remove the row (a function: migrations/0003_ack_release_by_key.sql says why), without waiting for the flush (ASYNC_COMMIT). */
export const DELETE_SQL = `SELECT baton_work_ack($1::uuid[], $2::int[]), ${ASYNC_COMMIT}`;

/** Give back rows claimed by a consumer that began stopping before it could hand them over. */
export const RELEASE_SQL = 'SELECT baton_work_release($1::uuid[], $2::int[])';

/**
 * The payloads come as one JSON array ($4), not as jsonb[]: an array literal of JSON texts escapes
 * every quote, 164 MB of the 4.6 GB the hosts' process allocated in a 20,000-execution `baton bench`.
 *
 * The statement also wakes the consumers of other processes ($5 channel, $6 payload) and commits
 * without waiting for its WAL flush (ASYNC_COMMIT): a work message is a doorbell, not a record.
 * The handoff it rings for was appended, flushed, before it; a message lost to a server crash
 * is published again by the executor's monitor (republishAfterMs), as one JetStream lost is; and
 * the worker's ExecutionStarted, appended before the action runs, flushes the WAL written before
 * it, this INSERT's included. With the flush and a NOTIFY of its own after it, a publish waited
 * for two WAL flushes in a row on the light-load path from submit to action start. NOTIFY inside
 * a commit serializes committers on a cluster-wide lock held through their flush
 * (src/eventstore/pg-wakeups.ts), which an asynchronous commit does not wait for.
 */
export const PUBLISH_SQL = `
  WITH queued AS (
    INSERT INTO baton_work_queue (message_id, worker_id, runtime, payload)
    SELECT * FROM ROWS FROM (unnest($1::uuid[]), unnest($2::text[]), unnest($3::text[]), jsonb_array_elements($4::jsonb))
    ON CONFLICT (message_id) DO NOTHING
  )
  SELECT pg_notify($5, $6), ${ASYNC_COMMIT}`;

/** Exhausted messages are not waiting for anyone, so they are not counted. */
export const DEPTH_SQL = `
  SELECT count(*)::int AS n FROM baton_work_queue
  WHERE ($1::text IS NULL OR worker_id = $1) AND exhausted_at IS NULL
    AND (delivery_count < $2 OR locked_until > now())`;
