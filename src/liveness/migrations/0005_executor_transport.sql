-- The work transport an executor publishes to ('nats' or 'postgres'; NULL: not said, an earlier
-- build). A worker pulling from another transport never sees that executor's work, and the
-- executor places none on it; with this, `baton status` and the API's waitingReason can say so
-- from the liveness tables, as the executor's own monitor does.
ALTER TABLE baton_executor_liveness ADD COLUMN IF NOT EXISTS transport text;
