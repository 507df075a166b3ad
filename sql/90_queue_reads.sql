-- cancel, reclaim and the queue reads (SPEC §5; rules 22-25; D16: tenant visibility
-- first). Reads are STABLE: one
-- snapshot, never waiting for writers.

-- dg_cancel_v1: close an open entry cancelled("requested"); its worker learns it on its next
-- call (DG103). Raises DG404 when the entry is unknown, reclaimed or not p_tenant's (checked
-- first), DG103 when it is closed.
CREATE OR REPLACE FUNCTION dg_cancel_v1(p_entry_id bigint, p_tenant text)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    e queue_entries;
    v_now timestamptz;
BEGIN
    SELECT * INTO e FROM queue_entries q WHERE q.entry_id = p_entry_id;
    IF FOUND THEN
        PERFORM _dg_lock_queue_thread(e.thread_id);
        SELECT * INTO e FROM queue_entries q WHERE q.entry_id = p_entry_id FOR UPDATE;
    END IF;
    IF e.entry_id IS NULL OR e.tenant IS DISTINCT FROM p_tenant THEN
        RAISE EXCEPTION 'entry % not found', p_entry_id USING ERRCODE = 'DG404';
    END IF;
    IF e.outcome_kind IS NOT NULL THEN
        RAISE EXCEPTION 'entry % is closed', p_entry_id USING ERRCODE = 'DG103';
    END IF;
    v_now := store_now();
    PERFORM _dg_close_entry(p_entry_id, 'cancelled', '"requested"', v_now);
    PERFORM _dg_refresh_queue_thread(e.thread_id);
    RETURN QUERY SELECT * FROM _dg_entry(p_entry_id);
END;
$$;

-- dg_entry_v1: the entry when its tenant IS NOT DISTINCT FROM p_tenant (NULL = the no-tenant
-- namespace); no row when unknown, reclaimed or another tenant's. Raises nothing.
CREATE OR REPLACE FUNCTION dg_entry_v1(p_entry_id bigint, p_tenant text)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT x.* FROM _dg_entry(p_entry_id) x WHERE x.tenant IS NOT DISTINCT FROM p_tenant;
END;
$$;

-- dg_open_entries_v1: open entries of the wanted tenant (p_any_tenant, or tenant IS NOT
-- DISTINCT FROM p_tenant) on p_thread_id (NULL = every thread), grouped by thread (threads
-- ordered by their head's entry id, the head taken over every tenant), each thread's entries
-- in queue order (rule 24). Raises nothing.
CREATE OR REPLACE FUNCTION dg_open_entries_v1(p_any_tenant boolean, p_tenant text,
                                              p_thread_id text)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT e.entry_id, e.tenant, e.thread_id::text, e.key, e.input, e.mode, e.max_attempts,
           a.attempts, e.admitted, e.thread_deleted, e.submitted_at,
           e.lease_holder, e.lease_expires_at, e.outcome_kind, e.outcome_detail, e.closed_at,
           e.closed_at_seq
      FROM queue_threads q
      JOIN queue_entries e ON e.thread_id = q.thread_id AND e.outcome_kind IS NULL
     CROSS JOIN LATERAL _dg_attempts(e.entry_id) a
     WHERE q.head_entry_id IS NOT NULL
       AND (p_thread_id IS NULL OR q.thread_id = p_thread_id)
       AND (p_any_tenant OR e.tenant IS NOT DISTINCT FROM p_tenant)
     ORDER BY q.head_entry_id, e.queue_rank, e.entry_id;
END;
$$;

-- dg_reclaim_v1: remove at most p_batch closed entries closed before store-now - p_older_than
-- (zero allowed), oldest first (closed_at, then entry id), with their attempts; never an open
-- entry. Rows another reclaim is removing are skipped. Returns how many were removed.
-- Raises DG000.
CREATE OR REPLACE FUNCTION dg_reclaim_v1(p_older_than interval, p_batch integer)
RETURNS TABLE (removed integer)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_cutoff timestamptz;
    v_removed integer;
BEGIN
    PERFORM _dg_check(p_older_than IS NOT NULL, 'older_than must not be NULL');
    p_older_than := _dg_duration(p_older_than, 'older_than', true);
    PERFORM _dg_check(p_batch >= 1, 'batch must be >= 1');
    -- Closed entries are never written again, so there is no lock to wait for first.
    v_cutoff := store_now() - p_older_than;
    DELETE FROM queue_entries d
     WHERE d.entry_id IN (SELECT c.entry_id FROM queue_entries c
                           WHERE c.outcome_kind IS NOT NULL AND c.closed_at < v_cutoff
                           ORDER BY c.closed_at, c.entry_id
                           LIMIT p_batch
                           FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    RETURN QUERY SELECT v_removed;
END;
$$;
