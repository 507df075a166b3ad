-- Operating the queue (SPEC §13): backoff stored in the entry, retries of closed entries, and
-- the entry row with its not_before and retry_of. Lock order as everywhere: threads row ->
-- queue_entries rows.

-- dg_defer_v1: end the lease and hold the entry (so its thread: a delayed head holds the
-- thread's later entries back) until store-now + p_delay; with p_error (a JSON string of at
-- most max_value_bytes, as a failed outcome's detail: JSON text carries what text cannot, such
-- as U+0000), record it as the failure reason of the entry's last attempt. Idle workers are
-- woken as by a release (sql/77_notify.sql). Returns the entry row as dg_entry_v1. Raises DG103,
-- DG102 (as every lease call), DG000.
-- (Its row gained priority and kind at the end, SPEC §15: the return type changed.)
CREATE OR REPLACE FUNCTION dg_defer_v1(p_entry_id bigint, p_token bigint, p_delay interval,
                                       p_error text, p_tenant text DEFAULT NULL)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint, not_before timestamptz, retry_of bigint,
               priority integer, kind text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    l record;
    v_now timestamptz;
    v_lim limits;
BEGIN
    PERFORM _dg_not_null(p_entry_id IS NOT NULL, 'entry_id');
    PERFORM _dg_not_null(p_token IS NOT NULL, 'token');
    PERFORM _dg_not_null(p_delay IS NOT NULL, 'delay');
    p_delay := _dg_duration(p_delay, 'delay', true);
    IF p_error IS NOT NULL THEN
        v_lim := _dg_limits();
        PERFORM _dg_call_bytes(pg_catalog.pg_column_size(p_error), v_lim.max_call_bytes);
        PERFORM _dg_json(p_error, 'error', v_lim.max_value_bytes);
        PERFORM _dg_check(pg_catalog.left(pg_catalog.btrim(p_error, E' \t\n\r'), 1) = '"',
                          'error must be a JSON string');
    END IF;
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    l := _dg_lock_lease(p_entry_id, p_token, p_tenant);
    v_now := store_now();
    IF p_error IS NOT NULL AND l.o_attempts > 0 THEN
        UPDATE queue_attempts a SET error = p_error
         WHERE a.entry_id = p_entry_id AND a.number = l.o_attempts;
    END IF;
    UPDATE queue_entries q SET not_before = v_now + p_delay WHERE q.entry_id = p_entry_id;
    -- The lease ends (it lives on the thread row, migrations 0017, 0018); the thread is held
    -- back until not_before when this entry is its head.
    PERFORM _dg_refresh_queue_thread((l.o_entry).thread_id, true);
    PERFORM _dg_wake_queue();
    RETURN QUERY SELECT * FROM dg_entry_v1(p_entry_id, p_tenant);
END;
$$;

-- dg_retry_v1: submit a failed or cancelled entry's input again as a new ENQUEUE entry of the
-- same thread, tenant and max_attempts, with no key, recording retry_of. Idempotent (D66):
-- while a retry of the entry is kept, the first one's ticket (existing = true), unless p_again.
-- Raises DG404 when the entry is unknown, reclaimed or not p_tenant's (checked first: no
-- oracle, SPEC §10 rule 6), DG000 naming entry_id when it is open, completed or interrupted.
CREATE OR REPLACE FUNCTION dg_retry_v1(p_entry_id bigint, p_tenant text,
                                       p_again boolean DEFAULT false)
RETURNS TABLE (entry_id bigint, existing boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    e queue_entries;
    v_id bigint;
    v_place record;
BEGIN
    PERFORM _dg_not_null(p_entry_id IS NOT NULL, 'entry_id');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    SELECT * INTO e FROM queue_entries q WHERE q.entry_id = p_entry_id;
    IF FOUND THEN
        PERFORM _dg_lock_thread(e.thread_id);
        SELECT * INTO e FROM queue_entries q WHERE q.entry_id = p_entry_id;
    END IF;
    IF e.entry_id IS NULL OR e.tenant IS DISTINCT FROM p_tenant THEN
        RAISE EXCEPTION 'entry % not found', p_entry_id USING ERRCODE = 'DG404';
    END IF;
    IF e.outcome_kind IS DISTINCT FROM 'failed' AND e.outcome_kind IS DISTINCT FROM 'cancelled'
    THEN
        RAISE EXCEPTION 'entry_id: entry % is %; only a failed or cancelled entry can be retried',
            p_entry_id, coalesce(e.outcome_kind, 'open') USING ERRCODE = 'DG000';
    END IF;
    IF NOT coalesce(p_again, false) THEN
        SELECT pg_catalog.min(r.entry_id) INTO v_id FROM queue_entries r
         WHERE r.retry_of = p_entry_id;
        IF v_id IS NOT NULL THEN
            RETURN QUERY SELECT v_id, true;
            RETURN;
        END IF;
    END IF;
    v_place := _dg_list_place(e.thread_id, 'enqueue');
    -- SPEC §15: the new entry keeps the priority and kind.
    INSERT INTO queue_entries (tenant, thread_id, key, input, mode, max_attempts, submitted_at,
                               retry_of, open_since, list_after, priority, kind, queue_rank)
    VALUES (e.tenant, e.thread_id, NULL, e.input, 'enqueue', e.max_attempts, store_now(),
            e.entry_id, v_place.open_since, v_place.list_after, e.priority, e.kind,
            _dg_queue_rank('enqueue'))
    RETURNING queue_entries.entry_id INTO v_id;
    PERFORM _dg_refresh_queue_thread(e.thread_id);
    RETURN QUERY SELECT v_id, false;
END;
$$;

-- dg_entry_v2 (an alias of dg_entry_v1) is deprecated: sql/96_deprecated.sql (D233).
