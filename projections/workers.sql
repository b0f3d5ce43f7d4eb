-- The `workers` projection: each worker's lifecycle from its worker-<id> stream, and the
-- outcomes it appended to execution streams. Liveness (last heartbeat, in-flight) is not
-- history: the API joins it from baton_worker_liveness and the executions table at read time.
CREATE TABLE workers (
  worker_id      text PRIMARY KEY,
  -- Last worker-stream revision folded in (-1 before any): replays change nothing.
  revision       bigint NOT NULL,
  -- active | draining | stopped | lost; 'unknown' when only execution events named it so far.
  status         text NOT NULL,
  actions        text[] NOT NULL,
  runtimes       text[] NOT NULL,
  capacity       int,
  host           text,
  pid            int,
  started_at     timestamptz,
  -- Global position of the latest WorkerStarted, and the action policies it advertised: the
  -- latest worker to start offering an action says its policy (as the executor takes it).
  started_position bigint,
  policies       jsonb NOT NULL DEFAULT '{}'::jsonb,
  status_reason  text,
  status_changed_at timestamptz,
  -- Outcomes this worker appended: attempts started, completed, failed, timed out, cancelled, released.
  started        bigint NOT NULL DEFAULT 0,
  completed      bigint NOT NULL DEFAULT 0,
  failed         bigint NOT NULL DEFAULT 0,
  timed_out      bigint NOT NULL DEFAULT 0,
  cancelled      bigint NOT NULL DEFAULT 0,
  released       bigint NOT NULL DEFAULT 0
);
