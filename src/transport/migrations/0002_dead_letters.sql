-- Dead letters of the embedded WorkTransport (src/transport/postgres.ts): a message that reached
-- max-deliver without an ack leaves baton_work_queue and lands here, in the same statement that
-- gives up on it. It stays until `baton dlq retry` (back into the queue) or `baton dlq delete`.
CREATE TABLE IF NOT EXISTS baton_dead_letters (
  message_id       uuid PRIMARY KEY,
  -- List order and cursor. A message that dies again after a retry gets a new one: it is a new
  -- dead letter, and onDeadLetter subscribers must hear about it again.
  seq              bigserial NOT NULL UNIQUE,
  worker_id        text NOT NULL,
  runtime          text NOT NULL,
  payload          jsonb NOT NULL,
  deliveries       int NOT NULL,
  reason           text NOT NULL,
  dead_lettered_at timestamptz NOT NULL DEFAULT now(),
  -- onDeadLetter bookkeeping. A subscriber leases a row (handling_until) while its handler runs and
  -- stamps handled_at when the handler resolved; a lease that runs out (the subscriber died) or a
  -- handler that failed (handling_until pushed out by a back-off) hands it over again.
  handled_at       timestamptz,
  handling_until   timestamptz,
  handler_failures int NOT NULL DEFAULT 0
);

-- What subscribers claim: rows not handled yet, oldest first.
CREATE INDEX IF NOT EXISTS baton_dead_letters_unhandled ON baton_dead_letters (seq) WHERE handled_at IS NULL;

-- Messages 0001 flagged exhausted (left in the queue "for the dead-letter step") move now.
-- From here on the transport moves them itself and exhausted_at stays NULL.
WITH moved AS (
  DELETE FROM baton_work_queue WHERE exhausted_at IS NOT NULL
  RETURNING message_id, worker_id, runtime, payload, delivery_count, exhausted_at
)
INSERT INTO baton_dead_letters (message_id, worker_id, runtime, payload, deliveries, reason, dead_lettered_at)
SELECT message_id, worker_id, runtime, payload, delivery_count,
       'not acknowledged after ' || delivery_count || ' deliveries', exhausted_at
FROM moved ORDER BY exhausted_at, message_id
ON CONFLICT (message_id) DO NOTHING;
