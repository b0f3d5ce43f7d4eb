-- appendMany's statement (src/eventstore/pg-append-many.ts explains it) as a function, so that it
-- is planned once per connection instead of on every call. Planning took ~0.46 ms of its ~1.7 ms
-- per call in `baton bench` (pg_stat_statements, track_planning). A plan made once must stay right
-- as the tables grow from empty: the same statement prepared on an empty store took 1.2 ms per
-- call (25 appends) at first and 17 ms once it held ~90,000 streams, reading all of baton_streams
-- each time. So the function plans with sequential scans off, and every table it reads is
-- constrained by key (`= ANY(...)` of the call's stream or event ids), since a plan can read a
-- whole index too: without that, the join on the event ids alone, planned on an empty store, was
-- a hash join over all of baton_events_event_id_key (22 ms of a 27 ms call at 40,000 events).
-- Right at any size. Measured on one connection, 25 appends per call, a growing store: 1.6–1.8 ms
-- per call planned each time, 1.1–1.2 ms through this function.
-- The events' data and metadata come as one JSON array each, not as jsonb[]: an array literal of
-- JSON texts escapes every quote, and building it was the largest allocation of the hosts' process.
CREATE OR REPLACE FUNCTION baton_append_many(
  p_stream_ids text[], p_modes text[], p_expected bigint[], p_counts int[],
  p_event_reqs int[], p_event_ks int[], p_event_ids uuid[], p_types text[], p_data jsonb, p_metadata jsonb
) RETURNS TABLE (ord bigint, last_revision bigint, last_position bigint, current_revision bigint, has_dup boolean)
LANGUAGE plpgsql
SET enable_seqscan = off
SET plan_cache_mode = force_generic_plan
AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH req AS (
    SELECT * FROM unnest(p_stream_ids::text[], p_modes::text[], p_expected::bigint[], p_counts::int[]) WITH ORDINALITY AS r(stream_id, mode, expected, n, ord)
  ),
  ev AS (
    SELECT * FROM ROWS FROM (unnest(p_event_reqs), unnest(p_event_ks), unnest(p_event_ids), unnest(p_types), jsonb_array_elements(p_data), jsonb_array_elements(p_metadata))
      WITH ORDINALITY AS e(req, k, id, type, data, metadata, ord)
  ),
  dup AS (
    SELECT DISTINCT ev.req FROM ev JOIN baton_events b ON b.event_id = ev.id
    WHERE b.event_id = ANY(p_event_ids) -- by key (see above)
  ),
  locked AS (
    SELECT s.stream_id, s.revision, s.last_xid FROM baton_streams s
    WHERE s.stream_id = ANY(p_stream_ids::text[])
      AND (SELECT count(*) FROM (SELECT pg_advisory_xact_lock(-1543916604::int, k) FROM (SELECT DISTINCT hashtext(x) AS k FROM unnest(p_stream_ids::text[]) x) h ORDER BY k) a) >= 0
    ORDER BY s.stream_id FOR UPDATE
  ),
  moved AS (
    UPDATE baton_streams s SET revision = s.revision + r.n, last_xid = pg_current_xact_id()
    FROM req r, locked l
    WHERE s.stream_id = r.stream_id AND l.stream_id = r.stream_id
      AND s.stream_id = ANY(p_stream_ids::text[]) -- by key, whichever join the plan picks
      AND r.ord NOT IN (SELECT req FROM dup)
      AND (r.mode = 'any' OR (r.mode = 'exact' AND l.revision = r.expected))
      AND l.last_xid <= pg_current_xact_id()
    RETURNING r.ord, l.revision AS base
  ),
  created AS (
    INSERT INTO baton_streams AS s (stream_id, revision, last_xid)
    SELECT r.stream_id, r.n - 1, pg_current_xact_id() FROM req r
    WHERE r.mode IN ('no_stream', 'any')
      AND r.stream_id NOT IN (SELECT stream_id FROM locked)
      AND r.ord NOT IN (SELECT req FROM dup)
    ORDER BY r.stream_id
    ON CONFLICT (stream_id) DO NOTHING
    RETURNING s.stream_id
  ),
  ok AS (
    SELECT ord, base FROM moved
    UNION ALL
    SELECT r.ord, -1 FROM created c JOIN req r ON r.stream_id = c.stream_id
  ),
  ins AS (
    INSERT INTO baton_events (event_id, stream_id, revision, type, data, metadata)
    SELECT ev.id, r.stream_id, ok.base + ev.k, ev.type, ev.data, ev.metadata
    FROM ev JOIN ok ON ok.ord = ev.req JOIN req r ON r.ord = ev.req
    ORDER BY ev.ord
    RETURNING stream_id, revision, global_position
  ),
  written AS (
    SELECT stream_id, max(revision) AS last_revision, max(global_position) AS last_position FROM ins GROUP BY stream_id
  )
  SELECT r.ord, w.last_revision, w.last_position, l.revision AS current_revision, (r.ord IN (SELECT req FROM dup)) AS has_dup
  FROM req r LEFT JOIN written w ON w.stream_id = r.stream_id LEFT JOIN locked l ON l.stream_id = r.stream_id
  ORDER BY r.ord;
END
$fn$;
