-- Sweeps, batches and administration on a partition proxy (SPEC §16.1: sweeps run per
-- partition, each partition's call its own transaction, within the caller's batch bound).

-- dg_reclaim_v1 on a proxy: the oldest p_batch closed entries store-wide (each partition's
-- candidates merged by closed_at, then entry id: dg_reclaim_peek_v1 on every partition at
-- once), each partition then reclaiming exactly its share (its oldest are its share), each its
-- own transaction. At most p_batch in all. Returns the total.
CREATE OR REPLACE FUNCTION dg_reclaim_v1(p_older_than interval, p_batch integer)
RETURNS TABLE (removed integer)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_total integer := 0;
    v_share record;
    v_removed integer;
BEGIN
    FOR v_share IN
        SELECT _dg_entry_part(c.entry_id) AS part, pg_catalog.count(*)::integer AS n
          FROM (SELECT a.entry_id FROM _dg_all_reclaim_peek_v1(p_older_than, p_batch) a
                 ORDER BY a.closed_at, a.entry_id LIMIT p_batch) c
         GROUP BY 1 ORDER BY 1
    LOOP
        SELECT r.removed INTO v_removed
          FROM _dg_on_reclaim_v1(v_share.part, p_older_than, v_share.n) r;
        v_total := v_total + coalesce(v_removed, 0);
    END LOOP;
    RETURN QUERY SELECT v_total;
EXCEPTION WHEN SQLSTATE 'DG000' THEN
    RAISE;
WHEN OTHERS THEN
    PERFORM _dg_fan_out_failed('reclaim', SQLERRM);
END;
$$;

-- dg_prune_batch_v1 on a proxy: one step of prune_all on one partition. The cursor p_after is
-- the proxy's own: NULL (from partition 0's first thread), or the partition number, U+001F,
-- then that partition's cursor (a thread id; empty: from its first thread), as returned in
-- last_thread_id. A partition that is done hands over to the next one with a full
-- threads_seen, so prune_all goes on; threads_seen < p_batch only when the last is done.
CREATE OR REPLACE FUNCTION dg_prune_batch_v1(p_after text, p_batch integer, p_keep_last integer,
                                             p_max_age interval)
RETURNS TABLE (checkpoints_removed bigint, events_removed bigint, threads_seen integer,
               last_thread_id text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_part integer := 0;
    v_after text;
    r record;
BEGIN
    IF p_after IS NOT NULL THEN
        IF p_after !~ ('^[0-9]{1,4}' || pg_catalog.chr(31)) THEN
            RAISE EXCEPTION 'after must be a cursor returned by this proxy''s prune step, got %',
                pg_catalog.quote_literal(p_after) USING ERRCODE = 'DG000';
        END IF;
        v_part := pg_catalog.split_part(p_after, pg_catalog.chr(31), 1)::integer;
        v_after := NULLIF(pg_catalog.substr(p_after,
                                     pg_catalog.strpos(p_after, pg_catalog.chr(31)) + 1), '');
        IF v_part >= _dg_partitions() THEN
            RAISE EXCEPTION 'after names partition %, the store has %', v_part, _dg_partitions()
                USING ERRCODE = 'DG000';
        END IF;
    END IF;
    SELECT * INTO r FROM _dg_on_prune_batch_v1(v_part, v_after, p_batch, p_keep_last, p_max_age);
    IF r.threads_seen < p_batch THEN
        IF v_part + 1 < _dg_partitions() THEN
            RETURN QUERY SELECT r.checkpoints_removed, r.events_removed, p_batch,
                                (v_part + 1)::text || pg_catalog.chr(31);
        ELSE
            RETURN QUERY SELECT r.checkpoints_removed, r.events_removed, r.threads_seen,
                                v_part::text || pg_catalog.chr(31) || coalesce(r.last_thread_id, '');
        END IF;
    ELSE
        RETURN QUERY SELECT r.checkpoints_removed, r.events_removed, r.threads_seen,
                            v_part::text || pg_catalog.chr(31)
                            || coalesce(r.last_thread_id, v_after, '');
    END IF;
END;
$$;

-- dg_delete_runs_v1 on a proxy: on every partition at once (each its own transaction); the
-- total removed.
CREATE OR REPLACE FUNCTION dg_delete_runs_v1(p_run_ids text[])
RETURNS TABLE (removed bigint)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT coalesce(pg_catalog.sum(a.removed), 0)::bigint
                   FROM _dg_all_delete_runs_v1(p_run_ids) a;
EXCEPTION WHEN SQLSTATE 'DG000' THEN
    RAISE;
WHEN OTHERS THEN
    PERFORM _dg_fan_out_failed('delete_runs', SQLERRM);
END;
$$;

-- dg_submit_many_v1 on a proxy: the submissions grouped by their thread's partition, each
-- group one dg_submit_many_v1 there (its own transaction: a failure on one partition leaves the
-- groups already written on others); the tickets in submission order with their ordinals.
-- Arrays that are NULL or of unequal lengths go whole to partition 0, which raises DG000
-- (p_priorities and p_kinds, SPEC §15, may be NULL: the defaults).
CREATE OR REPLACE FUNCTION dg_submit_many_v1(
    p_thread_ids text[], p_inputs text[], p_tenants text[], p_keys text[], p_modes text[],
    p_max_attempts integer[], p_priorities integer[] DEFAULT NULL, p_kinds text[] DEFAULT NULL)
RETURNS TABLE (ordinal integer, entry_id bigint, existing boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    n integer := coalesce(pg_catalog.cardinality(p_thread_ids), 0);
    v_part integer;
    v_idx integer[];
    v_ids bigint[];
    v_existing boolean[];
    r record;
BEGIN
    IF p_thread_ids IS NULL OR p_inputs IS NULL OR p_tenants IS NULL OR p_keys IS NULL
       OR p_modes IS NULL OR p_max_attempts IS NULL OR n = 0 OR n > 10000
       OR pg_catalog.cardinality(p_inputs) <> n OR pg_catalog.cardinality(p_tenants) <> n
       OR pg_catalog.cardinality(p_keys) <> n OR pg_catalog.cardinality(p_modes) <> n
       OR pg_catalog.cardinality(p_max_attempts) <> n
       OR coalesce(pg_catalog.cardinality(p_priorities) <> n, false)
       OR coalesce(pg_catalog.cardinality(p_kinds) <> n, false)
       OR pg_catalog.array_position(p_thread_ids, NULL) IS NOT NULL THEN
        RETURN QUERY SELECT * FROM _dg_on_submit_many_v1(0, p_thread_ids, p_inputs, p_tenants,
                                                          p_keys, p_modes, p_max_attempts,
                                                          p_priorities, p_kinds);
        RETURN;
    END IF;
    FOR v_part, v_idx IN
        SELECT _dg_thread_part(p_thread_ids[i]), pg_catalog.array_agg(i ORDER BY i)
          FROM pg_catalog.generate_series(1, n) i GROUP BY 1 ORDER BY 1
    LOOP
        FOR r IN
            SELECT s.ordinal, s.entry_id, s.existing
              FROM _dg_on_submit_many_v1(v_part,
                       ARRAY(SELECT p_thread_ids[i] FROM pg_catalog.unnest(v_idx) i),
                       ARRAY(SELECT p_inputs[i] FROM pg_catalog.unnest(v_idx) i),
                       ARRAY(SELECT p_tenants[i] FROM pg_catalog.unnest(v_idx) i),
                       ARRAY(SELECT p_keys[i] FROM pg_catalog.unnest(v_idx) i),
                       ARRAY(SELECT p_modes[i] FROM pg_catalog.unnest(v_idx) i),
                       ARRAY(SELECT p_max_attempts[i] FROM pg_catalog.unnest(v_idx) i),
                       CASE WHEN p_priorities IS NOT NULL THEN
                           ARRAY(SELECT p_priorities[i] FROM pg_catalog.unnest(v_idx) i) END,
                       CASE WHEN p_kinds IS NOT NULL THEN
                           ARRAY(SELECT p_kinds[i] FROM pg_catalog.unnest(v_idx) i) END) s
        LOOP
            v_ids[v_idx[r.ordinal]] := r.entry_id;
            v_existing[v_idx[r.ordinal]] := r.existing;
        END LOOP;
    END LOOP;
    RETURN QUERY SELECT i, v_ids[i], v_existing[i] FROM pg_catalog.generate_series(1, n) i;
END;
$$;

-- dg_admin_set_limit_v1 on a proxy: the limit set on every partition (the caller's rights
-- there); the new limits of one of them.
CREATE OR REPLACE FUNCTION dg_admin_set_limit_v1(p_name text, p_value bigint)
RETURNS TABLE (max_value_bytes bigint, max_call_bytes bigint, max_page_bytes bigint)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT a.* FROM _dg_all_admin_set_limit_v1(p_name, p_value) a LIMIT 1;
END;
$$;

-- dg_schema_meta_v1 on a proxy: the proxy's own bookkeeping (kind 'proxy', partitions, the
-- version and functions digest of the partitions it was generated for, its own digest); the
-- one SECURITY DEFINER function of a proxy, so a runtime role reads the table through it.
CREATE OR REPLACE FUNCTION dg_schema_meta_v1() RETURNS TABLE (key text, value text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path FROM CURRENT
AS $$ SELECT m.key, m.value FROM schema_meta m ORDER BY m.key $$;

-- dg_watch_v1 on a proxy: the same watch set on every partition (a listener connected to the
-- partitions hears their notifications; stores opened on a proxy poll instead).
CREATE OR REPLACE FUNCTION dg_watch_v1(p_listener text, p_kinds text[], p_keys text[],
                                       p_ttl interval)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    FOR p IN 0 .. _dg_partitions() - 1 LOOP
        PERFORM _dg_on_watch_v1(p, p_listener, p_kinds, p_keys, p_ttl);
    END LOOP;
END;
$$;
