-- What a PL/Proxy partition proxy (SPEC §16, docs/scaling.md, sql/proxy/) asks of each partition
-- besides the calls it routes unchanged: enough to take at most one lease store-wide and to page
-- the open entries with one position per partition. A store that is not a partition never calls
-- them; they read, lock and write nothing the routed calls do not.

-- dg_lease_peek_v1: the head of the thread dg_lease_v1 would try first, without locking or
-- waiting: the first head in lease order (SPEC §15: priority, highest first, then entry id) of
-- the wanted tenant (p_any_tenant, or tenant IS NOT DISTINCT FROM p_tenant) and of a kind in
-- p_kinds (NULL: any kind) among threads whose lease is absent or expired, with its submission
-- time and head_priority_key (minus its priority). Concurrency limits are not looked at (the
-- lease itself enforces them). No row when none waits. A hint (another worker can take it the
-- next moment): the proxy sends it to every partition at once and leases on the one with the
-- first head. Raises DG000. (SPEC §15 change: p_kinds and head_priority_key added.)
DROP FUNCTION IF EXISTS dg_lease_peek_v1(boolean, text);
CREATE OR REPLACE FUNCTION dg_lease_peek_v1(p_any_tenant boolean, p_tenant text,
                                            p_kinds text[] DEFAULT NULL)
RETURNS TABLE (head_entry_id bigint, submitted_at timestamptz, head_priority_key integer)
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
    SELECT h.head_entry_id, e.submitted_at, h.head_priority_key
      FROM (SELECT x.head_entry_id, x.head_priority_key FROM (
                (SELECT q.head_entry_id, q.head_priority_key FROM queue_threads q
                  WHERE q.head_entry_id IS NOT NULL AND q.lease_expires_at IS NULL
                    AND (p_any_tenant OR q.head_tenant IS NOT DISTINCT FROM p_tenant)
                    AND (p_kinds IS NULL OR q.head_kind = ANY (p_kinds))
                  ORDER BY q.head_priority_key, q.head_entry_id LIMIT 1)
                UNION ALL
                (SELECT q.head_entry_id, q.head_priority_key FROM queue_threads q
                  WHERE q.lease_expires_at <= v_now AND q.head_entry_id IS NOT NULL
                    AND (p_any_tenant OR q.head_tenant IS NOT DISTINCT FROM p_tenant)
                    AND (p_kinds IS NULL OR q.head_kind = ANY (p_kinds))
                  ORDER BY q.head_priority_key + 0, q.head_entry_id + 0 LIMIT 1)) x
             ORDER BY x.head_priority_key, x.head_entry_id LIMIT 1) h
      JOIN queue_entries e ON e.entry_id = h.head_entry_id;
END;
$$;

-- dg_queue_position_v1: the place of entry p_entry_id in dg_open_entries_v1's order (its
-- thread's current head, its queue rank, its id), as dg_open_entries_v1 computes it for p_after;
-- no row when the entry is unknown, reclaimed or not the wanted tenant's. Raises DG000.
CREATE OR REPLACE FUNCTION dg_queue_position_v1(p_entry_id bigint, p_any_tenant boolean,
                                                p_tenant text)
RETURNS TABLE (queue_head bigint, queue_rank smallint, entry_id bigint)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _dg_not_null(p_entry_id IS NOT NULL, 'entry_id');
    PERFORM _dg_not_null(p_any_tenant IS NOT NULL, 'any_tenant');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    RETURN QUERY
    SELECT coalesce(q.head_entry_id, a.entry_id), a.queue_rank, a.entry_id
      FROM queue_entries a LEFT JOIN queue_threads q ON q.thread_id = a.thread_id
     WHERE a.entry_id = p_entry_id AND (p_any_tenant OR a.tenant IS NOT DISTINCT FROM p_tenant);
END;
$$;

-- dg_open_entries_at_v1: dg_open_entries_v1 over every thread, after the position (p_head,
-- p_rank, p_id) instead of after an entry (all three NULL: from the first), each row with its
-- position (queue_head, queue_rank) and its size as the page bound counts it (row_bytes), and
-- the partition's max_page_bytes (page_bytes), so the proxy can merge the partitions' pages in
-- one order under one bound. At most p_limit (1..100000) rows and max_page_bytes, at least one
-- when one exists. Raises DG000.
-- (SPEC §15: the row gained priority and kind before queue_head.)
DROP FUNCTION IF EXISTS dg_open_entries_at_v1(boolean, text, bigint, smallint, bigint, integer);
CREATE OR REPLACE FUNCTION dg_open_entries_at_v1(p_any_tenant boolean, p_tenant text,
                                                 p_head bigint, p_rank smallint, p_id bigint,
                                                 p_limit integer)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint, not_before timestamptz, retry_of bigint,
               priority integer, kind text,
               queue_head bigint, queue_rank smallint, row_bytes bigint, page_bytes bigint)
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
    PERFORM _dg_check((p_head IS NULL) = (p_rank IS NULL) AND (p_head IS NULL) = (p_id IS NULL),
                      'head, rank and id must be all NULL or all given');
    v_page := (_dg_limits()).max_page_bytes;
    RETURN QUERY
    SELECT x.entry_id, x.tenant, x.thread_id, x.key, x.input, x.mode, x.max_attempts,
           x.attempts, x.admitted, x.thread_deleted, x.submitted_at, x.lease_holder,
           x.lease_expires_at, x.outcome_kind, x.outcome_detail, x.closed_at, x.closed_at_seq,
           x.not_before, x.retry_of, x.priority, x.kind, x.h, x.rank, x.size::bigint, v_page
      FROM (SELECT r.*, pg_catalog.sum(r.size) OVER (ORDER BY r.h, r.rank, r.entry_id
                                          ROWS UNBOUNDED PRECEDING) - r.size AS before_bytes
              FROM (SELECT e.entry_id, e.tenant, e.thread_id::text AS thread_id, e.key,
                           e.input, e.mode, e.max_attempts, a.attempts, e.admitted,
                           e.thread_deleted, e.submitted_at, e.lease_holder,
                           e.lease_expires_at, e.outcome_kind, e.outcome_detail, e.closed_at,
                           e.closed_at_seq, e.not_before, e.retry_of, e.priority, e.kind,
                           q.head_entry_id AS h, e.queue_rank AS rank,
                           pg_catalog.octet_length(e.input) + pg_catalog.octet_length(a.attempts::text)
                           + coalesce(pg_catalog.octet_length(e.key), 0) AS size
                      FROM queue_threads q
                      JOIN queue_entries e ON e.thread_id = q.thread_id
                                          AND e.outcome_kind IS NULL
                     CROSS JOIN LATERAL _dg_attempts(e.entry_id) a
                     WHERE q.head_entry_id IS NOT NULL
                       AND (p_any_tenant OR e.tenant IS NOT DISTINCT FROM p_tenant)
                       AND (p_head IS NULL
                            OR (q.head_entry_id, e.queue_rank, e.entry_id) > (p_head, p_rank, p_id))
                     ORDER BY q.head_entry_id, e.queue_rank, e.entry_id
                     LIMIT p_limit) r) x
     WHERE x.before_bytes < v_page
     ORDER BY x.h, x.rank, x.entry_id;
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
