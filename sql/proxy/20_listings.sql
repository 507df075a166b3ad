-- Listings on a partition proxy (SPEC §16.1: listings fan out and merge, paged with one cursor
-- read as a position on every partition). A listing over every partition fails whole when one
-- is down, with a ProcessingError naming the partitions that are (_dg_fan_out_failed).

-- _dg_down_partitions(): the partitions that cannot be reached now (each asked in turn).
CREATE OR REPLACE FUNCTION _dg_down_partitions() RETURNS integer[]
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_down integer[] := '{}';
BEGIN
    FOR p IN 0 .. _dg_partitions() - 1 LOOP
        BEGIN
            PERFORM _dg_on_page_bytes_v1(p);
        EXCEPTION WHEN OTHERS THEN
            v_down := v_down || p;
        END;
    END LOOP;
    RETURN v_down;
END;
$$;

-- _dg_fan_out_failed(what, error): re-raise a fan-out's failure: DG errors unchanged (the caller
-- re-raises those itself), else ProcessingError (58000) naming the partitions that are down.
CREATE OR REPLACE FUNCTION _dg_fan_out_failed(p_what text, p_error text) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_down integer[] := _dg_down_partitions();
BEGIN
    RAISE EXCEPTION '% needs every partition and partition(s) % are unavailable: %', p_what,
        pg_catalog.array_to_string(v_down, ', '), p_error USING ERRCODE = '58000';
END;
$$;

-- dg_open_entries_v1 on a proxy: one thread's on its partition; every thread's merged from the
-- partitions' dg_open_entries_at_v1 after the listing place of p_after (D65; read on p_after's
-- partition, dg_queue_position_v1), in place order (list_since, list_rank, list_anchor,
-- list_behind, entry id), at most p_limit rows and max_page_bytes. Places are fixed at submit
-- and entry ids unique store-wide, so every partition's entries fall in one order that never
-- moves: a walk continued with p_after = the last id returned never skips an entry open
-- throughout it and never repeats one, however entries close between pages (SPEC §16.2
-- amends only the order of threads on different partitions: by their opening entry's id,
-- which increases store-wide only within a partition).
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
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_since bigint;
    v_rank integer;
    v_anchor bigint;
    v_behind boolean;
    v_id bigint;
BEGIN
    IF p_thread_id IS NOT NULL THEN
        RETURN QUERY SELECT * FROM _dg_on_open_entries_v1(_dg_thread_part(p_thread_id),
                                 p_any_tenant, p_tenant, p_thread_id, p_after, p_limit);
        RETURN;
    END IF;
    IF p_after IS NOT NULL THEN
        SELECT x.list_since, x.list_rank, x.list_anchor, x.list_behind, x.entry_id
          INTO v_since, v_rank, v_anchor, v_behind, v_id
          FROM _dg_on_queue_position_v1(_dg_entry_part(p_after), p_after, p_any_tenant,
                                        p_tenant) x;
        IF NOT FOUND THEN  -- unknown cursor: no rows, after the partition checked the arguments
            RETURN QUERY SELECT * FROM _dg_on_open_entries_v1(_dg_entry_part(p_after),
                                     p_any_tenant, p_tenant, NULL, p_after, p_limit);
            RETURN;
        END IF;
    END IF;
    BEGIN
        RETURN QUERY
        SELECT x.entry_id, x.tenant, x.thread_id, x.key, x.input, x.mode, x.max_attempts,
               x.attempts, x.admitted, x.thread_deleted, x.submitted_at, x.lease_holder,
               x.lease_expires_at, x.outcome_kind, x.outcome_detail, x.closed_at,
               x.closed_at_seq, x.not_before, x.retry_of, x.priority, x.kind
          FROM (SELECT r.*, pg_catalog.sum(r.row_bytes) OVER (
                           ORDER BY r.list_since, r.list_rank, r.list_anchor, r.list_behind,
                                    r.entry_id
                           ROWS UNBOUNDED PRECEDING) - r.row_bytes AS before_bytes
                  FROM (SELECT a.* FROM _dg_all_open_entries_at_v1(p_any_tenant, p_tenant,
                                            v_since, v_rank, v_anchor, v_behind, v_id,
                                            p_limit) a
                         ORDER BY a.list_since, a.list_rank, a.list_anchor, a.list_behind,
                                  a.entry_id
                         LIMIT p_limit) r) x
         WHERE x.before_bytes < x.page_bytes
         ORDER BY x.list_since, x.list_rank, x.list_anchor, x.list_behind, x.entry_id;
    EXCEPTION WHEN SQLSTATE 'DG000' THEN
        RAISE;
    WHEN OTHERS THEN
        PERFORM _dg_fan_out_failed('open_entries', SQLERRM);
    END;
END;
$$;

-- dg_entries_v1 on a proxy: one thread's on its partition; every thread's merged newest first
-- (entry id descending; p_after is an id bound every partition understands), at most p_limit
-- rows and max_page_bytes (as dg_entries_v1 counts a row).
CREATE OR REPLACE FUNCTION dg_entries_v1(p_state text, p_any_tenant boolean, p_tenant text,
                                         p_thread_id text, p_after bigint, p_limit integer)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint, not_before timestamptz, retry_of bigint,
               priority integer, kind text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_page bigint;
BEGIN
    IF p_thread_id IS NOT NULL THEN
        RETURN QUERY SELECT * FROM _dg_on_entries_v1(_dg_thread_part(p_thread_id), p_state,
                                 p_any_tenant, p_tenant, p_thread_id, p_after, p_limit);
        RETURN;
    END IF;
    BEGIN
        v_page := _dg_on_page_bytes_v1(0);
        RETURN QUERY
        SELECT x.entry_id, x.tenant, x.thread_id, x.key, x.input, x.mode, x.max_attempts,
               x.attempts, x.admitted, x.thread_deleted, x.submitted_at, x.lease_holder,
               x.lease_expires_at, x.outcome_kind, x.outcome_detail, x.closed_at,
               x.closed_at_seq, x.not_before, x.retry_of, x.priority, x.kind
          FROM (SELECT r.*, pg_catalog.sum(r.size) OVER (ORDER BY r.entry_id DESC
                           ROWS UNBOUNDED PRECEDING) - r.size AS before_bytes
                  FROM (SELECT a.*, pg_catalog.octet_length(a.input)
                               + pg_catalog.octet_length(a.attempts::text)
                               + coalesce(pg_catalog.octet_length(a.key), 0)
                               + coalesce(pg_catalog.octet_length(a.outcome_detail), 0) AS size
                          FROM _dg_all_entries_v1(p_state, p_any_tenant, p_tenant, NULL,
                                                  p_after, p_limit) a
                         ORDER BY a.entry_id DESC
                         LIMIT p_limit) r) x
         WHERE x.before_bytes < v_page
         ORDER BY x.entry_id DESC;
    EXCEPTION WHEN SQLSTATE 'DG000' THEN
        RAISE;
    WHEN OTHERS THEN
        PERFORM _dg_fan_out_failed('entries', SQLERRM);
    END;
END;
$$;

-- dg_threads_v1 on a proxy: every partition's threads after p_after, merged in id byte order,
-- at most p_limit.
CREATE OR REPLACE FUNCTION dg_threads_v1(p_after text, p_limit integer)
RETURNS TABLE (thread_id text, parent_thread_id text, head_id text, last_seq bigint,
               created_at timestamptz, updated_at timestamptz, claim_holder text,
               claim_expires_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY
    SELECT a.* FROM _dg_all_threads_v1(p_after, p_limit) a
     ORDER BY a.thread_id COLLATE "C" LIMIT p_limit;
EXCEPTION WHEN SQLSTATE 'DG000' THEN
    RAISE;
WHEN OTHERS THEN
    PERFORM _dg_fan_out_failed('threads', SQLERRM);
END;
$$;

-- dg_queue_stats_v1 on a proxy: the partitions' counts summed, the oldest waiting age the
-- greatest, the waiting counts by kind summed kind by kind.
CREATE OR REPLACE FUNCTION dg_queue_stats_v1(p_any_tenant boolean, p_tenant text)
RETURNS TABLE (open bigint, running bigint, completed bigint, failed bigint, cancelled bigint,
               interrupted bigint, oldest_waiting_age interval, waiting_by_kind json)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY
    WITH parts AS MATERIALIZED (
        SELECT * FROM _dg_all_queue_stats_v1(p_any_tenant, p_tenant)
    ), kinds AS (
        SELECT coalesce(pg_catalog.json_object_agg(k.kind, k.n ORDER BY k.kind COLLATE "C"),
                        '{}'::json) AS by_kind
          FROM (SELECT e.key AS kind, pg_catalog.sum((e.value::text)::bigint) AS n
                  FROM parts a CROSS JOIN LATERAL pg_catalog.json_each(a.waiting_by_kind) e
                 GROUP BY e.key) k
    )
    SELECT pg_catalog.sum(a.open)::bigint, pg_catalog.sum(a.running)::bigint,
           pg_catalog.sum(a.completed)::bigint, pg_catalog.sum(a.failed)::bigint,
           pg_catalog.sum(a.cancelled)::bigint, pg_catalog.sum(a.interrupted)::bigint,
           pg_catalog.max(a.oldest_waiting_age), (SELECT k.by_kind FROM kinds k)
      FROM parts a;
EXCEPTION WHEN SQLSTATE 'DG000' THEN
    RAISE;
WHEN OTHERS THEN
    PERFORM _dg_fan_out_failed('stats', SQLERRM);
END;
$$;
