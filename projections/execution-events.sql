-- The `execution_events` projection: every execution event, as the timeline the API serves.
CREATE TABLE execution_events (
  event_id        uuid PRIMARY KEY,
  execution_id    uuid NOT NULL,
  stream_id       text NOT NULL,
  revision        bigint NOT NULL,
  global_position bigint NOT NULL,
  type            text NOT NULL,
  by              text,
  data            jsonb NOT NULL,
  metadata        jsonb NOT NULL,
  occurred_at     timestamptz,
  recorded_at     timestamptz NOT NULL,
  UNIQUE (execution_id, revision)
);
