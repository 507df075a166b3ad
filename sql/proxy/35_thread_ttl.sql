-- The thread TTL sweep on a partition proxy (SPEC §24.1, §16.1): each partition sweeps its own
-- due threads (a thread and its descendants share a partition), each partition's call its own
-- transaction of at most p_limit threads, run on every partition at once; the counts are summed.
CREATE OR REPLACE FUNCTION dg_sweep_threads_v1(p_limit integer)
RETURNS TABLE (deleted integer, kept_latest integer, checked integer)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    -- Checked here, as each partition checks it: a bad limit is DG000, not a fan-out failure.
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'limit must be 1..10000, got %', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'DG000';
    END IF;
    RETURN QUERY
        SELECT coalesce(pg_catalog.sum(s.deleted), 0)::integer,
               coalesce(pg_catalog.sum(s.kept_latest), 0)::integer,
               coalesce(pg_catalog.sum(s.checked), 0)::integer
          FROM _dg_all_sweep_threads_v1(p_limit) s;
EXCEPTION WHEN SQLSTATE 'DG000' THEN
    RAISE;
WHEN OTHERS THEN
    PERFORM _dg_fan_out_failed('sweep_threads', SQLERRM);
END;
$$;
