-- The embedded WorkTransport (src/transport/postgres.ts): one row per unit of work addressed to
-- one worker, claimed with FOR UPDATE SKIP LOCKED, deleted on ack. The row is the lease: a
-- claim stamps locked_until (the ack-wait deadline) and counts the delivery.
CREATE TABLE IF NOT EXISTS baton_work_queue (
  -- The publisher's dedupe id (the eventId of the handoff it announces): publishing it again
  -- while the row exists does nothing.
  message_id     uuid PRIMARY KEY,
  worker_id      text NOT NULL,
  runtime        text NOT NULL,
  payload        jsonb NOT NULL,
  -- Deliveries so far; doubles as the fencing token of the current delivery, so a handler whose
  -- lease expired and was re-claimed cannot ack, nak or extend the new delivery.
  delivery_count int NOT NULL DEFAULT 0,
  -- Not claimable before this (a nak with a delay moves it forward).
  available_at   timestamptz NOT NULL DEFAULT now(),
  -- The current delivery's lease (ack-wait) ends here; NULL or past = free to claim. Not
  -- indexed, like delivery_count, so claims and working() are HOT updates.
  locked_until   timestamptz,
  -- Set when the message reached max-deliver without an ack: never delivered again, kept for
  -- the dead-letter step.
  exhausted_at   timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 70); -- room on each page for HOT updates (claim, working)

-- Claiming: the worker's deliverable rows in (available_at, created_at) order. Also serves the
-- earliest future available_at an idle consumer sleeps until. The only secondary index: every
-- index on a column a claim writes would turn each claim into an index write.
CREATE INDEX IF NOT EXISTS baton_work_queue_claim ON baton_work_queue (worker_id, available_at, created_at)
  WHERE exhausted_at IS NULL;
