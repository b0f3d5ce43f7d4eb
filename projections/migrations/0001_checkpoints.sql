-- Where each projection is in the event store, and which version of it built the live tables.
-- A projector applies a batch of rows and moves its checkpoint in one transaction, with a
-- compare-and-swap on `position`, so a batch counts exactly once even if a second projector or
-- a rebuild's swap moved the checkpoint meanwhile.
CREATE SCHEMA IF NOT EXISTS baton_read;

CREATE TABLE baton_projection_checkpoints (
  projection     text PRIMARY KEY,
  -- Global position of the last event applied (0 = none yet).
  position       bigint NOT NULL DEFAULT 0,
  -- Version of the projection's code and tables that the live rows were built with.
  version        int NOT NULL,
  events_applied bigint NOT NULL DEFAULT 0,
  -- recorded_at of the last event applied, for the lag metric.
  last_recorded_at timestamptz,
  updated_at     timestamptz NOT NULL DEFAULT now()
);
