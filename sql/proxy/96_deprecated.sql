-- Deprecated functions on a partition proxy (sql/96_deprecated.sql, D233): the store-wide one
-- needs its template here; the others are routed by their thread or entry as generated stubs.

-- dg_workers_v1 on a proxy: every page of the proxy's dg_workers_v2 (partition 0's registry).
CREATE OR REPLACE FUNCTION dg_workers_v1(p_seen_within interval)
RETURNS TABLE (holder text, host text, pid integer, kinds text[], state text,
               started_at timestamptz, last_seen timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_after text;
    v_rows integer;
BEGIN
    LOOP
        v_rows := 0;
        FOR holder, host, pid, kinds, state, started_at, last_seen IN
            SELECT * FROM dg_workers_v2(p_seen_within, v_after, 1000)
        LOOP
            v_rows := v_rows + 1;
            v_after := holder;
            RETURN NEXT;
        END LOOP;
        EXIT WHEN v_rows < 1000;
    END LOOP;
END;
$$;
