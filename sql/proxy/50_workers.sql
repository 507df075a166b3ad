-- The worker registry (issue 26 item 13) on a partition proxy: it lives on partition 0 alone.
-- Partition 0 records as a beat's role the login the proxy connects with (its user mapping).
-- A beat is one row of one worker, and the list is read where the beats are written, so neither
-- needs every partition (a worker keeps its partition-0 beats while other partitions are down;
-- with partition 0 down, its beats fail and it goes on working).

-- dg_worker_heartbeat_v1 on a proxy: the beat recorded on partition 0.
CREATE OR REPLACE FUNCTION dg_worker_heartbeat_v1(p_holder text, p_host text, p_pid integer,
                                                  p_kinds text[], p_state text)
RETURNS TABLE (holder text, host text, pid integer, kinds text[], state text,
               started_at timestamptz, last_seen timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT * FROM _dg_on_worker_heartbeat_v1(0, p_holder, p_host, p_pid, p_kinds,
                                                          p_state);
END;
$$;

-- dg_workers_v2 on a proxy: the live workers as partition 0 has them, a page at a time.
CREATE OR REPLACE FUNCTION dg_workers_v2(p_seen_within interval, p_after text, p_limit integer)
RETURNS TABLE (holder text, host text, pid integer, kinds text[], state text,
               started_at timestamptz, last_seen timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT * FROM _dg_on_workers_v2(0, p_seen_within, p_after, p_limit);
END;
$$;
