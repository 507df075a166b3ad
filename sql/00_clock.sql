-- The store's clock and the small helpers every other file uses. Installed with search_path set
-- to the store's schema. Public dg_* functions are pinned to it (SET search_path FROM CURRENT);
-- internal _dg_* helpers and store_now() are not: a SET clause costs a GUC save/restore on every
-- call and forbids inlining, and they are only ever called from a pinned function, whose
-- search_path they run under (helpers that read no table name pg_catalog objects only).

-- store_now(): the store's time (SPEC §4 "Time"): clock_timestamp(). Every dg_* function reads it
-- once, after taking its locks. Tests replace this function in their own schema to move time.
-- Raises nothing.
-- Not pinned (no SET) so that it is inlined into the callers' cached plans; replacing it
-- invalidates them.
CREATE OR REPLACE FUNCTION store_now() RETURNS timestamptz
LANGUAGE sql VOLATILE
AS $$ SELECT pg_catalog.clock_timestamp() $$;

-- _dg_iso(ts): a timestamp as ISO-8601 UTC text with microseconds, for timestamps inside json
-- result columns. STABLE (to_char is) and not pinned, so that it is inlined. Raises nothing.
CREATE OR REPLACE FUNCTION _dg_iso(p_ts timestamptz) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
AS $$ SELECT pg_catalog.to_char(p_ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"') $$;

-- _dg_check(ok, message): raise DG000 (ValidationError) with message unless ok is true.
CREATE OR REPLACE FUNCTION _dg_check(p_ok boolean, p_message text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_ok IS NOT TRUE THEN
        RAISE EXCEPTION '%', p_message USING ERRCODE = 'DG000';
    END IF;
END;
$$;

-- _dg_lock_thread(thread_id): the thread's row, locked FOR UPDATE; inserted first (invisible:
-- live = false) when the id was never seen. Raises nothing.
CREATE OR REPLACE FUNCTION _dg_lock_thread(p_thread_id text) RETURNS threads
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    t threads;
BEGIN
    SELECT * INTO t FROM threads WHERE thread_id = p_thread_id FOR UPDATE;
    IF NOT FOUND THEN
        -- A row this transaction inserted is as good as locked: others wait on it.
        INSERT INTO threads (thread_id) VALUES (p_thread_id) ON CONFLICT DO NOTHING
        RETURNING * INTO t;
        IF NOT FOUND THEN
            SELECT * INTO t FROM threads WHERE thread_id = p_thread_id FOR UPDATE;
        END IF;
    END IF;
    RETURN t;
END;
$$;

-- _dg_lock_threads(ids): lock the rows of several threads FOR UPDATE in id byte order (COLLATE
-- "C"), inserting missing ones. Raises nothing.
CREATE OR REPLACE FUNCTION _dg_lock_threads(p_ids text[]) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_id text;
BEGIN
    FOR v_id IN
        SELECT DISTINCT u.id COLLATE "C" FROM pg_catalog.unnest(p_ids) AS u(id)
        WHERE u.id IS NOT NULL ORDER BY 1
    LOOP
        PERFORM _dg_lock_thread(v_id);
    END LOOP;
END;
$$;

-- _dg_writes(thread_id, checkpoint_id): one row, the checkpoint's pending writes as a json
-- array [{"task_id", "channel", "value", "task_path"}] ordered by (task_path bytes, task_id
-- bytes, index), LangGraph's writes_sort_key, ties in the order written; values embedded
-- verbatim. A STABLE SQL set-returning function without SET, so that the planner inlines it
-- where it is used: `... CROSS JOIN LATERAL _dg_writes(c.thread_id, c.checkpoint_id) w`.
-- (It replaces the scalar _dg_writes_json of earlier versions, which was planned per call.)
CREATE OR REPLACE FUNCTION _dg_writes(p_thread_id text, p_checkpoint_id text)
RETURNS TABLE (writes json)
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(
        pg_catalog.json_agg(pg_catalog.json_build_object('task_id', w.task_id, 'channel', w.channel,
                                   'value', w.value::json, 'task_path', w.task_path)
                 ORDER BY w.task_path, w.task_id, w.idx, w.written_order),
        '[]'::json)
      FROM pending_writes w
     WHERE w.thread_id = p_thread_id AND w.checkpoint_id = p_checkpoint_id
$$;

-- _dg_duration(value, name, allow_zero): a duration argument as exact elapsed time (SPEC §10.4):
-- the interval's length in seconds (extract(epoch): a day is 86,400 s, a month 30 days) as an
-- interval of seconds only, so that adding it to a timestamptz never follows the session's
-- TimeZone across a daylight-saving change as '1 day' does. DG000 naming the parameter unless
-- positive (or zero when allowed) and at most 36,500 days. NULL stays NULL (the caller decides
-- whether the argument is optional).
CREATE OR REPLACE FUNCTION _dg_duration(p_value interval, p_name text, p_allow_zero boolean)
RETURNS interval
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_secs numeric;
BEGIN
    IF p_value IS NULL THEN
        RETURN NULL;
    END IF;
    v_secs := EXTRACT(EPOCH FROM p_value);
    IF v_secs < 0 OR (v_secs = 0 AND NOT p_allow_zero) THEN
        RAISE EXCEPTION '% must be %', p_name,
            CASE WHEN p_allow_zero THEN '>= 0' ELSE 'positive' END USING ERRCODE = 'DG000';
    END IF;
    IF v_secs > 3153600000 THEN  -- 36,500 days
        RAISE EXCEPTION '% must be at most 36500 days', p_name USING ERRCODE = 'DG000';
    END IF;
    -- Through text: exact to the microsecond, all in the interval's time field.
    RETURN (v_secs::text || ' seconds')::interval;
END;
$$;
