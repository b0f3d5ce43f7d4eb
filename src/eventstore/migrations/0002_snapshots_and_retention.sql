-- Snapshots of long streams (src/eventstore/snapshots.ts): the state an actor's stream folds to at
-- one revision, so a load reads only what came after. A cache: deleting every row loses nothing
-- but time. Kept in Postgres whichever adapter holds the events.
CREATE TABLE IF NOT EXISTS baton_snapshots (
  stream_id       text PRIMARY KEY,
  -- The revision of the last event folded in, and that event's id: a load checks the id, so a
  -- snapshot of some other store's stream of the same name is never used.
  revision        bigint NOT NULL,
  event_id        uuid NOT NULL,
  -- The machine version that wrote `state`; a load ignores a snapshot of any other version.
  machine_version text NOT NULL,
  state           jsonb NOT NULL,
  written_at      timestamptz NOT NULL DEFAULT now()
);

-- Retention (src/retention/): streams removed from the store after their history was written to
-- an archive. What `baton inspect` and the API answer for an id that is no longer stored.
CREATE TABLE IF NOT EXISTS baton_archived_streams (
  stream_id     text PRIMARY KEY,
  events        bigint NOT NULL,
  last_event_at timestamptz NOT NULL,
  archived_at   timestamptz NOT NULL DEFAULT now(),
  -- Where the archive file was written (a path as the archiving process saw it).
  archive       text NOT NULL,
  -- EventStoreDB only: recorded here (with the read model's rows gone) but the stream not yet
  -- deleted in EventStoreDB; the next retention run finishes it. Postgres does both at once.
  pending_delete boolean NOT NULL DEFAULT false
);
CREATE INDEX IF NOT EXISTS baton_archived_streams_pending ON baton_archived_streams (stream_id) WHERE pending_delete;

-- The (transaction_id, global_position) of every removed event, so a reader that checkpointed one
-- of them still resumes exactly where it was (readAll's cursor needs the event's transaction id).
CREATE TABLE IF NOT EXISTS baton_removed_positions (
  global_position bigint PRIMARY KEY,
  transaction_id  xid8 NOT NULL
);
