-- The work queue's ack and release (src/transport/postgres/queue-sql.ts) as functions planned with
-- sequential scans off, so they find their messages through the primary key at any size. As plain
-- named statements, their generic plan was made while the queue held a few pages: a seq scan of the
-- whole heap, dead rows included (every message is inserted, updated by its claim and deleted by its
-- ack; only vacuum clears them). In a 60,000-execution `baton bench` acks took 13.4 s of Postgres's
-- 44.5 s, 223 µs per message against 9 at 20,000, growing with every message the queue had carried.
CREATE OR REPLACE FUNCTION baton_work_ack(p_ids uuid[], p_counts int[]) RETURNS void
LANGUAGE plpgsql
SET enable_seqscan = off
SET plan_cache_mode = force_generic_plan
AS $fn$
BEGIN
  DELETE FROM baton_work_queue q USING unnest(p_ids, p_counts) AS d(message_id, delivery_count)
  WHERE q.message_id = d.message_id AND q.delivery_count = d.delivery_count;
END
$fn$;

-- Gives back rows claimed by a consumer that began stopping before it could hand them over.
CREATE OR REPLACE FUNCTION baton_work_release(p_ids uuid[], p_counts int[]) RETURNS void
LANGUAGE plpgsql
SET enable_seqscan = off
SET plan_cache_mode = force_generic_plan
AS $fn$
BEGIN
  UPDATE baton_work_queue q SET locked_until = NULL, delivery_count = q.delivery_count - 1
  FROM unnest(p_ids, p_counts) AS d(message_id, delivery_count)
  WHERE q.message_id = d.message_id AND q.delivery_count = d.delivery_count;
END
$fn$;
