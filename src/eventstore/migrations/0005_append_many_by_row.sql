-- baton_append_many (0003_append_many_function.sql explains it) again, with two changes.
--
-- 1. The compare-and-swap UPDATE finds each stream row by the row id its FOR UPDATE lock returned
--    (a TID scan) instead of by key. By key, its join had to name the call's stream ids twice (the
--    joined key and `= ANY(...)`, so that a plan made on an empty store could not read the whole
--    index), and Postgres then walked the sorted list of ids for every stream of the call: about
--    n²/2 btree probes for n streams (860 for 40; 1.24 million baton_streams_pkey scans for ~97,000
--    appends in a 30,000-execution `baton bench`), now n. A TID scan is the only sensible plan
--    however large the table. Measured on 2–3 connections appending to existing streams, runs
--    alternated, Postgres CPU per append: 12 streams a call 48–59 → 45–49 µs, 25 streams 38–43 →
--    32–35 µs, 128 streams 60–63 → 27–30 µs (the old cost per append grew with the batch).
-- 2. The streams' advisory locks are taken first, in a statement of their own, so the statement that
--    appends takes its snapshot once every batch it waited for has committed. Before, it could not
--    see what those batches wrote: a stream they created was refused and retried alone, and a row
--    they moved could not be found by its row id. Measured with 8 callers each appending to 12 of
--    the same 30 streams, 720 batches: 36–57 of 8,640 requests were retried alone, now none
--    (test/contract/event-store.contract.ts has the case; append-plans.test.ts counts the probes).
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
  -- The streams' advisory locks, in key order, in a statement of their own: the statement below
  -- takes its snapshot once every batch it waited for has committed, so it sees their rows.
  PERFORM pg_advisory_xact_lock(-1543916604::int, k) FROM (SELECT DISTINCT hashtext(x) AS k FROM unnest(p_stream_ids::text[]) x) h ORDER BY k;
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
    SELECT s.ctid AS row_id, s.stream_id, s.revision, s.last_xid FROM baton_streams s
    WHERE s.stream_id = ANY(p_stream_ids::text[])
    ORDER BY s.stream_id FOR UPDATE
  ),
  moved AS (
    UPDATE baton_streams s SET revision = s.revision + r.n, last_xid = pg_current_xact_id()
    FROM req r, locked l
    WHERE s.ctid = l.row_id AND l.stream_id = r.stream_id
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
