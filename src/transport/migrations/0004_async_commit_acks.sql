-- The work queue's ack (0003_ack_release_by_key.sql explains the function) commits without waiting
-- for its WAL to reach disk (synchronous_commit off, for its transaction only), as the claim
-- statement does (src/transport/postgres/queue-sql.ts). Losing either to a server crash is
-- harmless by design: a lost ack or claim only makes the message deliverable again, and the
-- event store fences a second delivery (an execution already started or finished refuses it), as
-- it does for JetStream, whose acks are fire-and-forget. What must not be lost waits for its
-- flush as before: appends, and the publish that queues work. The next of those on the server
-- flushes the WAL written before it, the ack's included. Measured in `baton bench`: see
-- queue-sql.ts (CLAIM_SQL).
CREATE OR REPLACE FUNCTION baton_work_ack(p_ids uuid[], p_counts int[]) RETURNS void
LANGUAGE plpgsql
SET enable_seqscan = off
SET plan_cache_mode = force_generic_plan
AS $fn$
BEGIN
  -- Local to this transaction: it outlasts the function (SET clauses above do not) until commit.
  PERFORM set_config('synchronous_commit', 'off', true);
  DELETE FROM baton_work_queue q USING unnest(p_ids, p_counts) AS d(message_id, delivery_count)
  WHERE q.message_id = d.message_id AND q.delivery_count = d.delivery_count;
END
$fn$;
