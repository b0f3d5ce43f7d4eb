-- Executor liveness: which executors are up, for partition leases (src/executor/partitions/).
-- Like worker liveness: one row per executor process, overwritten by every beat, never in the
-- event store; a row older than the staleness limit is a dead executor's, whose partitions
-- another executor takes over. Times are the database's clock.
CREATE TABLE baton_executor_liveness (
  executor_id  text PRIMARY KEY,
  draining     boolean NOT NULL DEFAULT false,
  heartbeat_at timestamptz NOT NULL DEFAULT now(),
  started_at   timestamptz NOT NULL DEFAULT now(),
  pid          int,
  host         text
);
