-- Scheduling (SPEC §15, issue 27): kinds, concurrency limits per tenant and per kind, and cron
-- schedules (migrations/0010.scheduling.sql). Priorities and kinds order and filter the lease's
-- pick (sql/70_lease.sql); the limits are enforced there through _dg_lease_limits, below.

-- _dg_kinds(kinds, name): DG000 unless kinds holds 1..100 distinct identifiers.
CREATE OR REPLACE FUNCTION _dg_kinds(p_kinds text[], p_name text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF coalesce(pg_catalog.cardinality(p_kinds), 0) NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION '% must hold 1..100 kinds', p_name USING ERRCODE = 'DG000';
    END IF;
    PERFORM _dg_ids(p_kinds, p_name, 100);
    IF (SELECT pg_catalog.count(DISTINCT k) FROM pg_catalog.unnest(p_kinds) AS u(k))
       <> pg_catalog.cardinality(p_kinds) THEN
        RAISE EXCEPTION '% must not repeat a kind', p_name USING ERRCODE = 'DG000';
    END IF;
END;
$$;

-- _dg_limit_full(scope, name, now, wait, OUT at_limit, OUT locked): whether the tenant or kind
-- `name` is at its concurrency limit. No limit row: not full, nothing locked. Else the row is
-- locked FOR UPDATE (waiting when p_wait, else SKIP LOCKED: a row another lease holds counts as
-- full for this call) and the live leases of that tenant or kind are counted under the lock, at
-- most max_leases of them (the thread rows' leases, migration 0018: a named tenant's from
-- threads_leased_tenant_idx; a kind's by walking threads_leases_idx's live leases, as many as
-- the store's running attempts). Each statement of a PL/pgSQL function sees the commits made
-- before it started (READ COMMITTED), so the count sees every lease whose transaction held the
-- lock before this one. On a partition leased through a proxy, the count is the store-wide one
-- the proxy passes (dg.limit_live, below).
CREATE OR REPLACE FUNCTION _dg_limit_full(
    p_scope text, p_name text, p_now timestamptz, p_wait boolean,
    OUT at_limit boolean, OUT locked boolean)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_max integer;
    v_live bigint;
    v_store text;
BEGIN
    at_limit := false;
    locked := false;
    PERFORM 1 FROM queue_limits l WHERE l.scope = p_scope AND l.name = p_name;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF p_wait THEN
        SELECT l.max_leases INTO v_max FROM queue_limits l
         WHERE l.scope = p_scope AND l.name = p_name FOR UPDATE;
        IF NOT FOUND THEN
            RETURN;  -- removed meanwhile
        END IF;
    ELSE
        SELECT l.max_leases INTO v_max FROM queue_limits l
         WHERE l.scope = p_scope AND l.name = p_name FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            at_limit := true;  -- another lease holds it (or it was removed): not this call's
            RETURN;
        END IF;
    END IF;
    locked := true;
    -- The live leases, from the thread rows (a thread holds at most one lease: D222).
    IF p_scope = 'tenant' THEN
        SELECT pg_catalog.count(*) INTO v_live
          FROM (SELECT 1 FROM threads q
                 WHERE q.lease_tenant = p_name AND q.lease_until > p_now
                 LIMIT v_max) x;
    ELSE
        SELECT pg_catalog.count(*) INTO v_live
          FROM (SELECT 1 FROM threads q
                 WHERE q.lease_kind = p_name AND q.lease_until > p_now
                 LIMIT v_max) x;
    END IF;
    -- A partition proxy's lease (issue 28, D142) passes the live leases it counted store-wide
    -- in the transaction's dg.limit_live ({"tenant": {name: n}, "kind": {...}}, read under its
    -- own lock; this partition's included); unset on one store. It can only make a limit
    -- stricter: the greater of the two counts is used.
    v_store := NULLIF(pg_catalog.current_setting('dg.limit_live', true), '');
    IF v_store IS NOT NULL THEN
        v_live := GREATEST(v_live, coalesce(((v_store::json -> p_scope) ->> p_name)::bigint, 0));
    END IF;
    at_limit := (v_live >= v_max);
END;
$$;

-- _dg_lease_limits(tenant, kind, now, wait, OUT full_scope, OUT locked): dg_lease_v1's limit
-- check for a locked head of `tenant` and `kind`: full_scope is NULL when both are under their limits,
-- else 'kind' or 'tenant' (the first found full); locked tells whether a limit row is now held.
-- Deadlock-free by construction: every lease locks limit rows kind first, then tenant; and it
-- waits (p_wait) only for the rows of its first head that has limits — once it holds one, every
-- later one is taken SKIP LOCKED — so no lease ever waits while holding a row another waits for.
CREATE OR REPLACE FUNCTION _dg_lease_limits(
    p_tenant text, p_kind text, p_now timestamptz, p_wait boolean,
    OUT full_scope text, OUT locked boolean)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    r record;
BEGIN
    full_scope := NULL;
    locked := false;
    SELECT * INTO r FROM _dg_limit_full('kind', p_kind, p_now, p_wait);
    locked := r.locked;
    IF r.at_limit THEN
        full_scope := 'kind';
        RETURN;
    END IF;
    IF p_tenant IS NOT NULL THEN
        SELECT * INTO r FROM _dg_limit_full('tenant', p_tenant, p_now, p_wait);
        locked := locked OR r.locked;
        IF r.at_limit THEN
            full_scope := 'tenant';
        END IF;
    END IF;
END;
$$;

-- dg_set_limit_v1: at most p_max_leases (0..2147483647) live leases for the tenant
-- (p_scope 'tenant') or kind ('kind') p_name, replacing its limit; enforced by every later
-- lease (dg_lease_v1, dg_begin_attempt_v1). Returns the limit. Raises DG000.
CREATE OR REPLACE FUNCTION dg_set_limit_v1(p_scope text, p_name text, p_max_leases integer)
RETURNS TABLE (scope text, name text, max_leases integer)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _dg_check(p_scope IN ('tenant', 'kind'), 'scope must be tenant or kind');
    PERFORM _dg_id(p_name, 'name');
    PERFORM _dg_not_null(p_max_leases IS NOT NULL, 'max_leases');
    PERFORM _dg_check(p_max_leases >= 0, 'max_leases must be 0..2147483647');
    INSERT INTO queue_limits AS l (scope, name, max_leases)
    VALUES (p_scope, p_name, p_max_leases)
    ON CONFLICT (scope, name) DO UPDATE SET max_leases = EXCLUDED.max_leases;
    RETURN QUERY SELECT p_scope, p_name, p_max_leases;
END;
$$;

-- dg_limits_v1: every limit, by scope then name (byte order). Raises nothing.
CREATE OR REPLACE FUNCTION dg_limits_v1()
RETURNS TABLE (scope text, name text, max_leases integer)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY SELECT l.scope, l.name::text, l.max_leases FROM queue_limits l
                  ORDER BY l.scope COLLATE "C", l.name COLLATE "C";
END;
$$;

-- dg_remove_limit_v1: remove the tenant's or kind's limit; removed = whether there was one.
-- Raises DG000.
CREATE OR REPLACE FUNCTION dg_remove_limit_v1(p_scope text, p_name text)
RETURNS TABLE (removed boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_rows integer;
BEGIN
    PERFORM _dg_check(p_scope IN ('tenant', 'kind'), 'scope must be tenant or kind');
    PERFORM _dg_id(p_name, 'name');
    DELETE FROM queue_limits l WHERE l.scope = p_scope AND l.name = p_name;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    RETURN QUERY SELECT v_rows > 0;
END;
$$;

-- _dg_cron_value(text, field): the value a cron field's value names (field 0..5: second,
-- minute, hour, day-of-month, month, day-of-week; months and weekdays also by ASCII name, any
-- case), or NULL when it names none (python/durable_graph/core/cron.py `_value`).
CREATE OR REPLACE FUNCTION _dg_cron_value(p_text text, p_field integer) RETURNS integer
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_pos integer;
    v integer;
BEGIN
    IF p_field = 4 THEN
        v_pos := pg_catalog.array_position(ARRAY['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL',
                                                 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'],
                                           pg_catalog.upper(p_text));
        IF v_pos IS NOT NULL THEN
            RETURN v_pos;
        END IF;
    ELSIF p_field = 5 THEN
        v_pos := pg_catalog.array_position(ARRAY['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'],
                                           pg_catalog.upper(p_text));
        IF v_pos IS NOT NULL THEN
            RETURN v_pos - 1;
        END IF;
    END IF;
    IF p_text !~ '^[0-9]{1,2}$' THEN
        RETURN NULL;
    END IF;
    v := p_text::integer;
    IF v < (ARRAY[0, 0, 0, 1, 1, 0])[p_field + 1] OR v > (ARRAY[59, 59, 23, 31, 12, 7])[p_field + 1]
    THEN
        RETURN NULL;
    END IF;
    RETURN v;
END;
$$;

-- _dg_cron_term(text, field): the values one term of a cron field names (-1 for L, LW, dL and
-- d#n), or NULL when the term is bad (python/durable_graph/core/cron.py `_term`).
CREATE OR REPLACE FUNCTION _dg_cron_term(p_text text, p_field integer) RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_high integer := (ARRAY[59, 59, 23, 31, 12, 7])[p_field + 1];
    v_up text := pg_catalog.upper(p_text);
    v_base text := p_text;
    v_step text;
    v_start integer;
    v_end integer;
BEGIN
    IF p_field = 3 AND v_up IN ('L', 'LW') THEN
        RETURN ARRAY[-1];
    END IF;
    IF p_field = 5 AND v_up ~ '^[0-7]L$' THEN
        RETURN ARRAY[-1];
    END IF;
    IF p_field = 5 AND pg_catalog.strpos(p_text, '#') > 0 THEN
        IF _dg_cron_value(pg_catalog.split_part(p_text, '#', 1), 5) IS NULL
           OR pg_catalog.substr(p_text, pg_catalog.strpos(p_text, '#') + 1) !~ '^0?[1-5]$' THEN
            RETURN NULL;
        END IF;
        RETURN ARRAY[-1];
    END IF;
    IF pg_catalog.strpos(p_text, '/') > 0 THEN
        v_base := pg_catalog.split_part(p_text, '/', 1);
        v_step := pg_catalog.substr(p_text, pg_catalog.strpos(p_text, '/') + 1);
    END IF;
    IF v_base = '*' THEN
        v_start := (ARRAY[0, 0, 0, 1, 1, 0])[p_field + 1];
        v_end := v_high;
    ELSIF pg_catalog.strpos(v_base, '-') > 0 THEN
        v_start := _dg_cron_value(pg_catalog.split_part(v_base, '-', 1), p_field);
        v_end := _dg_cron_value(pg_catalog.substr(v_base, pg_catalog.strpos(v_base, '-') + 1),
                                p_field);
        IF v_start IS NULL OR v_end IS NULL OR v_end < v_start THEN
            RETURN NULL;
        END IF;
    ELSE
        v_start := _dg_cron_value(v_base, p_field);
        IF v_start IS NULL THEN
            RETURN NULL;
        END IF;
        v_end := CASE WHEN v_step IS NULL THEN v_start ELSE v_high END;
    END IF;
    IF v_step IS NULL THEN
        RETURN ARRAY(SELECT pg_catalog.generate_series(v_start, v_end));
    END IF;
    IF v_step !~ '^[0-9]{1,2}$' OR v_step::integer NOT BETWEEN 1 AND v_high THEN
        RETURN NULL;
    END IF;
    RETURN ARRAY(SELECT pg_catalog.generate_series(v_start, v_end, v_step::integer));
END;
$$;

-- _dg_cron(cron, name): DG000 naming `name` unless `cron` is a cron expression of the grammar of
-- python/durable_graph/core/cron.py (sql/README.md "Schedules"): the SQL API refuses exactly
-- what the Python API refuses (issue 37 item 6), so no stored expression stops a scheduler.
CREATE OR REPLACE FUNCTION _dg_cron(p_cron text, p_name text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_fields text[] := ARRAY['second', 'minute', 'hour', 'day-of-month', 'month', 'day-of-week'];
    v_text text := pg_catalog.translate(p_cron, E'\t', ' ');
    v_parts text[];
    v_term text;
    v_values integer[];
    v_days integer[];
    v_months integer[];
BEGIN
    PERFORM _dg_not_null(p_cron IS NOT NULL, p_name);
    PERFORM _dg_check(pg_catalog.octet_length(p_cron) <= 512,
                      p_name || ' must be at most 512 bytes');
    IF v_text !~ '^[0-9A-Za-z*,/# -]+$' THEN
        RAISE EXCEPTION '% must be a cron expression: it may hold only digits, letters, spaces, '
            'tabs and * , / # -', p_name USING ERRCODE = 'DG000';
    END IF;
    v_parts := pg_catalog.regexp_split_to_array(pg_catalog.btrim(v_text, ' '), ' +');
    IF pg_catalog.cardinality(v_parts) NOT IN (5, 6) THEN
        RAISE EXCEPTION '% must be a cron expression of five fields, or six with seconds first',
            p_name USING ERRCODE = 'DG000';
    END IF;
    IF pg_catalog.cardinality(v_parts) = 5 THEN
        v_parts := ARRAY['0'] || v_parts;
    END IF;
    FOR i IN 1..6 LOOP
        v_values := ARRAY[]::integer[];
        FOREACH v_term IN ARRAY pg_catalog.string_to_array(v_parts[i], ',') LOOP
            IF _dg_cron_term(v_term, i - 1) IS NULL THEN
                v_values := NULL;
                EXIT;
            END IF;
            v_values := v_values || _dg_cron_term(v_term, i - 1);
        END LOOP;
        IF v_values IS NULL OR pg_catalog.cardinality(v_values) = 0 THEN
            RAISE EXCEPTION '% must be a cron expression: bad % field %', p_name, v_fields[i],
                pg_catalog.quote_literal(v_parts[i]) USING ERRCODE = 'DG000';
        END IF;
        IF i = 4 THEN
            v_days := v_values;
        ELSIF i = 5 THEN
            v_months := v_values;
        END IF;
    END LOOP;
    -- Day-of-month and day-of-week both matching (either starts with *): the smallest listed
    -- day must exist in a listed month.
    IF (v_parts[4] LIKE '*%' OR v_parts[6] LIKE '*%')
       AND (SELECT pg_catalog.min(d) FROM pg_catalog.unnest(v_days) d)
           > (SELECT pg_catalog.max((ARRAY[31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[m])
                FROM pg_catalog.unnest(v_months) m) THEN
        RAISE EXCEPTION '% must be a cron expression: no listed month has day %', p_name,
            (SELECT pg_catalog.min(d) FROM pg_catalog.unnest(v_days) d) USING ERRCODE = 'DG000';
    END IF;
END;
$$;

-- _dg_schedule_row(name): the schedule row of sql/README.md ("Schedules").
CREATE OR REPLACE FUNCTION _dg_schedule_row(p_name text)
RETURNS TABLE (name text, cron text, timezone text, thread_id text, input text, kind text,
               tenant text, priority integer, max_attempts integer, catch_up boolean,
               paused boolean, created_at timestamptz, last_slot timestamptz)
LANGUAGE sql STABLE
AS $$
    SELECT s.name, s.cron, s.timezone, s.thread_id, s.input, s.kind, s.tenant, s.priority,
           s.max_attempts, s.catch_up, s.paused, s.created_at, s.last_slot
      FROM schedules s WHERE s.name = p_name
$$;

-- dg_put_schedule_v1: add the schedule p_name, or replace the one of that name (keeping paused,
-- created_at and last_slot). p_name: an identifier of at most 200 bytes (so that
-- 'schedule:<name>:<slot>' is a submission key); p_cron: a cron expression of five or six
-- fields, checked field by field as Python checks it (_dg_cron); p_timezone: a name of
-- pg_timezone_names; p_thread_id, p_kind: identifiers; p_tenant: NULL or an identifier;
-- p_input: JSON text; p_priority as dg_submit_v1's; p_max_attempts >= 1; p_catch_up: run each
-- missed slot (else only the latest). Returns the schedule row. Raises DG000, also when p_name
-- is another tenant's schedule (p_tenant differs: a put never replaces it).
CREATE OR REPLACE FUNCTION dg_put_schedule_v1(
    p_name text, p_cron text, p_timezone text, p_thread_id text, p_input text, p_kind text,
    p_tenant text, p_priority integer, p_max_attempts integer, p_catch_up boolean)
RETURNS TABLE (name text, cron text, timezone text, thread_id text, input text, kind text,
               tenant text, priority integer, max_attempts integer, catch_up boolean,
               paused boolean, created_at timestamptz, last_slot timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_lim limits := _dg_limits();
BEGIN
    PERFORM _dg_id(p_name, 'name');
    PERFORM _dg_check(pg_catalog.octet_length(p_name) <= 200, 'name must be at most 200 bytes');
    PERFORM _dg_cron(p_cron, 'cron');
    PERFORM _dg_not_null(p_timezone IS NOT NULL, 'timezone');
    PERFORM _dg_check(EXISTS (SELECT 1 FROM pg_catalog.pg_timezone_names z
                               WHERE z.name = p_timezone) OR p_timezone = 'UTC',
                      'timezone must be a known time zone');
    PERFORM _dg_id(p_thread_id, 'thread_id');
    PERFORM _dg_id(p_kind, 'kind');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    PERFORM _dg_not_null(p_priority IS NOT NULL, 'priority');
    PERFORM _dg_check(p_priority > -2147483648, 'priority must be at least -2147483647');
    PERFORM _dg_count(p_max_attempts, 'max_attempts', 2147483647);
    PERFORM _dg_not_null(p_catch_up IS NOT NULL, 'catch_up');
    PERFORM _dg_json(p_input, 'input', v_lim.max_value_bytes);
    -- Names are schema-wide (docs/decisions.md): never replace another tenant's schedule.
    IF EXISTS (SELECT 1 FROM schedules x WHERE x.name = p_name
                                          AND x.tenant IS DISTINCT FROM p_tenant) THEN
        RAISE EXCEPTION 'name % is taken by a schedule of another tenant',
            pg_catalog.quote_literal(p_name) USING ERRCODE = 'DG000';
    END IF;
    INSERT INTO schedules AS s (name, cron, timezone, thread_id, input, kind, tenant, priority,
                                max_attempts, catch_up, created_at)
    VALUES (p_name, p_cron, p_timezone, p_thread_id, p_input, p_kind, p_tenant, p_priority,
            p_max_attempts, p_catch_up, store_now())
    ON CONFLICT (name) DO UPDATE
       SET cron = EXCLUDED.cron, timezone = EXCLUDED.timezone, thread_id = EXCLUDED.thread_id,
           input = EXCLUDED.input, kind = EXCLUDED.kind, tenant = EXCLUDED.tenant,
           priority = EXCLUDED.priority, max_attempts = EXCLUDED.max_attempts,
           catch_up = EXCLUDED.catch_up
     -- The check above read without a lock: another tenant's put of this name may have
     -- committed since (issue 46 item 9). The conflict's row is locked and re-read here, so
     -- the rule holds however the puts interleave.
     WHERE s.tenant IS NOT DISTINCT FROM EXCLUDED.tenant;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'name % is taken by a schedule of another tenant',
            pg_catalog.quote_literal(p_name) USING ERRCODE = 'DG000';
    END IF;
    RETURN QUERY SELECT * FROM _dg_schedule_row(p_name);
END;
$$;

-- dg_schedules_v1: every schedule row, by name (byte order). Raises nothing.
CREATE OR REPLACE FUNCTION dg_schedules_v1()
RETURNS TABLE (name text, cron text, timezone text, thread_id text, input text, kind text,
               tenant text, priority integer, max_attempts integer, catch_up boolean,
               paused boolean, created_at timestamptz, last_slot timestamptz)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY SELECT s.name::text, s.cron, s.timezone, s.thread_id::text, s.input, s.kind,
                        s.tenant, s.priority, s.max_attempts, s.catch_up, s.paused,
                        s.created_at, s.last_slot
                   FROM schedules s ORDER BY s.name COLLATE "C";
END;
$$;

-- dg_remove_schedule_v1: remove the schedule; removed = whether it existed. Raises DG000.
CREATE OR REPLACE FUNCTION dg_remove_schedule_v1(p_name text)
RETURNS TABLE (removed boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_rows integer;
BEGIN
    PERFORM _dg_id(p_name, 'name');
    DELETE FROM schedules s WHERE s.name = p_name;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    RETURN QUERY SELECT v_rows > 0;
END;
$$;

-- dg_pause_schedule_v1: pause (p_paused true) or resume the schedule; returns its row. Raises
-- DG404 when there is no schedule of that name, DG000.
CREATE OR REPLACE FUNCTION dg_pause_schedule_v1(p_name text, p_paused boolean)
RETURNS TABLE (name text, cron text, timezone text, thread_id text, input text, kind text,
               tenant text, priority integer, max_attempts integer, catch_up boolean,
               paused boolean, created_at timestamptz, last_slot timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _dg_id(p_name, 'name');
    PERFORM _dg_not_null(p_paused IS NOT NULL, 'paused');
    UPDATE schedules s SET paused = p_paused WHERE s.name = p_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'schedule not found' USING ERRCODE = 'DG404';
    END IF;
    RETURN QUERY SELECT * FROM _dg_schedule_row(p_name);
END;
$$;

-- dg_fire_schedule_v1: submit the schedule's slot p_slot (whole seconds) once. Under the
-- schedule row's lock: when the schedule is not paused, p_slot is after created_at, at or before
-- store-now and after last_slot, submit (dg_submit_v1: ENQUEUE, the schedule's thread, input,
-- tenant, max_attempts, priority and kind) under the key 'schedule:<name>:<slot as
-- YYYY-MM-DDTHH:MI:SSZ>' and set last_slot = p_slot: one row (entry_id, existing). Else no row;
-- also when the schedule's thread was deleted at or after the schedule was made (the slot is
-- spent, nothing submitted: D241, issue 46).
-- However many schedulers fire a slot, it is submitted at most once; and never after a newer
-- slot was (last_slot only moves forward, so a reclaimed entry's slot never runs again). Raises
-- DG404 for an unknown schedule, DG101 when another submission holds the slot's key, DG000.
CREATE OR REPLACE FUNCTION dg_fire_schedule_v1(p_name text, p_slot timestamptz)
RETURNS TABLE (entry_id bigint, existing boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    s schedules;
    v_key text;
BEGIN
    PERFORM _dg_id(p_name, 'name');
    PERFORM _dg_not_null(p_slot IS NOT NULL, 'slot');
    PERFORM _dg_check(p_slot = pg_catalog.date_trunc('second', p_slot),
                      'slot must be a whole second');
    SELECT * INTO s FROM schedules x WHERE x.name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'schedule not found' USING ERRCODE = 'DG404';
    END IF;
    IF s.paused OR p_slot <= s.created_at OR p_slot > store_now()
       OR p_slot <= s.last_slot THEN
        RETURN;
    END IF;
    -- A schedule belongs to its thread's incarnation (D241): once that thread is deleted, the
    -- slot is spent and nothing submitted, so the schedule neither re-creates the thread nor
    -- runs in the next thread of that id (whoever made it). The thread row's lock first (as
    -- dg_submit_v1 takes it next), so a delete in flight has committed before the check reads.
    PERFORM 1 FROM threads t WHERE t.thread_id = s.thread_id FOR UPDATE;
    IF EXISTS (SELECT 1 FROM threads t WHERE t.thread_id = s.thread_id
                                         AND t.deleted_at >= s.created_at) THEN
        UPDATE schedules x SET last_slot = p_slot WHERE x.name = p_name;
        RETURN;
    END IF;
    v_key := 'schedule:' || s.name || ':'
             || pg_catalog.to_char(p_slot AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"');
    UPDATE schedules x SET last_slot = p_slot WHERE x.name = p_name;
    RETURN QUERY SELECT t.entry_id, t.existing
                   FROM dg_submit_v1(s.thread_id, s.input, s.tenant, v_key, 'enqueue',
                                     s.max_attempts, NULL, s.priority, s.kind) t;
END;
$$;
