-- Scheduling (SPEC §15) on a partition proxy: concurrency limits and cron schedules.
--
-- Limits are kept on every partition (set and removed on all at once); a lease through the
-- proxy counts them store-wide under the proxy's limit lock (sql/proxy/10_lease.sql, D142), so
-- a tenant or kind at limit L holds at most L leases in all. Setting again after a partition
-- was down makes them agree again (set replaces).
--
-- A schedule lives on its thread's partition, so that firing a slot is dg_fire_schedule_v1 there
-- (one transaction: the schedule row's lock, last_slot and the submission under its key). A put
-- that gives a schedule a thread on another partition moves it: taken from its partition
-- (dg_take_schedule_v1: deleted under its lock, with its paused, created_at and last_slot),
-- then adopted by the new one (dg_adopt_schedule_v1) with those kept, so no slot fires twice.
-- When the adoption is refused (a bad argument) the taken row goes back unchanged; if the
-- proxy's connection dies between the two, the schedule is gone and the put reports an error
-- (put it again: it starts afresh, firing only slots after that put). A gap of the proxy: on
-- one store a put is one transaction.

-- _dg_schedule_part(name): the partition holding the schedule `name`, NULL when none does: every
-- partition looks the name up in its own schedules (dg_schedule_thread_v1), none lists them all.
CREATE OR REPLACE FUNCTION _dg_schedule_part(p_name text) RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_thread text;
BEGIN
    SELECT s.thread_id INTO v_thread FROM _dg_all_schedule_thread_v1(p_name) s LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN _dg_thread_part(v_thread);
EXCEPTION WHEN SQLSTATE 'DG000' THEN
    RAISE;
WHEN OTHERS THEN
    PERFORM _dg_fan_out_failed('schedules', SQLERRM);
    RETURN NULL;
END;
$$;

-- dg_set_limit_v1 on a proxy: the limit set on every partition; the row of one of them.
CREATE OR REPLACE FUNCTION dg_set_limit_v1(p_scope text, p_name text, p_max_leases integer)
RETURNS TABLE (scope text, name text, max_leases integer)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT a.* FROM _dg_all_set_limit_v1(p_scope, p_name, p_max_leases) a LIMIT 1;
END;
$$;

-- dg_limits_v1 on a proxy: every limit, by scope then name (byte order); a limit the partitions
-- disagree on (a set or remove that reached only some) shows its smallest value.
CREATE OR REPLACE FUNCTION dg_limits_v1()
RETURNS TABLE (scope text, name text, max_leases integer)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY
    SELECT a.scope, a.name, pg_catalog.min(a.max_leases)::integer
      FROM _dg_all_limits_v1() a
     GROUP BY a.scope, a.name
     ORDER BY a.scope COLLATE "C", a.name COLLATE "C";
EXCEPTION WHEN OTHERS THEN
    PERFORM _dg_fan_out_failed('limits', SQLERRM);
END;
$$;

-- dg_remove_limit_v1 on a proxy: removed from every partition; removed = whether one had it.
CREATE OR REPLACE FUNCTION dg_remove_limit_v1(p_scope text, p_name text)
RETURNS TABLE (removed boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT pg_catalog.bool_or(a.removed)
                   FROM _dg_all_remove_limit_v1(p_scope, p_name) a;
END;
$$;

-- dg_put_schedule_v1 on a proxy: put on the partition of p_thread_id, moving the schedule
-- there when another partition holds it (see above).
CREATE OR REPLACE FUNCTION dg_put_schedule_v1(
    p_name text, p_cron text, p_timezone text, p_thread_id text, p_input text, p_kind text,
    p_tenant text, p_priority integer, p_max_attempts integer, p_catch_up boolean)
RETURNS TABLE (name text, cron text, timezone text, thread_id text, input text, kind text,
               tenant text, priority integer, max_attempts integer, catch_up boolean,
               paused boolean, created_at timestamptz, last_slot timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_part integer := _dg_thread_part(p_thread_id);
    v_held integer;
    t record;
    r record;
BEGIN
    IF p_name IS NOT NULL AND p_thread_id IS NOT NULL THEN
        v_held := _dg_schedule_part(p_name);
    END IF;
    IF v_held IS NOT NULL AND v_held <> v_part THEN
        SELECT * INTO t FROM _dg_on_take_schedule_v1(v_held, p_name);
        IF FOUND THEN
            IF t.tenant IS DISTINCT FROM p_tenant THEN  -- another tenant's: back, unchanged
                PERFORM _dg_on_adopt_schedule_v1(
                    v_held, t.name, t.cron, t.timezone, t.thread_id, t.input, t.kind, t.tenant,
                    t.priority, t.max_attempts, t.catch_up, t.paused, t.created_at, t.last_slot);
                RAISE EXCEPTION 'name % is taken by a schedule of another tenant',
                    pg_catalog.quote_literal(p_name) USING ERRCODE = 'DG000';
            END IF;
            BEGIN
                SELECT * INTO r FROM _dg_on_adopt_schedule_v1(
                    v_part, p_name, p_cron, p_timezone, p_thread_id, p_input, p_kind, p_tenant,
                    p_priority, p_max_attempts, p_catch_up, t.paused, t.created_at, t.last_slot);
            EXCEPTION WHEN OTHERS THEN
                PERFORM _dg_on_adopt_schedule_v1(
                    v_held, t.name, t.cron, t.timezone, t.thread_id, t.input, t.kind, t.tenant,
                    t.priority, t.max_attempts, t.catch_up, t.paused, t.created_at, t.last_slot);
                RAISE;
            END;
            RETURN QUERY SELECT r.name, r.cron, r.timezone, r.thread_id, r.input, r.kind,
                                r.tenant, r.priority, r.max_attempts, r.catch_up, r.paused,
                                r.created_at, r.last_slot;
            RETURN;
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM _dg_on_put_schedule_v1(v_part, p_name, p_cron, p_timezone,
                                                      p_thread_id, p_input, p_kind, p_tenant,
                                                      p_priority, p_max_attempts, p_catch_up);
END;
$$;

-- dg_schedules_v1 on a proxy: every partition's schedules, by name (byte order).
CREATE OR REPLACE FUNCTION dg_schedules_v1()
RETURNS TABLE (name text, cron text, timezone text, thread_id text, input text, kind text,
               tenant text, priority integer, max_attempts integer, catch_up boolean,
               paused boolean, created_at timestamptz, last_slot timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT a.* FROM _dg_all_schedules_v1() a ORDER BY a.name COLLATE "C";
EXCEPTION WHEN OTHERS THEN
    PERFORM _dg_fan_out_failed('schedules', SQLERRM);
END;
$$;

-- dg_remove_schedule_v1 on a proxy: removed wherever it is; removed = whether it existed.
CREATE OR REPLACE FUNCTION dg_remove_schedule_v1(p_name text)
RETURNS TABLE (removed boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT pg_catalog.bool_or(a.removed) FROM _dg_all_remove_schedule_v1(p_name) a;
END;
$$;

-- dg_pause_schedule_v1 on a proxy: on the schedule's partition (partition 0 when none holds
-- it, which checks the arguments and raises DG404).
CREATE OR REPLACE FUNCTION dg_pause_schedule_v1(p_name text, p_paused boolean)
RETURNS TABLE (name text, cron text, timezone text, thread_id text, input text, kind text,
               tenant text, priority integer, max_attempts integer, catch_up boolean,
               paused boolean, created_at timestamptz, last_slot timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT * FROM _dg_on_pause_schedule_v1(coalesce(_dg_schedule_part(p_name), 0),
                                                        p_name, p_paused);
END;
$$;

-- dg_fire_schedule_v1 on a proxy: on the schedule's partition (partition 0 when none holds it,
-- which checks the arguments and raises DG404).
CREATE OR REPLACE FUNCTION dg_fire_schedule_v1(p_name text, p_slot timestamptz)
RETURNS TABLE (entry_id bigint, existing boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT * FROM _dg_on_fire_schedule_v1(coalesce(_dg_schedule_part(p_name), 0),
                                                       p_name, p_slot);
END;
$$;
