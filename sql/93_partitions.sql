-- What a PL/Proxy partition proxy (SPEC §16, docs/scaling.md, sql/proxy/) asks of each partition
-- besides the calls it routes unchanged: enough to take at most one lease store-wide under
-- limits counted store-wide, to page the open entries by their fixed listing places, and to
-- check and undo a submit_many spanning partitions. A store that is not a partition never calls
-- them; they read, lock and write nothing the routed calls do not.

-- dg_lease_peek_v1: the head of the thread dg_lease_v1 would try first, without locking or
-- waiting: the first head in lease order (SPEC §15: priority, highest first, then entry id) of
-- the wanted tenant (p_any_tenant, or tenant IS NOT DISTINCT FROM p_tenant) and of a kind in
-- p_kinds (NULL: any kind) among threads whose lease is absent or expired, with its submission
-- time and head_priority_key (minus its priority). Concurrency limits are not looked at (the
-- lease itself enforces them). No row when none waits. A hint (another worker can take it the
-- next moment): the proxy sends it to every partition at once and leases on the one with the
-- first head. `limited`: whether the partition has concurrency limits (then the proxy counts
-- live leases store-wide before it leases, D142). Raises DG000. (SPEC §15 change: p_kinds and
-- head_priority_key added; issue 28: limited added.)
CREATE OR REPLACE FUNCTION dg_lease_peek_v1(p_any_tenant boolean, p_tenant text,
                                            p_kinds text[] DEFAULT NULL)
RETURNS TABLE (head_entry_id bigint, submitted_at timestamptz, head_priority_key integer,
               limited boolean)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz;
BEGIN
    PERFORM _dg_not_null(p_any_tenant IS NOT NULL, 'any_tenant');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    IF p_kinds IS NOT NULL THEN
        PERFORM _dg_kinds(p_kinds, 'kinds');
    END IF;
    v_now := store_now();
    RETURN QUERY
    SELECT h.head_entry_id, e.submitted_at, h.head_priority_key,
           EXISTS (SELECT 1 FROM queue_limits l)
      FROM (SELECT x.head_entry_id, x.head_priority_key FROM (
                (SELECT q.head_entry_id, q.head_priority_key FROM threads q
                  WHERE q.head_entry_id IS NOT NULL AND q.lease_expires_at IS NULL
                    AND (p_any_tenant OR q.head_tenant IS NOT DISTINCT FROM p_tenant)
                    AND (p_kinds IS NULL OR q.head_kind = ANY (p_kinds))
                  ORDER BY q.head_priority_key, q.head_entry_id LIMIT 1)
                UNION ALL
                (SELECT q.head_entry_id, q.head_priority_key FROM _dg_due_threads(v_now) q
                  WHERE q.head_entry_id IS NOT NULL
                    AND (p_any_tenant OR q.head_tenant IS NOT DISTINCT FROM p_tenant)
                    AND (p_kinds IS NULL OR q.head_kind = ANY (p_kinds))
                  ORDER BY q.head_priority_key + 0, q.head_entry_id + 0 LIMIT 1)) x
             ORDER BY x.head_priority_key, x.head_entry_id LIMIT 1) h
      JOIN queue_entries e ON e.entry_id = h.head_entry_id;
END;
$$;

-- dg_queue_position_v1: the fixed listing place (D65, migrations/0009.listing_place.sql) of
-- entry p_entry_id, as dg_open_entries_v1 reads it for p_after: (list_since: the entry that
-- opened its thread's stretch of open entries, list_rank: 1 for an INTERRUPT not placed behind
-- another entry, else 2, list_anchor, list_behind, entry_id). Places are written once, at
-- submit, and entry ids are unique store-wide, so the places of every partition are one order
-- that never moves: the proxy merges pages by it. No row when the entry is unknown, reclaimed
-- or not the wanted tenant's (open or closed, its place stays). Raises DG000.
-- (Issue 28: the place replaced (queue_head, queue_rank), which moved as heads closed.)
CREATE OR REPLACE FUNCTION dg_queue_position_v1(p_entry_id bigint, p_any_tenant boolean,
                                                p_tenant text)
RETURNS TABLE (list_since bigint, list_rank integer, list_anchor bigint, list_behind boolean,
               entry_id bigint)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _dg_not_null(p_entry_id IS NOT NULL, 'entry_id');
    PERFORM _dg_not_null(p_any_tenant IS NOT NULL, 'any_tenant');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    RETURN QUERY
    SELECT coalesce(a.open_since, a.entry_id),
           CASE WHEN a.list_after IS NULL AND a.mode = 'interrupt' THEN 1 ELSE 2 END,
           coalesce(a.list_after, a.entry_id), a.list_after IS NOT NULL, a.entry_id
      FROM queue_entries a
     WHERE a.entry_id = p_entry_id AND (p_any_tenant OR a.tenant IS NOT DISTINCT FROM p_tenant);
END;
$$;

-- dg_open_entries_at_v1: dg_open_entries_v1 over every thread (its order, its filter, its
-- page bound), after the listing place (p_since, p_rank, p_anchor, p_behind, p_id) as
-- dg_queue_position_v1 returns it instead of after an entry (all five NULL: from the first),
-- each row with its place and its size as the page bound counts it (row_bytes), and the
-- partition's max_page_bytes (page_bytes), so the proxy can merge the partitions' pages in one
-- order under one bound. Reads down queue_entries_listing_idx as dg_open_entries_v1 does. At
-- most p_limit (1..100000) rows and max_page_bytes, at least one when one exists. Raises DG000.
-- (Issue 28: after a listing place, no longer after (queue_head, queue_rank, id).)
CREATE OR REPLACE FUNCTION dg_open_entries_at_v1(p_any_tenant boolean, p_tenant text,
                                                 p_since bigint, p_rank integer,
                                                 p_anchor bigint, p_behind boolean,
                                                 p_id bigint, p_limit integer)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint, not_before timestamptz, retry_of bigint,
               priority integer, kind text,
               list_since bigint, list_rank integer, list_anchor bigint, list_behind boolean,
               row_bytes bigint, page_bytes bigint)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_page bigint;
BEGIN
    PERFORM _dg_not_null(p_any_tenant IS NOT NULL, 'any_tenant');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    PERFORM _dg_count(p_limit, 'limit', 100000);
    PERFORM _dg_check((p_since IS NULL) = (p_rank IS NULL)
                      AND (p_since IS NULL) = (p_anchor IS NULL)
                      AND (p_since IS NULL) = (p_behind IS NULL)
                      AND (p_since IS NULL) = (p_id IS NULL),
                      'since, rank, anchor, behind and id must be all NULL or all given');
    IF p_since IS NULL THEN  -- before every place (ids and ranks are positive)
        p_since := -1;
        p_rank := -1;
        p_anchor := -1;
        p_behind := false;
        p_id := -1;
    END IF;
    v_page := (_dg_limits()).max_page_bytes;
    RETURN QUERY
    SELECT x.entry_id, x.tenant, x.thread_id, x.key, x.input, x.mode, x.max_attempts,
           x.attempts, x.admitted, x.thread_deleted, x.submitted_at, x.lease_holder,
           x.lease_expires_at, x.outcome_kind, x.outcome_detail, x.closed_at, x.closed_at_seq,
           x.not_before, x.retry_of, x.priority, x.kind, x.k1, x.k2, x.k3, x.k4, x.row_bytes,
           v_page
      FROM (SELECT r.*, a.attempts,
                   (r.size + pg_catalog.octet_length(a.attempts::text))::bigint AS row_bytes,
                   pg_catalog.sum(r.size + pg_catalog.octet_length(a.attempts::text))
                       OVER (ORDER BY r.k1, r.k2, r.k3, r.k4, r.entry_id ROWS UNBOUNDED PRECEDING)
                   - (r.size + pg_catalog.octet_length(a.attempts::text)) AS before_bytes
              FROM (SELECT e.entry_id, e.tenant, e.thread_id::text AS thread_id, e.key,
                           e.input, e.mode, e.max_attempts, e.admitted,
                           e.thread_deleted, e.submitted_at, l.lease_holder,
                           l.lease_until AS lease_expires_at, e.outcome_kind, e.outcome_detail,
                           e.closed_at, e.closed_at_seq, e.not_before, e.retry_of, e.priority,
                           e.kind, e.k1, e.k2, e.k3, e.k4,
                           pg_catalog.octet_length(e.input)
                           + coalesce(pg_catalog.octet_length(e.key), 0) AS size
                      FROM (SELECT e.*, coalesce(e.open_since, e.entry_id) AS k1,
                                   CASE WHEN e.list_after IS NULL AND e.mode = 'interrupt'
                                        THEN 1 ELSE 2 END AS k2,
                                   coalesce(e.list_after, e.entry_id) AS k3,
                                   e.list_after IS NOT NULL AS k4
                              FROM queue_entries e
                             WHERE e.outcome_kind IS NULL
                               AND (p_any_tenant OR e.tenant IS NOT DISTINCT FROM p_tenant)
                               AND coalesce(e.open_since, e.entry_id) >= p_since
                               AND (coalesce(e.open_since, e.entry_id),
                                    CASE WHEN e.list_after IS NULL AND e.mode = 'interrupt'
                                         THEN 1 ELSE 2 END,
                                    coalesce(e.list_after, e.entry_id),
                                    e.list_after IS NOT NULL, e.entry_id)
                                   > (p_since, p_rank, p_anchor, p_behind, p_id)
                             ORDER BY k1, k2, k3, k4, e.entry_id
                             LIMIT p_limit) e
                      -- The page's leases, from their threads' rows (migrations 0017, 0018).
                      LEFT JOIN threads l
                        ON l.thread_id = e.thread_id AND l.lease_entry_id = e.entry_id) r
             CROSS JOIN LATERAL _dg_attempts(r.entry_id) a) x
     WHERE x.before_bytes < v_page
     ORDER BY x.k1, x.k2, x.k3, x.k4, x.entry_id;
END;
$$;

-- dg_page_bytes_v1: the partition's max_page_bytes (limits), which bounds a page of the
-- listings; the proxy bounds its merged pages of dg_entries_v1 by it. Raises nothing.
CREATE OR REPLACE FUNCTION dg_page_bytes_v1() RETURNS bigint
LANGUAGE sql STABLE
SET search_path FROM CURRENT
AS $$ SELECT (_dg_limits()).max_page_bytes $$;

-- dg_reclaim_peek_v1: the closed entries dg_reclaim_v1(p_older_than, p_limit) would remove, in
-- its order (closed_at, then entry id), at most p_limit (1..100000); no lock. The proxy merges
-- every partition's list and asks each partition to reclaim exactly its share of the oldest
-- p_batch store-wide. Raises DG000.
CREATE OR REPLACE FUNCTION dg_reclaim_peek_v1(p_older_than interval, p_limit integer)
RETURNS TABLE (closed_at timestamptz, entry_id bigint)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_cutoff timestamptz;
BEGIN
    PERFORM _dg_not_null(p_older_than IS NOT NULL, 'older_than');
    p_older_than := _dg_duration(p_older_than, 'older_than', true);
    PERFORM _dg_count(p_limit, 'batch', 100000);
    v_cutoff := store_now() - p_older_than;
    RETURN QUERY
    SELECT c.closed_at, c.entry_id FROM queue_entries c
     WHERE c.outcome_kind IS NOT NULL AND c.closed_at < v_cutoff
     ORDER BY c.closed_at, c.entry_id
     LIMIT p_limit;
END;
$$;

-- dg_schedule_thread_v1: the thread of the schedule p_name on this partition; no row when it
-- has none. A proxy asks every partition at once (RUN ON ALL), each an index lookup, to find
-- the partition holding a schedule (sql/proxy/40_scheduling.sql). Raises DG000.
CREATE OR REPLACE FUNCTION dg_schedule_thread_v1(p_name text)
RETURNS TABLE (thread_id text)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _dg_id(p_name, 'name');
    RETURN QUERY SELECT s.thread_id::text FROM schedules s WHERE s.name = p_name;
END;
$$;

-- dg_take_schedule_v1: remove the schedule p_name and return its row, under its lock (a fire
-- of it waits, then finds none); no row when there is none. With dg_adopt_schedule_v1, how a
-- proxy moves a schedule to the partition of its new thread (sql/proxy/40_scheduling.sql).
-- Raises DG000.
CREATE OR REPLACE FUNCTION dg_take_schedule_v1(p_name text)
RETURNS TABLE (name text, cron text, timezone text, thread_id text, input text, kind text,
               tenant text, priority integer, max_attempts integer, catch_up boolean,
               paused boolean, created_at timestamptz, last_slot timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _dg_id(p_name, 'name');
    RETURN QUERY
    DELETE FROM schedules s WHERE s.name = p_name
    RETURNING s.name::text, s.cron, s.timezone, s.thread_id::text, s.input, s.kind, s.tenant,
              s.priority, s.max_attempts, s.catch_up, s.paused, s.created_at, s.last_slot;
END;
$$;

-- dg_adopt_schedule_v1: dg_put_schedule_v1 (its checks, its row), then the schedule's paused,
-- created_at and last_slot set as given: a moved schedule keeps them, so no slot it fired
-- before fires again. Raises what dg_put_schedule_v1 raises.
CREATE OR REPLACE FUNCTION dg_adopt_schedule_v1(
    p_name text, p_cron text, p_timezone text, p_thread_id text, p_input text, p_kind text,
    p_tenant text, p_priority integer, p_max_attempts integer, p_catch_up boolean,
    p_paused boolean, p_created_at timestamptz, p_last_slot timestamptz)
RETURNS TABLE (name text, cron text, timezone text, thread_id text, input text, kind text,
               tenant text, priority integer, max_attempts integer, catch_up boolean,
               paused boolean, created_at timestamptz, last_slot timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM dg_put_schedule_v1(p_name, p_cron, p_timezone, p_thread_id, p_input, p_kind,
                               p_tenant, p_priority, p_max_attempts, p_catch_up);
    UPDATE schedules s
       SET paused = coalesce(p_paused, s.paused), created_at = coalesce(p_created_at, s.created_at),
           last_slot = p_last_slot
     WHERE s.name = p_name;
    RETURN QUERY SELECT * FROM _dg_schedule_row(p_name);
END;
$$;

-- dg_submit_many_check_v1: whether dg_submit_many_v1 with these arguments would be accepted
-- now, writing nothing: the batch is submitted in a subtransaction that is then rolled back
-- (entry ids it drew stay unused: a sequence does not roll back). Raises what
-- dg_submit_many_v1 would raise; else returns nothing. The first phase of a proxy's
-- submit_many spanning partitions (sql/proxy/30_sweeps.sql): every partition's group is
-- checked before any is written.
CREATE OR REPLACE FUNCTION dg_submit_many_check_v1(
    p_thread_ids text[], p_inputs text[], p_tenants text[], p_keys text[], p_modes text[],
    p_max_attempts integer[], p_priorities integer[], p_kinds text[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    BEGIN
        PERFORM 1 FROM dg_submit_many_v1(p_thread_ids, p_inputs, p_tenants, p_keys, p_modes,
                                         p_max_attempts, p_priorities, p_kinds);
        RAISE EXCEPTION 'checked' USING ERRCODE = 'DGZ01';  -- undoes the subtransaction
    EXCEPTION WHEN SQLSTATE 'DGZ01' THEN
        NULL;
    END;
END;
$$;

-- dg_submit_many_undo_v1: undo the entries p_entry_ids that a dg_submit_many_v1 just wrote
-- (its tickets with existing = false), newest first, each under its thread's queue lock: an
-- entry still open, not leased and never attempted is deleted (its key is free again) and the
-- entries its INTERRUPT closed (interrupted by it, no attempt recorded) are reopened, as a
-- rollback of the batch would leave them. Returns the ids it could not undo: gone, closed, or
-- leased since (a worker took it between the write and the undo), which stay as they are. The compensation of
-- a proxy's submit_many whose write on a later partition was refused (sql/proxy/30_sweeps.sql).
-- Raises DG000.
CREATE OR REPLACE FUNCTION dg_submit_many_undo_v1(p_entry_ids bigint[])
RETURNS TABLE (entry_id bigint)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_id bigint;
    v_thread text;
    e queue_entries;
BEGIN
    PERFORM _dg_not_null(p_entry_ids IS NOT NULL, 'entry_ids');
    PERFORM _dg_check(pg_catalog.cardinality(p_entry_ids) <= 10000,
                      'entry_ids must number at most 10000');
    FOR v_id IN SELECT DISTINCT u.id FROM pg_catalog.unnest(p_entry_ids) u(id)
                 WHERE u.id IS NOT NULL ORDER BY 1 DESC LOOP
        SELECT q.thread_id INTO v_thread FROM queue_entries q WHERE q.entry_id = v_id;
        IF NOT FOUND THEN
            RETURN QUERY SELECT v_id;
            CONTINUE;
        END IF;
        PERFORM _dg_lock_thread(v_thread);
        -- Its lease is its thread row's (migrations 0017, 0018), its attempts queue_attempts'.
        SELECT * INTO e FROM queue_entries q WHERE q.entry_id = v_id FOR UPDATE;
        IF e.outcome_kind IS NOT NULL
           OR EXISTS (SELECT 1 FROM threads t
                       WHERE t.thread_id = v_thread AND t.lease_entry_id = v_id)
           OR EXISTS (SELECT 1 FROM queue_attempts a WHERE a.entry_id = v_id) THEN
            RETURN QUERY SELECT v_id;
            CONTINUE;
        END IF;
        DELETE FROM queue_entries q WHERE q.entry_id = v_id;
        UPDATE queue_entries o
           SET outcome_kind = NULL, outcome_detail = NULL, closed_at = NULL,
               closed_at_seq = NULL
         WHERE o.thread_id = v_thread AND o.outcome_kind = 'interrupted'
           AND o.outcome_detail = v_id::text
           AND NOT EXISTS (SELECT 1 FROM queue_attempts a WHERE a.entry_id = o.entry_id);
        PERFORM _dg_refresh_queue_thread(v_thread);
    END LOOP;
END;
$$;

-- dg_limit_usage_v1: for each concurrency limit of the partition, its live leases here (a lease
-- of that tenant or kind on an open entry, not expired by store-now), at most max_leases of
-- them. A proxy sums them over every partition under its own lock and passes the sums to the
-- lease (dg_lease_limited_v1), so a limit holds store-wide (D142). Raises nothing.
CREATE OR REPLACE FUNCTION dg_limit_usage_v1()
RETURNS TABLE (scope text, name text, live bigint)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := store_now();
BEGIN
    RETURN QUERY
    SELECT l.scope, l.name,
           CASE WHEN l.scope = 'tenant' THEN
               (SELECT pg_catalog.count(*) FROM (SELECT 1 FROM threads q
                 WHERE q.lease_tenant = l.name AND q.lease_until > v_now
                 LIMIT l.max_leases) x)
           ELSE
               (SELECT pg_catalog.count(*) FROM (SELECT 1 FROM threads q
                 WHERE q.lease_kind = l.name AND q.lease_until > v_now
                 LIMIT l.max_leases) x)
           END
      FROM queue_limits l;
END;
$$;

-- _dg_limit_live(live): DG000 unless live is NULL or the shape the limit check reads:
-- {"tenant": {name: n}, "kind": {name: n}} (either key may be missing), every n a non-negative
-- integer. The proxy writes it; a caller in another language gets the check here.
CREATE OR REPLACE FUNCTION _dg_limit_live(p_live json) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_scope text;
    v_counts json;
    v_name text;
    v_count json;
BEGIN
    IF p_live IS NULL THEN
        RETURN;
    END IF;
    IF pg_catalog.json_typeof(p_live) <> 'object' THEN
        RAISE EXCEPTION 'p_live must be a JSON object' USING ERRCODE = 'DG000';
    END IF;
    FOR v_scope, v_counts IN SELECT * FROM pg_catalog.json_each(p_live) LOOP
        IF v_scope NOT IN ('tenant', 'kind') OR pg_catalog.json_typeof(v_counts) <> 'object' THEN
            RAISE EXCEPTION 'p_live must map "tenant" and "kind" to objects, got key %', v_scope
                USING ERRCODE = 'DG000';
        END IF;
        FOR v_name, v_count IN SELECT * FROM pg_catalog.json_each(v_counts) LOOP
            IF pg_catalog.json_typeof(v_count) <> 'number'
               OR (v_count::text) !~ '^[0-9]{1,18}$' THEN
                RAISE EXCEPTION 'p_live.%.% must be a non-negative integer', v_scope, v_name
                    USING ERRCODE = 'DG000';
            END IF;
        END LOOP;
    END LOOP;
END;
$$;

-- dg_lease_limited_v1: dg_lease_v1 with the concurrency limits counted store-wide: p_live
-- ({"tenant": {name: n}, "kind": {name: n}}, this partition's own leases included) is set as the
-- transaction's dg.limit_live, which _dg_limit_full reads (it takes the greater of that and
-- its own count). Raises DG000 for a p_live of another shape (_dg_limit_live), else what
-- dg_lease_v1 raises.
CREATE OR REPLACE FUNCTION dg_lease_limited_v1(
    p_holder text, p_ttl interval, p_any_tenant boolean, p_tenant text, p_run_id text,
    p_kinds text[], p_live json)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint,
               token bigint, holder text, expires_at timestamptz, ttl interval,
               attempt_kind text, attempt_number integer,
               not_before timestamptz, retry_of bigint, priority integer, kind text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    PERFORM _dg_limit_live(p_live);
    PERFORM pg_catalog.set_config('dg.limit_live', coalesce(p_live::text, ''), true);
    RETURN QUERY SELECT * FROM dg_lease_v1(p_holder, p_ttl, p_any_tenant, p_tenant, p_run_id,
                                           p_kinds);
    PERFORM pg_catalog.set_config('dg.limit_live', '', true);
END;
$$;

-- dg_begin_attempt_limited_v1: dg_begin_attempt_v1 with the limits counted store-wide, as
-- dg_lease_limited_v1 (deprecated since 0.2.0 with dg_begin_attempt_v1: use
-- dg_begin_attempt_limited_v2). Raises DG000 for a p_live of another shape, else what
-- dg_begin_attempt_v1 raises.
CREATE OR REPLACE FUNCTION dg_begin_attempt_limited_v1(
    p_holder text, p_ttl interval, p_claim_ttl interval, p_any_tenant boolean, p_tenant text,
    p_run_id text, p_kinds text[], p_live json)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint,
               token bigint, holder text, expires_at timestamptz, ttl interval,
               attempt_kind text, attempt_number integer,
               claim_token bigint, claim_expires_at timestamptz, claim_ttl interval,
               latest_checkpoint_id text, latest_parent_id text, latest_run_id text,
               latest_state text, latest_metadata text, latest_next text[],
               latest_created_at timestamptz, latest_committed_at timestamptz,
               latest_seq bigint, latest_writes json,
               not_before timestamptz, retry_of bigint,
               head_checkpoint_id text, head_parent_id text, head_run_id text,
               head_state text, head_metadata text, head_next text[],
               head_created_at timestamptz, head_committed_at timestamptz,
               head_seq bigint, head_writes json,
               priority integer, kind text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    PERFORM _dg_limit_live(p_live);
    PERFORM pg_catalog.set_config('dg.limit_live', coalesce(p_live::text, ''), true);
    RETURN QUERY SELECT * FROM dg_begin_attempt_v1(p_holder, p_ttl, p_claim_ttl, p_any_tenant,
                                                   p_tenant, p_run_id, p_kinds);
    PERFORM pg_catalog.set_config('dg.limit_live', '', true);
END;
$$;

-- dg_begin_attempt_limited_v2: dg_begin_attempt_v2 with the limits counted store-wide, as
-- dg_lease_limited_v1 (the proxy's dg_begin_attempt_v2 under limits). Raises DG000 for a p_live
-- of another shape, else what dg_begin_attempt_v2 raises.
CREATE OR REPLACE FUNCTION dg_begin_attempt_limited_v2(
    p_holder text, p_ttl interval, p_claim_ttl interval, p_any_tenant boolean, p_tenant text,
    p_run_id text, p_kinds text[], p_live json)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint,
               token bigint, holder text, expires_at timestamptz, ttl interval,
               attempt_kind text, attempt_number integer,
               claim_token bigint, claim_expires_at timestamptz, claim_ttl interval,
               latest_checkpoint_id text, latest_parent_id text, latest_run_id text,
               latest_state text, latest_metadata text, latest_next text[],
               latest_created_at timestamptz, latest_committed_at timestamptz,
               latest_seq bigint, latest_writes json,
               not_before timestamptz, retry_of bigint,
               head_checkpoint_id text, head_parent_id text, head_run_id text,
               head_state text, head_metadata text, head_next text[],
               head_created_at timestamptz, head_committed_at timestamptz,
               head_seq bigint, head_writes json,
               priority integer, kind text, plan text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    PERFORM _dg_limit_live(p_live);
    PERFORM pg_catalog.set_config('dg.limit_live', coalesce(p_live::text, ''), true);
    RETURN QUERY SELECT * FROM dg_begin_attempt_v2(p_holder, p_ttl, p_claim_ttl, p_any_tenant,
                                                   p_tenant, p_run_id, p_kinds);
    PERFORM pg_catalog.set_config('dg.limit_live', '', true);
END;
$$;
