-- The `schedules` projection: one row per schedule, its state as the schedule machine folds
-- it (the context kept whole in `context`, so a row resumes the machine exactly), and the
-- columns the API and `baton schedule list` filter and show.
CREATE TABLE schedules (
  schedule_id    text PRIMARY KEY,
  -- Last schedule-stream revision folded in: replays change nothing.
  revision       bigint NOT NULL,
  -- Active | Paused | Deleted
  status         text NOT NULL,
  -- cron | every
  trigger_kind   text NOT NULL,
  cron           text,
  timezone       text,
  every_ms       bigint,
  -- action | workflow
  target_kind    text NOT NULL,
  action         text,
  overlap        text NOT NULL,
  fired          bigint NOT NULL,
  skipped        bigint NOT NULL,
  last_tick_at   timestamptz,
  last_target_id text,
  created_at     timestamptz NOT NULL,
  updated_at     timestamptz NOT NULL,
  refused_events int NOT NULL DEFAULT 0,
  context        jsonb NOT NULL
);
CREATE INDEX schedules_created ON schedules (created_at DESC, schedule_id DESC);
