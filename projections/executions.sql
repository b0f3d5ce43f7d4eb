-- The `executions` projection: one row per execution, its current state as the execution
-- machine folds it, plus `action_stats`, which the same fold keeps from each status change.
-- Unqualified names: the projector creates these in the live schema (baton_read), in a
-- rebuild's aside schema, or in verify's scratch schema, by setting search_path.
-- Every value comes from the events (occurredAt, recorded data), never from the projector's
-- clock, so a rebuild gives identical rows.
CREATE TABLE executions (
  execution_id     uuid PRIMARY KEY,
  -- Last stream revision folded in: events at or below it are duplicates and change nothing.
  revision         bigint NOT NULL,
  status           text NOT NULL,
  action           text NOT NULL,
  input            jsonb,
  owner            text NOT NULL,
  worker_id        text,
  attempt          int NOT NULL,
  -- The attempt limit as known now; and the one the submission itself named (null: it took the
  -- default, which the action's retry.maxAttempts replaces when the execution is scheduled).
  max_attempts     int NOT NULL,
  submitted_max_attempts int,
  priority         int,
  idempotency_key  text,
  parent_id        text,
  workflow_id      text,
  -- The action version the submission pinned (null: the newest a live worker offers), and the
  -- version the latest attempt was handed off to run (the pin before any handoff).
  pinned_version   int,
  action_version   int,
  result           jsonb,
  error            jsonb,
  retry_pending    boolean NOT NULL,
  retry_at         timestamptz,
  -- The dwell limit of the current state: schedule-to-start in Scheduled, start-to-close in Running.
  lease_deadline   timestamptz,
  last_progress_at timestamptz,
  last_progress    jsonb,
  -- A run is stalled once it goes this long without progress (heartbeats are not progress).
  stall_timeout_ms bigint,
  requested_at     timestamptz NOT NULL,
  scheduled_at     timestamptz,
  started_at       timestamptz,
  finished_at      timestamptz,
  updated_at       timestamptz NOT NULL,
  -- Run time of the last attempt (finished − started) and time from request to finish.
  run_ms           bigint,
  total_ms         bigint,
  -- Every owner in order: the baton's route.
  owners           text[] NOT NULL,
  cancel_reason    text,
  -- An ExecutionCancelRequested's reason: the worker holding it was asked to stop.
  cancel_requested text,
  timed_out_limit  text,
  abandon_reason   text,
  -- Stored events the machine refused (corruption or an incompatible machine change); 0 normally.
  refused_events   int NOT NULL DEFAULT 0,
  -- The submitter's tags merged with those the running action added ({} when none).
  tags             jsonb NOT NULL DEFAULT '{}',
  -- Where it lives ('default' for executions recorded before namespaces).
  namespace        text NOT NULL DEFAULT 'default'
);
-- The API lists newest first with keyset pagination on (requested_at, execution_id).
CREATE INDEX executions_requested ON executions (requested_at DESC, execution_id DESC);
CREATE INDEX executions_status ON executions (status, requested_at DESC, execution_id DESC);
CREATE INDEX executions_action ON executions (action, requested_at DESC, execution_id DESC);
CREATE INDEX executions_worker ON executions (worker_id, requested_at DESC, execution_id DESC) WHERE worker_id IS NOT NULL;
CREATE INDEX executions_workflow ON executions (workflow_id) WHERE workflow_id IS NOT NULL;
CREATE INDEX executions_namespace ON executions (namespace, requested_at DESC, execution_id DESC);
-- `tags @> '{"customer": "c-42"}'`: jsonb_path_ops indexes each key-value pair as one hash,
-- smaller and faster for containment than the default jsonb_ops (which also serves `?` key tests).
-- Tagged executions only (queries say `tags <> '{}'` too): an untagged row still cost a GIN entry
-- at every write, ~6% of all WAL in `baton bench`, where no execution has tags.
CREATE INDEX executions_tags ON executions USING gin (tags jsonb_path_ops) WHERE tags <> '{}';
-- Stalled runs: Running, with a stall limit, and no progress for longer than it.
CREATE INDEX executions_running_progress ON executions ((coalesce(last_progress_at, started_at))) WHERE status = 'Running' AND stall_timeout_ms IS NOT NULL;

-- Per action: how many were requested, how many are where now, and the run-time distribution
-- of completed executions as a sparse log-scale histogram (bucket index → count, see
-- projections/action-stats.ts), from which the API reads p50/p95 in O(buckets).
CREATE TABLE action_stats (
  action            text PRIMARY KEY,
  requested         bigint NOT NULL DEFAULT 0,
  queued            bigint NOT NULL DEFAULT 0,
  running           bigint NOT NULL DEFAULT 0,
  completed         bigint NOT NULL DEFAULT 0,
  failed            bigint NOT NULL DEFAULT 0,
  cancelled         bigint NOT NULL DEFAULT 0,
  timed_out         bigint NOT NULL DEFAULT 0,
  abandoned         bigint NOT NULL DEFAULT 0,
  retried           bigint NOT NULL DEFAULT 0,
  duration_histogram jsonb NOT NULL DEFAULT '{}'
);
