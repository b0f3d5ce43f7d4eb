-- The `stream`-order follow scan (src/eventstore/pg-follow.ts explains it) as a function, so that
-- it is planned once per connection instead of on most calls. As a named statement Postgres
-- re-planned it whenever the custom plan looked cheaper than the generic one, which for this shape
-- is a sequential scan (its `= ANY($5)` estimated at 5% of the table): in `baton bench`
-- (pg_stat_statements, track_planning) it was planned on 2,746 of 4,487 calls at ~0.24 ms a plan
-- against ~0.12 ms to run it. Every host's follower runs it on every wake-up, so on the pickup path
-- too. A plan made once must stay right as the table grows from empty, so the function plans with
-- sequential and bitmap scans off: what is left walks the (transaction_id, global_position) index
-- from the cursor, as the shape intends (test/integration/follow-plans.test.ts counts the reads).
-- It is one statement, so its rows and its in-progress list come from one snapshot, as before.
-- The `global` scan stays a plain statement: a function returns its rows through a tuplestore, ~4 µs
-- a row, and the projector reads ~700 rows a call, where planning is the smaller cost.
CREATE OR REPLACE FUNCTION baton_scan_committed(p_xid xid8, p_position bigint, p_limit int, p_prefixes text[], p_pending xid8[])
RETURNS TABLE (global_position bigint, event_id uuid, stream_id text, revision bigint, type text, data jsonb, metadata jsonb,
               recorded_at timestamptz, transaction_id xid8, scan_end boolean, scanned bigint, in_progress text[])
LANGUAGE plpgsql
SET enable_seqscan = off
SET enable_bitmapscan = off
SET plan_cache_mode = force_generic_plan
AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH scanned AS (
    SELECT b.global_position, b.event_id, b.stream_id, b.revision, b.type, b.data, b.metadata, b.recorded_at, b.transaction_id
    FROM baton_events b
    WHERE (b.transaction_id, b.global_position) > (p_xid, p_position)
    ORDER BY b.transaction_id, b.global_position
    LIMIT p_limit),
  picked AS (
    SELECT * FROM scanned
    UNION ALL
    SELECT b.global_position, b.event_id, b.stream_id, b.revision, b.type, b.data, b.metadata, b.recorded_at, b.transaction_id
    FROM baton_events b WHERE b.transaction_id = ANY(p_pending))
  SELECT p.global_position, p.event_id, p.stream_id, p.revision, p.type, p.data, p.metadata, p.recorded_at, p.transaction_id,
         false, NULL::bigint, NULL::text[]
    FROM picked p WHERE p_prefixes IS NULL OR p.stream_id LIKE ANY(p_prefixes)
  UNION ALL
  SELECT last.global_position, NULL, NULL, NULL, NULL, NULL, NULL, NULL, last.transaction_id, true,
         (SELECT count(*) FROM scanned),
         ARRAY(SELECT x::text FROM pg_snapshot_xip(pg_current_snapshot()) x)
    FROM (SELECT NULL) one LEFT JOIN LATERAL (
      SELECT l.transaction_id, l.global_position FROM scanned l ORDER BY l.transaction_id DESC, l.global_position DESC LIMIT 1) last ON true
  ORDER BY 10, 9, 1;
END
$fn$;
