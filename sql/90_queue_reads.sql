-- cancel, reclaim and the queue reads (SPEC §5; rules 22-25; D16: tenant visibility
-- first). Reads are STABLE: one
-- snapshot, never waiting for writers.

-- dg_cancel_v1: close an open entry cancelled("requested"); its worker learns it on its next
-- call (DG103), and the thread is free at once (SPEC §19.2): the claim held under one of the
-- entry's attempts' run ids ends in this transaction, so the thread's next entry can start and
-- the cancelled run's writes are refused (DG103 under its run id, DG002 under its claim). Raises
-- DG404 when the entry is unknown, reclaimed or not p_tenant's (checked first), DG103 when it
-- is closed.
-- (Its row gained not_before and retry_of at the end: the return type changed.)
CREATE OR REPLACE FUNCTION dg_cancel_v1(p_entry_id bigint, p_tenant text)
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
    e queue_entries;
    t threads;
    v_now timestamptz;
BEGIN
    PERFORM _dg_not_null(p_entry_id IS NOT NULL, 'entry_id');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    SELECT * INTO e FROM queue_entries q WHERE q.entry_id = p_entry_id;
    IF FOUND THEN
        -- Queue order: the thread's row (a write under the run waits for the close, then
        -- sees it), then the entry's.
        t := _dg_lock_thread(e.thread_id);
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
    -- The next head, the lease ended, and the claim of one of this entry's attempts released
    -- (its run writes nothing more: SPEC §19.1), in one write of the thread row (t: as locked
    -- above; nothing since writes its claim).
    PERFORM _dg_refresh_queue_thread(
        e.thread_id, false,
        coalesce(t.claim_holder IN (SELECT a.run_id FROM queue_attempts a
                                     WHERE a.entry_id = p_entry_id), false));
    RETURN QUERY SELECT * FROM _dg_entry(p_entry_id);
END;
$$;

-- dg_entry_v1: the entry when its tenant IS NOT DISTINCT FROM p_tenant (NULL = the no-tenant
-- namespace); no row when unknown, reclaimed or another tenant's. Raises DG000.
CREATE OR REPLACE FUNCTION dg_entry_v1(p_entry_id bigint, p_tenant text)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint, not_before timestamptz, retry_of bigint,
               priority integer, kind text)
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
-- DISTINCT FROM p_tenant) on p_thread_id (NULL = every thread), by each entry's fixed listing
-- place (D65, migrations/0009.listing_place.sql): threads by the entry that opened their
-- current stretch of open entries, each thread's entries in queue order; a page: after the
-- entry p_after (NULL = from the first; an id that is unknown, reclaimed or not visible to the
-- wanted tenant gives no rows), at most p_limit (1..100000) and max_page_bytes (input +
-- outcome + attempts), always at least one row when one exists. Continue with p_after = the
-- last entry id returned: a walk never skips an entry open throughout it and never repeats
-- one, however many entries close meanwhile. Reads the page's rows down
-- queue_entries_listing_idx, not every open entry. Raises DG000.
CREATE OR REPLACE FUNCTION dg_open_entries_v1(p_any_tenant boolean, p_tenant text,
                                              p_thread_id text,
                                              p_after bigint DEFAULT NULL,
                                              p_limit integer DEFAULT 1000)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint, not_before timestamptz, retry_of bigint,
               priority integer, kind text)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_since bigint := -1::bigint;
    v_rank integer := -1;
    v_anchor bigint := -1::bigint;
    v_behind boolean := false;
    v_id bigint := -1::bigint;
    v_page bigint;
BEGIN
    PERFORM _dg_not_null(p_any_tenant IS NOT NULL, 'any_tenant');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    PERFORM _dg_opt_id(p_thread_id, 'thread_id');
    PERFORM _dg_count(p_limit, 'limit', 100000);
    v_page := (_dg_limits()).max_page_bytes;
    IF p_after IS NOT NULL THEN
        SELECT coalesce(a.open_since, a.entry_id),
               CASE WHEN a.list_after IS NULL AND a.mode = 'interrupt' THEN 1 ELSE 2 END,
               coalesce(a.list_after, a.entry_id), a.list_after IS NOT NULL, a.entry_id
          INTO v_since, v_rank, v_anchor, v_behind, v_id
          FROM queue_entries a
         WHERE a.entry_id = p_after AND (p_any_tenant OR a.tenant IS NOT DISTINCT FROM p_tenant);
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    RETURN QUERY
    SELECT x.entry_id, x.tenant, x.thread_id, x.key, x.input, x.mode, x.max_attempts,
           x.attempts, x.admitted, x.thread_deleted, x.submitted_at, x.lease_holder,
           x.lease_expires_at, x.outcome_kind, x.outcome_detail, x.closed_at, x.closed_at_seq,
           x.not_before, x.retry_of, x.priority, x.kind
      FROM (SELECT r.*, a.attempts,
                   pg_catalog.sum(r.size + pg_catalog.octet_length(a.attempts::text))
                       OVER (ORDER BY r.n ROWS UNBOUNDED PRECEDING)
                   - (r.size + pg_catalog.octet_length(a.attempts::text)) AS before_bytes
              FROM (SELECT e.entry_id, e.tenant, e.thread_id::text AS thread_id, e.key,
                           e.input, e.mode, e.max_attempts, e.admitted,
                           e.thread_deleted, e.submitted_at, l.lease_holder,
                           l.lease_until AS lease_expires_at, e.outcome_kind, e.outcome_detail,
                           e.closed_at, e.closed_at_seq, e.not_before, e.retry_of, e.priority,
                           e.kind,
                           pg_catalog.octet_length(e.input)
                           + coalesce(pg_catalog.octet_length(e.key), 0) AS size,
                           pg_catalog.row_number() OVER (ORDER BY e.k1, e.k2, e.k3, e.k4,
                                                                  e.k5) AS n
                      FROM (SELECT e.*, coalesce(e.open_since, e.entry_id) AS k1,
                                   CASE WHEN e.list_after IS NULL AND e.mode = 'interrupt'
                                        THEN 1 ELSE 2 END AS k2,
                                   coalesce(e.list_after, e.entry_id) AS k3,
                                   e.list_after IS NOT NULL AS k4, e.entry_id AS k5
                              FROM queue_entries e
                             WHERE e.outcome_kind IS NULL
                               AND (p_thread_id IS NULL OR e.thread_id = p_thread_id)
                               AND (p_any_tenant OR e.tenant IS NOT DISTINCT FROM p_tenant)
                               AND coalesce(e.open_since, e.entry_id) >= v_since
                               AND (coalesce(e.open_since, e.entry_id),
                                    CASE WHEN e.list_after IS NULL AND e.mode = 'interrupt'
                                         THEN 1 ELSE 2 END,
                                    coalesce(e.list_after, e.entry_id),
                                    e.list_after IS NOT NULL, e.entry_id)
                                   > (v_since, v_rank, v_anchor, v_behind, v_id)
                             ORDER BY k1, k2, k3, k4, k5
                             LIMIT p_limit) e
                      -- The page's leases, from their threads' rows (migrations 0017, 0018).
                      LEFT JOIN threads l
                        ON l.thread_id = e.thread_id AND l.lease_entry_id = e.entry_id) r
             CROSS JOIN LATERAL _dg_attempts(r.entry_id) a) x
     WHERE x.before_bytes < v_page
     ORDER BY x.n;
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
         FOR UPDATE SKIP LOCKED),
         gone AS (
             DELETE FROM queue_entries d USING c WHERE d.entry_id = c.entry_id
             RETURNING d.entry_id),
         -- Their attempts with them (an attempt never outlives its entry; D224: no foreign
         -- key deletes them).
         attempts AS (
             DELETE FROM queue_attempts a USING gone WHERE a.entry_id = gone.entry_id)
    SELECT pg_catalog.count(*)::integer INTO v_removed FROM gone;
    RETURN QUERY SELECT v_removed;
END;
$$;
