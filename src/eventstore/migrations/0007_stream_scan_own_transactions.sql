-- baton_scan_committed (0004_stream_scan_function.sql explains it) with one more argument, p_own:
-- transactions the subscriber's own process committed for appenders that apply their own events
-- (AppendOrigin, `appliedBy`). Their rows are left out of what the scan returns; they still count
-- as scanned and move the cursor, as before. A busy host's follower read back, with their data,
-- nearly every event its own runtimes had appended and applied already: measured in a
-- 20,000-execution run of the peer adapter (C=50), that read was the Postgres backend using the
-- most CPU (~12% of the machine's samples, jsonb output and the function's tuplestore).
CREATE OR REPLACE FUNCTION baton_scan_committed(p_xid xid8, p_position bigint, p_limit int, p_prefixes text[], p_pending xid8[], p_own xid8[])
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
    FROM picked p
    WHERE (p_prefixes IS NULL OR p.stream_id LIKE ANY(p_prefixes)) AND NOT (p.transaction_id = ANY(coalesce(p_own, '{}')))
  UNION ALL
  SELECT last.global_position, NULL, NULL, NULL, NULL, NULL, NULL, NULL, last.transaction_id, true,
         (SELECT count(*) FROM scanned),
         ARRAY(SELECT x::text FROM pg_snapshot_xip(pg_current_snapshot()) x)
    FROM (SELECT NULL) one LEFT JOIN LATERAL (
      SELECT l.transaction_id, l.global_position FROM scanned l ORDER BY l.transaction_id DESC, l.global_position DESC LIMIT 1) last ON true
  ORDER BY 10, 9, 1;
END
$fn$;

-- The five-argument form, which hosts of earlier releases still call until they restart: the same
-- scan, leaving nothing out.
CREATE OR REPLACE FUNCTION baton_scan_committed(p_xid xid8, p_position bigint, p_limit int, p_prefixes text[], p_pending xid8[])
RETURNS TABLE (global_position bigint, event_id uuid, stream_id text, revision bigint, type text, data jsonb, metadata jsonb,
               recorded_at timestamptz, transaction_id xid8, scan_end boolean, scanned bigint, in_progress text[])
LANGUAGE sql
AS $fn$ SELECT * FROM baton_scan_committed(p_xid, p_position, p_limit, p_prefixes, p_pending, '{}'::xid8[]) $fn$;
