-- Worker liveness: who is up right now, what it offers and how busy it is. Liveness, not
-- history: one row per worker id, overwritten by every heartbeat, never in the event store
-- (a heartbeat every 10 s from every worker would bury the histories that matter).
-- All times are the database's clock (now()), so workers with skewed clocks still compare fairly.
CREATE TABLE baton_worker_liveness (
  worker_id    text PRIMARY KEY,
  actions      text[] NOT NULL,
  runtimes     text[] NOT NULL,
  capacity     int NOT NULL CHECK (capacity >= 1),
  in_flight    int NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
  draining     boolean NOT NULL DEFAULT false,
  heartbeat_at timestamptz NOT NULL DEFAULT now(),
  -- When the current process started beating (reset by its first heartbeat).
  started_at   timestamptz NOT NULL DEFAULT now(),
  pid          int,
  host         text
);
-- No index beyond the key: the table holds one row per worker (tens, hundreds), so scanning
-- it is cheaper than keeping a GIN index on `actions` current through every heartbeat.
