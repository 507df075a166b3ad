-- The worker registry (issue 26 item 13; python/durable_graph/core/workers.py): each running
-- worker beats every few seconds, so the dashboard and `durable-graph workers` show the workers
-- that hold no lease too. Times at the store's clock (store_now()).

-- dg_worker_heartbeat_v1: record that the worker p_holder (on p_host, process p_pid, serving
-- p_kinds, NULL for every kind) lives in p_state ('idle', 'busy', or 'stopped' on a clean stop)
-- at store-now; its first beat sets started_at and records the caller's role. Drops the rows not
-- seen for a day. Returns the row. Raises DG000 when p_holder's row was written by another role
-- (issue 37 item 9: a role cannot hide or rewrite another role's worker), and for bad arguments.
-- The caller is session_user, the role that logged in: inside this SECURITY DEFINER function
-- current_user is the schema's owner, and SET ROLE changes current_user only, so session_user is
-- the one name a caller cannot choose.
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
    v_role text := pg_catalog.session_user()::text;
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
    INSERT INTO workers AS w (holder, host, pid, kinds, state, started_at, last_seen, role)
    VALUES (p_holder, p_host, p_pid, p_kinds, p_state, v_now, v_now, v_role)
    ON CONFLICT (holder) DO UPDATE
       SET host = EXCLUDED.host, pid = EXCLUDED.pid, kinds = EXCLUDED.kinds,
           state = EXCLUDED.state, last_seen = EXCLUDED.last_seen, role = EXCLUDED.role
     WHERE w.role IS NULL OR w.role = EXCLUDED.role
    RETURNING w.holder, w.host, w.pid, w.kinds, w.state, w.started_at, w.last_seen;
    IF NOT FOUND THEN  -- the row is another role's: unchanged
        RAISE EXCEPTION 'holder % is a worker of another role', pg_catalog.quote_literal(p_holder)
            USING ERRCODE = 'DG000';
    END IF;
END;
$$;

-- dg_workers_v2: the workers whose latest beat is within p_seen_within of store-now and is not
-- 'stopped', by holder (byte order): those after p_after (NULL: from the first), p_limit
-- (1..1000) at most; the next page starts after the last row's holder. Raises DG000.
CREATE OR REPLACE FUNCTION dg_workers_v2(p_seen_within interval, p_after text, p_limit integer)
RETURNS TABLE (holder text, host text, pid integer, kinds text[], state text,
               started_at timestamptz, last_seen timestamptz)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _dg_not_null(p_seen_within IS NOT NULL, 'seen_within');
    p_seen_within := _dg_duration(p_seen_within, 'seen_within', false);
    PERFORM _dg_opt_id(p_after, 'after');
    PERFORM _dg_count(p_limit, 'limit', 1000);
    RETURN QUERY
    SELECT w.holder, w.host, w.pid, w.kinds, w.state, w.started_at, w.last_seen
      FROM workers w
     WHERE w.last_seen >= store_now() - p_seen_within AND w.state <> 'stopped'
       AND (p_after IS NULL OR w.holder COLLATE "C" > p_after COLLATE "C")
     ORDER BY w.holder COLLATE "C"
     LIMIT p_limit;
END;
$$;
