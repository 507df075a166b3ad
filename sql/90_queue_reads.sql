-- cancel, reclaim and the queue reads (SPEC §5; rules 22-25; D16: tenant visibility
-- first). Reads are STABLE: one
-- snapshot, never waiting for writers.

-- dg_cancel_v1: close an open entry cancelled("requested"); its worker learns it on its next
-- call (DG103). Raises DG404 when the entry is unknown, reclaimed or not p_tenant's (checked
-- first), DG103 when it is closed.
-- (Its row gained not_before and retry_of at the end: the return type changed.)
DROP FUNCTION IF EXISTS dg_cancel_v1(bigint, text);
CREATE OR REPLACE FUNCTION dg_cancel_v1(p_entry_id bigint, p_tenant text)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint, not_before timestamptz, retry_of bigint)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    e queue_entries;
    v_now timestamptz;
BEGIN
    PERFORM _dg_not_null(p_entry_id IS NOT NULL, 'entry_id');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
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
-- namespace); no row when unknown, reclaimed or another tenant's. Raises DG000.
DROP FUNCTION IF EXISTS dg_entry_v1(bigint, text);
CREATE OR REPLACE FUNCTION dg_entry_v1(p_entry_id bigint, p_tenant text)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint, not_before timestamptz, retry_of bigint)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _dg_not_null(p_entry_id IS NOT NULL, 'entry_id');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    RETURN QUERY
    SELECT x.* FROM _dg_entry(p_entry_id) x WHERE x.tenant IS NOT DISTINCT FROM p_tenant;
END;
$$;

-- dg_open_entries_v1: open entries of the wanted tenant (p_any_tenant, or tenant IS NOT
-- DISTINCT FROM p_tenant) on p_thread_id (NULL = every thread), grouped by thread (threads
-- ordered by their head's entry id, the head taken over every tenant), each thread's entries
-- in queue order (rule 24); a page: after the entry p_after (NULL = from the first; its place
-- is (its thread's current head, its queue rank, its id); an id that is unknown, reclaimed or
-- not visible to the wanted tenant gives no rows), at most p_limit (1..100000) and
-- max_page_bytes (input + outcome + attempts), always at least one row when one exists.
-- Continue with p_after = the last entry id returned. Raises DG000.
DROP FUNCTION IF EXISTS dg_open_entries_v1(boolean, text, text);
DROP FUNCTION IF EXISTS dg_open_entries_v1(boolean, text, text, bigint, integer);
CREATE OR REPLACE FUNCTION dg_open_entries_v1(p_any_tenant boolean, p_tenant text,
                                              p_thread_id text,
                                              p_after bigint DEFAULT NULL,
                                              p_limit integer DEFAULT 1000)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint, not_before timestamptz, retry_of bigint)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_head bigint := -1::bigint;
    v_rank smallint := -1::smallint;
    v_id bigint := -1::bigint;
    v_page bigint;
BEGIN
    PERFORM _dg_not_null(p_any_tenant IS NOT NULL, 'any_tenant');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    PERFORM _dg_opt_id(p_thread_id, 'thread_id');
    PERFORM _dg_count(p_limit, 'limit', 100000);
    v_page := (_dg_limits()).max_page_bytes;
    IF p_after IS NOT NULL THEN
        SELECT coalesce(q.head_entry_id, a.entry_id), a.queue_rank, a.entry_id
          INTO v_head, v_rank, v_id
          FROM queue_entries a LEFT JOIN queue_threads q ON q.thread_id = a.thread_id
         WHERE a.entry_id = p_after AND (p_any_tenant OR a.tenant IS NOT DISTINCT FROM p_tenant);
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    RETURN QUERY
    SELECT x.entry_id, x.tenant, x.thread_id, x.key, x.input, x.mode, x.max_attempts,
           x.attempts, x.admitted, x.thread_deleted, x.submitted_at, x.lease_holder,
           x.lease_expires_at, x.outcome_kind, x.outcome_detail, x.closed_at, x.closed_at_seq,
           x.not_before, x.retry_of
      FROM (SELECT r.*, pg_catalog.sum(r.size) OVER (ORDER BY r.h, r.rank, r.entry_id
                                          ROWS UNBOUNDED PRECEDING) - r.size AS before_bytes
              FROM (SELECT e.entry_id, e.tenant, e.thread_id::text AS thread_id, e.key,
                           e.input, e.mode, e.max_attempts, a.attempts, e.admitted,
                           e.thread_deleted, e.submitted_at, e.lease_holder,
                           e.lease_expires_at, e.outcome_kind, e.outcome_detail, e.closed_at,
                           e.closed_at_seq, e.not_before, e.retry_of,
                           q.head_entry_id AS h, e.queue_rank AS rank,
                           pg_catalog.octet_length(e.input) + pg_catalog.octet_length(a.attempts::text)
                           + coalesce(pg_catalog.octet_length(e.key), 0) AS size
                      FROM queue_threads q
                      JOIN queue_entries e ON e.thread_id = q.thread_id
                                          AND e.outcome_kind IS NULL
                     CROSS JOIN LATERAL _dg_attempts(e.entry_id) a
                     WHERE q.head_entry_id IS NOT NULL
                       AND (p_thread_id IS NULL OR q.thread_id = p_thread_id)
                       AND (p_any_tenant OR e.tenant IS NOT DISTINCT FROM p_tenant)
                       AND (q.head_entry_id, e.queue_rank, e.entry_id) > (v_head, v_rank, v_id)
                     ORDER BY q.head_entry_id, e.queue_rank, e.entry_id
                     LIMIT p_limit) r) x
     WHERE x.before_bytes < v_page
     ORDER BY x.h, x.rank, x.entry_id;
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
    PERFORM _dg_not_null(p_older_than IS NOT NULL, 'older_than');
    p_older_than := _dg_duration(p_older_than, 'older_than', true);
    PERFORM _dg_count(p_batch, 'batch', 100000);
    -- Closed entries are never written again, so there is no lock to wait for first.
    v_cutoff := store_now() - p_older_than;
    -- The candidates are picked once (MATERIALIZED): an IN (... LIMIT ... SKIP LOCKED) that the
    -- planner rescans inside a join skips the rows this DELETE already removed and takes more,
    -- past p_batch (seen on a partition whose table statistics chose such a plan).
    WITH c AS MATERIALIZED (
        SELECT x.entry_id FROM queue_entries x
         WHERE x.outcome_kind IS NOT NULL AND x.closed_at < v_cutoff
         ORDER BY x.closed_at, x.entry_id
         LIMIT p_batch
         FOR UPDATE SKIP LOCKED)
    DELETE FROM queue_entries d USING c WHERE d.entry_id = c.entry_id;
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    RETURN QUERY SELECT v_removed;
END;
$$;
