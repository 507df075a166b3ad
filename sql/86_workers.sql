-- The worker registry (issue 26 item 13; python/durable_graph/core/workers.py): each running
-- worker beats every few seconds, so the dashboard and `durable-graph workers` show the workers
-- that hold no lease too. Times at the store's clock (store_now()).

-- dg_worker_heartbeat_v1: record that the worker p_holder (on p_host, process p_pid, serving
-- p_kinds, NULL for every kind) lives in p_state ('idle', 'busy', or 'stopped' on a clean stop)
-- at store-now; its first beat sets started_at. Drops the rows not seen for a day. Returns the
-- row. Raises DG000.
CREATE OR REPLACE FUNCTION dg_worker_heartbeat_v1(p_holder text, p_host text, p_pid integer,
                                                  p_kinds text[], p_state text)
RETURNS TABLE (holder text, host text, pid integer, kinds text[], state text,
               started_at timestamptz, last_seen timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := store_now();
BEGIN
    PERFORM _dg_id(p_holder, 'holder');
    PERFORM _dg_id(p_host, 'host');
    PERFORM _dg_not_null(p_pid IS NOT NULL, 'pid');
    PERFORM _dg_check(p_pid >= 0, 'pid must be 0..2147483647');
    IF p_kinds IS NOT NULL THEN
        PERFORM _dg_kinds(p_kinds, 'kinds');
    END IF;
    PERFORM _dg_check(p_state IS NOT NULL AND p_state IN ('idle', 'busy', 'stopped'),
                      'state must be one of idle, busy, stopped');
    DELETE FROM workers w WHERE w.last_seen < v_now - interval '1 day';
    RETURN QUERY
    INSERT INTO workers AS w (holder, host, pid, kinds, state, started_at, last_seen)
    VALUES (p_holder, p_host, p_pid, p_kinds, p_state, v_now, v_now)
    ON CONFLICT (holder) DO UPDATE
       SET host = EXCLUDED.host, pid = EXCLUDED.pid, kinds = EXCLUDED.kinds,
           state = EXCLUDED.state, last_seen = EXCLUDED.last_seen
    RETURNING w.holder, w.host, w.pid, w.kinds, w.state, w.started_at, w.last_seen;
END;
$$;

-- dg_workers_v1: the workers whose latest beat is within p_seen_within of store-now and is not
-- 'stopped', by holder (byte order). Raises DG000.
CREATE OR REPLACE FUNCTION dg_workers_v1(p_seen_within interval)
RETURNS TABLE (holder text, host text, pid integer, kinds text[], state text,
               started_at timestamptz, last_seen timestamptz)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _dg_not_null(p_seen_within IS NOT NULL, 'seen_within');
    p_seen_within := _dg_duration(p_seen_within, 'seen_within', false);
    RETURN QUERY
    SELECT w.holder, w.host, w.pid, w.kinds, w.state, w.started_at, w.last_seen
      FROM workers w
     WHERE w.last_seen >= store_now() - p_seen_within AND w.state <> 'stopped'
     ORDER BY w.holder COLLATE "C";
END;
$$;
