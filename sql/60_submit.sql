-- submit (SPEC §5 submit; D17: a kept key deduplicates until reclaim; rule 19).

-- _dg_kept_key(tenant, key): the kept entry holding the tenant's submission key, if any.
CREATE OR REPLACE FUNCTION _dg_kept_key(p_tenant text, p_key text) RETURNS queue_entries
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    e queue_entries;
BEGIN
    IF p_tenant IS NULL THEN
        SELECT * INTO e FROM queue_entries WHERE tenant IS NULL AND key = p_key;
    ELSE
        SELECT * INTO e FROM queue_entries WHERE tenant = p_tenant AND key = p_key;
    END IF;
    RETURN e;
END;
$$;

-- dg_submit_v1: submit a run. Checks in order (rule 19): the tenant's key of a kept entry (the
-- identical submission -> that ticket with existing = true; a different one -> DG101), REJECT
-- with any open entry on the thread -> DG001 ("thread has an open entry"), then INTERRUPT closes
-- every open INTERRUPT entry of the thread that recorded no attempt (interrupted by the new id),
-- then inserts. The stored input is the caller's own text. Raises DG101, DG001, DG000 (thread_id,
-- tenant, key: identifiers; input: JSON text of at most max_value_bytes; mode: enqueue | reject |
-- interrupt; max_attempts >= 1). p_not_before: a delayed run (SPEC §13), never leased before.
-- SPEC §15 (added at the end, with defaults: earlier callers keep working): p_priority (heads
-- of higher priority are leased first across threads; -2147483647..2147483647) and p_kind (an
-- identifier: only a lease serving that kind takes the entry).
CREATE OR REPLACE FUNCTION dg_submit_v1(
    p_thread_id text, p_input text, p_tenant text, p_key text, p_mode text,
    p_max_attempts integer, p_not_before timestamptz DEFAULT NULL, p_priority integer DEFAULT 0,
    p_kind text DEFAULT 'default')
RETURNS TABLE (entry_id bigint, existing boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    k queue_entries;
    v_now timestamptz;
    v_id bigint;
    o record;
    v_place record;
    v_open_since bigint;  -- the listing place (_dg_list_place); NULL with no open entry
    v_list_after bigint;
    v_lim limits := _dg_limits();
    v_fresh boolean;
    v_inserted boolean;
BEGIN
    -- Every argument in one inline test (no statement: SPEC §21); when it fails, the helpers
    -- name the bad one, in this order.
    IF (pg_catalog.octet_length(p_thread_id) BETWEEN 1 AND 512
        AND coalesce(pg_catalog.octet_length(p_tenant) BETWEEN 1 AND 512, true)
        AND coalesce(pg_catalog.octet_length(p_key) BETWEEN 1 AND 512, true)
        AND p_mode IN ('enqueue', 'reject', 'interrupt') AND p_max_attempts >= 1
        AND p_priority > -2147483648 AND pg_catalog.octet_length(p_kind) BETWEEN 1 AND 512
        AND coalesce(pg_catalog.pg_column_size(p_input), 0) <= v_lim.max_call_bytes
        AND pg_catalog.octet_length(p_input) <= v_lim.max_value_bytes
        AND _dg_json_problem(p_input) IS NULL) IS NOT TRUE THEN
        PERFORM _dg_id(p_thread_id, 'thread_id');
        PERFORM _dg_call_bytes(coalesce(pg_catalog.pg_column_size(p_input), 0), v_lim.max_call_bytes);
        PERFORM _dg_opt_id(p_tenant, 'tenant');
        PERFORM _dg_opt_id(p_key, 'key');
        PERFORM _dg_check(p_mode IN ('enqueue', 'reject', 'interrupt'),
                          'mode must be enqueue, reject or interrupt');
        PERFORM _dg_count(p_max_attempts, 'max_attempts', 2147483647);
        PERFORM _dg_not_null(p_priority IS NOT NULL, 'priority');
        PERFORM _dg_check(p_priority > -2147483648, 'priority must be at least -2147483647');
        PERFORM _dg_id(p_kind, 'kind');
        PERFORM _dg_json(p_input, 'input', v_lim.max_value_bytes);
    END IF;
    IF p_key IS NULL THEN
        -- A thread with no open entry (no row yet, or a row whose queue head is NULL), the
        -- common case: its row, written with its head set (the entry this call inserts, its id
        -- drawn now), and the entry go in one statement (SPEC §21). Writing the row is taking
        -- its lock (lock order: first), and with no open entry and no key there is nothing to
        -- check: no REJECT conflict, no INTERRUPT to close, no key to match. When the thread has
        -- an open entry, the row is locked but not written, nothing is inserted, and the locked
        -- path below runs.
        v_id := pg_catalog.nextval(pg_catalog.pg_get_serial_sequence('queue_entries', 'entry_id'));
        v_now := store_now();
        WITH thread_row AS (
                 INSERT INTO threads AS t (thread_id, head_entry_id, head_tenant,
                                           lease_expires_at, head_priority_key, head_kind)
                 VALUES (p_thread_id, v_id, p_tenant,
                         CASE WHEN p_not_before > v_now THEN p_not_before END, -p_priority,
                         p_kind)
                 ON CONFLICT (thread_id) DO UPDATE
                    SET head_entry_id = EXCLUDED.head_entry_id,
                        head_tenant = EXCLUDED.head_tenant,
                        lease_expires_at = EXCLUDED.lease_expires_at,
                        head_priority_key = EXCLUDED.head_priority_key,
                        head_kind = EXCLUDED.head_kind
                  WHERE t.head_entry_id IS NULL
                 RETURNING 1)
        INSERT INTO queue_entries
               (entry_id, tenant, thread_id, key, input, mode, max_attempts, submitted_at,
                not_before, priority, kind, queue_rank)
        OVERRIDING SYSTEM VALUE
        SELECT v_id, p_tenant, p_thread_id, NULL, p_input, p_mode, p_max_attempts, v_now,
               p_not_before, p_priority, p_kind, _dg_queue_rank(p_mode)
          FROM thread_row;
        IF FOUND THEN
            entry_id := v_id;
            existing := false;
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    -- The thread's row, locked (inserted when missing: lock order, first); no queue head means
    -- no open entry.
    v_fresh := (_dg_lock_thread(p_thread_id)).head_entry_id IS NULL;
    v_now := store_now();

    IF p_key IS NOT NULL THEN
        k := _dg_kept_key(p_tenant, p_key);
        IF k.entry_id IS NOT NULL THEN
            -- Identical = same thread, mode, max_attempts and the same JSON value (SPEC §10
            -- rule 3: 1, 1.0 and 1e0 are one number; key order does not matter).
            IF (k.thread_id, k.mode, k.max_attempts)
               IS DISTINCT FROM (p_thread_id, p_mode, p_max_attempts)
               OR NOT _dg_same_json(k.input, p_input) THEN
                RAISE EXCEPTION 'submission key names a different submission'
                    USING ERRCODE = 'DG101';
            END IF;
            RETURN QUERY SELECT k.entry_id, true;
            RETURN;
        END IF;
    END IF;

    IF p_mode = 'reject' THEN
        IF EXISTS (SELECT 1 FROM queue_entries e
                    WHERE e.thread_id = p_thread_id AND e.outcome_kind IS NULL) THEN
            RAISE EXCEPTION 'thread has an open entry' USING ERRCODE = 'DG001';
        END IF;
    END IF;

    -- The key's uniqueness (queue_entries_key_idx, its only unique index besides the identity
    -- key) is still the arbiter, but as ON CONFLICT DO NOTHING rather than an EXCEPTION block:
    -- the same refusal without a subtransaction per submit (issue 25).
    IF p_mode = 'interrupt' AND NOT v_fresh THEN
        -- An attempted head keeps its place before the INTERRUPT (queue order: attempted
        -- first): its rank, left at submit's while nothing could pass it, becomes 0
        -- (migration 0016).
        UPDATE queue_entries h SET queue_rank = 0
         WHERE h.entry_id = (SELECT e.entry_id FROM queue_entries e
                              WHERE e.thread_id = p_thread_id AND e.outcome_kind IS NULL
                              ORDER BY e.queue_rank, e.entry_id LIMIT 1)
           AND h.queue_rank <> 0
           AND EXISTS (SELECT 1 FROM queue_attempts a WHERE a.entry_id = h.entry_id);
    END IF;
    IF NOT v_fresh THEN
        -- (With no open entry the entry opens its own listing stretch: open_since and
        -- list_after NULL, as _dg_list_place would answer.)
        v_place := _dg_list_place(p_thread_id, p_mode);
        v_open_since := v_place.open_since;
        v_list_after := v_place.list_after;
    END IF;
    INSERT INTO queue_entries (tenant, thread_id, key, input, mode, max_attempts,
                               submitted_at, not_before, open_since, list_after, priority, kind,
                               queue_rank)
    VALUES (p_tenant, p_thread_id, p_key, p_input, p_mode, p_max_attempts, v_now,
            p_not_before, v_open_since, v_list_after, p_priority, p_kind,
            _dg_queue_rank(p_mode))
    ON CONFLICT DO NOTHING
    RETURNING queue_entries.entry_id INTO v_id;
    v_inserted := FOUND;
    IF NOT v_inserted THEN
        -- The same key was taken by a submission to another thread meanwhile.
        RAISE EXCEPTION 'submission key names a different submission' USING ERRCODE = 'DG101';
    END IF;

    IF p_mode = 'interrupt' THEN
        FOR o IN SELECT e.entry_id FROM queue_entries e
                  WHERE e.thread_id = p_thread_id AND e.outcome_kind IS NULL
                    AND e.mode = 'interrupt' AND e.entry_id <> v_id
                    AND NOT EXISTS (SELECT 1 FROM queue_attempts a WHERE a.entry_id = e.entry_id)
                  ORDER BY e.entry_id FOR UPDATE
        LOOP
            PERFORM _dg_close_entry(o.entry_id, 'interrupted', v_id::text, v_now);
        END LOOP;
    END IF;
    PERFORM _dg_refresh_queue_thread(p_thread_id);
    entry_id := v_id;
    existing := false;
    RETURN NEXT;
END;
$$;
