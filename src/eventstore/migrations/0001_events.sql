-- Baton's Postgres event store. Append-only: rows are never updated or deleted.
-- Needs PostgreSQL >= 13 (xid8, pg_current_xact_id, pg_snapshot_xmin).

-- One row per stream: its current revision is the compare-and-swap target of every append,
-- and last_xid keeps per-stream order consistent with the commit order of readAll
-- (see src/eventstore/postgres.ts).
CREATE TABLE IF NOT EXISTS baton_streams (
  stream_id  text PRIMARY KEY,
  revision   bigint NOT NULL,
  last_xid   xid8 NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS baton_events (
  global_position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  event_id        uuid NOT NULL,
  stream_id       text NOT NULL,
  revision        bigint NOT NULL,
  type            text NOT NULL,
  data            jsonb NOT NULL,
  metadata        jsonb NOT NULL,
  recorded_at     timestamptz NOT NULL DEFAULT now(),
  -- The writing transaction: readAll delivers in (transaction_id, global_position) order and only
  -- once every older transaction has finished, so no late-committing event is ever skipped.
  transaction_id  xid8 NOT NULL DEFAULT pg_current_xact_id(),
  CONSTRAINT baton_events_event_id_key UNIQUE (event_id),
  CONSTRAINT baton_events_stream_revision_key UNIQUE (stream_id, revision)
);

CREATE INDEX IF NOT EXISTS baton_events_commit_order ON baton_events (transaction_id, global_position);
