-- effects listing (SPEC §4; issue #17: the dashboard's thread page lists a thread's effects).

-- dg_effects_v1: the thread's effects in key byte order (COLLATE "C"), after the key p_after
-- (exclusive; NULL = from the first), with existing = true as dg_get_effect_v1 returns them;
-- at most p_limit (1..100000) and max_page_bytes (key + value + run id), always at least one
-- row when one exists: continue with p_after = the last key returned. No rows for an unknown
-- thread. Raises DG000.
CREATE OR REPLACE FUNCTION dg_effects_v1(p_thread_id text, p_after text, p_limit integer)
RETURNS TABLE (thread_id text, key text, value text, run_id text, recorded_at timestamptz,
               existing boolean)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_page bigint;
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    PERFORM _dg_opt_id(p_after, 'after');
    PERFORM _dg_count(p_limit, 'limit', 100000);
    v_page := (_dg_limits()).max_page_bytes;
    RETURN QUERY
    SELECT x.thread_id, x.key, x.value, x.run_id, x.recorded_at, true
      FROM (SELECT r.thread_id, r.key, r.value, r.run_id, r.recorded_at,
                   pg_catalog.sum(r.bytes) OVER (ORDER BY r.key COLLATE "C" ROWS UNBOUNDED PRECEDING)
                   - r.bytes AS before_bytes
              FROM (SELECT e.thread_id::text AS thread_id, e.key, e.value, e.run_id,
                           e.recorded_at,
                           pg_catalog.octet_length(e.key) + pg_catalog.octet_length(e.value)
                           + coalesce(pg_catalog.octet_length(e.run_id), 0) AS bytes
                      FROM effects e
                     WHERE e.thread_id = p_thread_id
                       AND (p_after IS NULL OR e.key COLLATE "C" > p_after COLLATE "C")
                     ORDER BY e.key COLLATE "C"
                     LIMIT p_limit) r) x
     WHERE x.before_bytes < v_page
     ORDER BY x.key COLLATE "C";
END;
$$;
