-- Calls made under a lease: renew, release, record_attempt, close (SPEC §5; D18-D20: renew's ttl,
-- release and close clear the lease, closed_at_seq; rules 20-21). Each takes the tenant of the
-- lease (the entry's tenant, NULL for none) and checks first: entry closed, reclaimed or not that
-- tenant's -> DG103 (SPEC §10 rule 6: another tenant's entry answers exactly as an id that never
-- existed), then token not the entry's current lease -> DG102. DG000 for a bad argument. The
-- lease lives on the thread's row (D223, D224; migrations 0017, 0018): renew and release write
-- it there, and a close ends it by closing its entry (_dg_refresh_queue_thread then drops it).

-- dg_renew_v1: push the lease's expiry to store-now + (p_ttl, or when NULL the ttl the lease
-- was taken with), keeping the token. Returns the lease row. Raises DG103, DG102, DG000.
CREATE OR REPLACE FUNCTION dg_renew_v1(p_entry_id bigint, p_token bigint, p_ttl interval,
                                       p_tenant text DEFAULT NULL)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint,
               token bigint, holder text, expires_at timestamptz, ttl interval,
               not_before timestamptz, retry_of bigint,
               priority integer, kind text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    l record;
    v_now timestamptz;
BEGIN
    PERFORM _dg_not_null(p_entry_id IS NOT NULL, 'entry_id');
    PERFORM _dg_not_null(p_token IS NOT NULL, 'token');
    p_ttl := _dg_duration(p_ttl, 'ttl', false);
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    l := _dg_lock_lease(p_entry_id, p_token, p_tenant);
    v_now := store_now();
    -- The lease's new expiry and, in the same write, when the thread can next be leased (as
    -- _dg_refresh_queue_thread computes it: the later of the lease's expiry and the head's
    -- future not_before; a renewal moves nothing else).
    UPDATE threads q
       SET lease_until = v_now + coalesce(p_ttl, l.o_ttl),
           lease_expires_at = greatest(v_now + coalesce(p_ttl, l.o_ttl),
                                       (SELECT h.not_before FROM queue_entries h
                                         WHERE h.entry_id = q.head_entry_id
                                           AND h.not_before > v_now))
     WHERE q.thread_id = (l.o_entry).thread_id;
    RETURN QUERY
    -- The lease columns, then not_before and retry_of last (added at the end).
    SELECT x.entry_id, x.tenant, x.thread_id, x.key, x.input, x.mode, x.max_attempts, x.attempts,
           x.admitted, x.thread_deleted, x.submitted_at, x.lease_holder, x.lease_expires_at,
           x.outcome_kind, x.outcome_detail, x.closed_at, x.closed_at_seq,
           l.o_token, l.o_holder, v_now + coalesce(p_ttl, l.o_ttl), l.o_ttl,
           x.not_before, x.retry_of, x.priority, x.kind
      FROM _dg_entry(p_entry_id) x;
END;
$$;

-- dg_release_v1: end the lease; the entry can be leased again at once (D19), and idle workers
-- are woken (sql/77_notify.sql). Raises DG103, DG102.
CREATE OR REPLACE FUNCTION dg_release_v1(p_entry_id bigint, p_token bigint,
                                         p_tenant text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    e queue_entries;
BEGIN
    PERFORM _dg_not_null(p_entry_id IS NOT NULL, 'entry_id');
    PERFORM _dg_not_null(p_token IS NOT NULL, 'token');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    e := (_dg_lock_lease(p_entry_id, p_token, p_tenant)).o_entry;
    PERFORM _dg_refresh_queue_thread(e.thread_id, true);  -- the lease ends; leasable now
    PERFORM _dg_wake_queue();
END;
$$;

-- dg_record_attempt_v1: record an attempt durably (rule 20, in order): closed -> DG103; token
-- -> DG102; delete-marked -> close cancelled("thread_deleted"), 'thread_deleted'; max_attempts
-- recorded -> 'exhausted' (nothing recorded); run id names a checkpoint of the thread or an
-- attempt of a kept entry of the thread -> DG004; else 'started' with the attempt's number.
CREATE OR REPLACE FUNCTION dg_record_attempt_v1(p_entry_id bigint, p_token bigint,
                                                p_run_id text, p_tenant text DEFAULT NULL)
RETURNS TABLE (attempt_kind text, attempt_number integer)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    l record;
    e queue_entries;
    v_now timestamptz;
    v_kind text;
    v_number integer;
BEGIN
    PERFORM _dg_not_null(p_entry_id IS NOT NULL, 'entry_id');
    PERFORM _dg_not_null(p_token IS NOT NULL, 'token');
    PERFORM _dg_id(p_run_id, 'run_id');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    l := _dg_lock_lease(p_entry_id, p_token, p_tenant);
    e := l.o_entry;
    v_now := store_now();
    v_kind := _dg_attempt_verdict(e, l.o_attempts,
                                  (SELECT k.taken FROM _dg_run_taken(e.thread_id, p_run_id) k));
    IF v_kind = 'taken' THEN
        RAISE EXCEPTION 'run id already names a run of the thread' USING ERRCODE = 'DG004';
    ELSIF v_kind = 'thread_deleted' THEN
        PERFORM _dg_close_entry(p_entry_id, 'cancelled', '"thread_deleted"', v_now);
    ELSIF v_kind = 'started' THEN
        v_number := l.o_attempts + 1;
        INSERT INTO queue_attempts (entry_id, number, thread_id, run_id, started_at)
        VALUES (p_entry_id, v_number, e.thread_id, p_run_id, v_now);
        -- Attempted: first in queue order (rank 0), as the lease's entry may have been
        -- passed by an INTERRUPT since it was leased (migration 0016). The attempt count is
        -- the attempt just inserted (migration 0017): an entry already at rank 0 is not
        -- written.
        UPDATE queue_entries q SET queue_rank = 0
         WHERE q.entry_id = p_entry_id AND q.queue_rank <> 0;
    END IF;
    PERFORM _dg_refresh_queue_thread(e.thread_id);
    RETURN QUERY SELECT v_kind, v_number;
END;
$$;

-- dg_close_v1: close the entry once with the outcome (p_outcome_kind 'completed' | 'failed' |
-- 'cancelled' | 'interrupted', p_outcome_detail its JSON detail); stamps closed_at (store-now)
-- and closed_at_seq, ends the lease. Returns the entry row. Raises DG103, DG102, DG000.
CREATE OR REPLACE FUNCTION dg_close_v1(p_entry_id bigint, p_token bigint, p_outcome_kind text,
                                       p_outcome_detail text, p_tenant text DEFAULT NULL)
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
    v_detail text;
    v_lim limits;
BEGIN
    PERFORM _dg_not_null(p_entry_id IS NOT NULL, 'entry_id');
    PERFORM _dg_not_null(p_token IS NOT NULL, 'token');
    PERFORM _dg_check(p_outcome_kind IN ('completed', 'failed', 'cancelled', 'interrupted'),
                      'outcome_kind must be completed, failed, cancelled or interrupted');
    v_lim := _dg_limits();
    PERFORM _dg_call_bytes(coalesce(pg_catalog.pg_column_size(p_outcome_detail), 0), v_lim.max_call_bytes);
    PERFORM _dg_json(p_outcome_detail, 'outcome_detail', v_lim.max_value_bytes);
    -- The detail's shape per kind, as every reader decodes it (JSON whitespace around it).
    v_detail := pg_catalog.btrim(p_outcome_detail, E' \t\n\r');
    PERFORM _dg_check(CASE p_outcome_kind
                          WHEN 'completed' THEN true
                          WHEN 'failed' THEN pg_catalog.left(v_detail, 1) = '"'
                          WHEN 'cancelled' THEN v_detail IN ('"requested"', '"thread_deleted"')
                          ELSE v_detail ~ '^[1-9][0-9]{0,18}$'
                               AND v_detail::numeric <= 9223372036854775807
                      END,
                      'outcome_detail must be, for completed: any JSON value; failed: a JSON '
                      'string; cancelled: "requested" or "thread_deleted"; interrupted: an '
                      'entry id (a JSON integer >= 1)');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    l := _dg_lock_lease(p_entry_id, p_token, p_tenant);
    v_now := store_now();
    IF p_outcome_kind = 'failed' THEN
        -- The last attempt's failure reason (SPEC §13), unless dg_defer_v1 gave one.
        UPDATE queue_attempts a SET error = p_outcome_detail
         WHERE a.entry_id = p_entry_id AND a.number = l.o_attempts AND a.error IS NULL;
    END IF;
    PERFORM _dg_close_entry(p_entry_id, p_outcome_kind, p_outcome_detail, v_now);
    PERFORM _dg_refresh_queue_thread((l.o_entry).thread_id);  -- the lease ends with the close
    RETURN QUERY SELECT * FROM _dg_entry(p_entry_id);
END;
$$;
