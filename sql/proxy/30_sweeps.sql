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

-- _dg_submit_group(indexes, the batch's arrays): the arrays of one partition's group
-- (the elements at those 1-based indexes, in that order) as one dg_submit_many_v1 takes them.
CREATE OR REPLACE FUNCTION _dg_submit_group(
    p_idx integer[], p_thread_ids text[], p_inputs text[], p_tenants text[], p_keys text[],
    p_modes text[], p_max_attempts integer[], p_priorities integer[], p_kinds text[],
    OUT thread_ids text[], OUT inputs text[], OUT tenants text[], OUT keys text[],
    OUT modes text[], OUT max_attempts integer[], OUT priorities integer[], OUT kinds text[])
LANGUAGE sql IMMUTABLE
SET search_path FROM CURRENT
AS $$
SELECT ARRAY(SELECT p_thread_ids[u.i] FROM pg_catalog.unnest(p_idx) WITH ORDINALITY u(i, o)
              ORDER BY u.o),
       ARRAY(SELECT p_inputs[u.i] FROM pg_catalog.unnest(p_idx) WITH ORDINALITY u(i, o)
              ORDER BY u.o),
       ARRAY(SELECT p_tenants[u.i] FROM pg_catalog.unnest(p_idx) WITH ORDINALITY u(i, o)
              ORDER BY u.o),
       ARRAY(SELECT p_keys[u.i] FROM pg_catalog.unnest(p_idx) WITH ORDINALITY u(i, o)
              ORDER BY u.o),
       ARRAY(SELECT p_modes[u.i] FROM pg_catalog.unnest(p_idx) WITH ORDINALITY u(i, o)
              ORDER BY u.o),
       ARRAY(SELECT p_max_attempts[u.i] FROM pg_catalog.unnest(p_idx) WITH ORDINALITY u(i, o)
              ORDER BY u.o),
       CASE WHEN p_priorities IS NOT NULL THEN
           ARRAY(SELECT p_priorities[u.i] FROM pg_catalog.unnest(p_idx) WITH ORDINALITY u(i, o)
                  ORDER BY u.o) END,
       CASE WHEN p_kinds IS NOT NULL THEN
           ARRAY(SELECT p_kinds[u.i] FROM pg_catalog.unnest(p_idx) WITH ORDINALITY u(i, o)
                  ORDER BY u.o) END
$$;

-- dg_submit_many_v1 on a proxy: the submissions grouped by their thread's partition; the
-- tickets in submission order with their ordinals. One group: one dg_submit_many_v1 there (one
-- transaction, as on one store). Several (D141): a refused batch writes nothing — first each
-- group after the first that holds a key or a REJECT (what a partition's state can refuse) is
-- checked on its partition (dg_submit_many_check_v1: submitted and rolled back), so a refusal
-- found then writes nothing anywhere; then every group is written (dg_submit_many_v1, each its
-- own transaction, by partition number), and when a write is refused even so (a bad argument,
-- a partition down, or its state changed since its check: a key taken, an entry opened on a
-- REJECT's thread) the groups already written are undone (dg_submit_many_undo_v1: deleted,
-- what their INTERRUPTs closed reopened) before the refusal is raised. What an undo cannot take back (an entry a worker
-- leased between its write and the undo, or a partition unreachable for the undo) stays, and
-- the error says so (ProcessingError). Arrays that are NULL or of unequal lengths go whole to
-- partition 0, which raises DG000 (p_priorities and p_kinds, SPEC §15, may be NULL: the
-- defaults).
CREATE OR REPLACE FUNCTION dg_submit_many_v1(
    p_thread_ids text[], p_inputs text[], p_tenants text[], p_keys text[], p_modes text[],
    p_max_attempts integer[], p_priorities integer[] DEFAULT NULL, p_kinds text[] DEFAULT NULL)
RETURNS TABLE (ordinal integer, entry_id bigint, existing boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    n integer := coalesce(pg_catalog.cardinality(p_thread_ids), 0);
    v_parts integer[];
    v_groups text[];  -- each group's indexes, as text (arrays of arrays must be rectangular)
    v_idx integer[];
    v_ids bigint[];
    v_existing boolean[];
    v_written integer := 0;  -- groups written so far
    v_new bigint[];
    v_kept bigint[];
    v_state text;
    v_message text;
    v_detail text;
    v_hint text;
    g record;
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
    SELECT pg_catalog.array_agg(x.part ORDER BY x.part),
           pg_catalog.array_agg(x.idx::text ORDER BY x.part)
      INTO v_parts, v_groups
      FROM (SELECT _dg_thread_part(p_thread_ids[i]) AS part,
                   pg_catalog.array_agg(i ORDER BY i) AS idx
              FROM pg_catalog.generate_series(1, n) i GROUP BY 1) x;
    -- Phase 1: the groups after the first that a partition's state could refuse (a key, a
    -- REJECT) checked before any is written (the first needs none: nothing is written before
    -- it). A check draws entry ids it never uses, so it is made only where it can refuse.
    FOR k IN 2 .. pg_catalog.cardinality(v_parts) LOOP
        v_idx := v_groups[k]::integer[];
        IF EXISTS (SELECT 1 FROM pg_catalog.unnest(v_idx) i
                    WHERE p_keys[i] IS NOT NULL OR p_modes[i] IS DISTINCT FROM 'enqueue'
                                                   AND p_modes[i] IS DISTINCT FROM 'interrupt') THEN
            SELECT * INTO g FROM _dg_submit_group(v_idx, p_thread_ids, p_inputs, p_tenants,
                                                  p_keys, p_modes, p_max_attempts,
                                                  p_priorities, p_kinds);
            PERFORM _dg_on_submit_many_check_v1(v_parts[k], g.thread_ids, g.inputs, g.tenants,
                                                g.keys, g.modes, g.max_attempts, g.priorities,
                                                g.kinds);
        END IF;
    END LOOP;
    -- Phase 2: the writes; a refused one undoes those before it.
    BEGIN
        FOR k IN 1 .. pg_catalog.cardinality(v_parts) LOOP
            v_idx := v_groups[k]::integer[];
            SELECT * INTO g FROM _dg_submit_group(v_idx, p_thread_ids, p_inputs, p_tenants,
                                                  p_keys, p_modes, p_max_attempts,
                                                  p_priorities, p_kinds);
            FOR r IN
                SELECT s.ordinal, s.entry_id, s.existing
                  FROM _dg_on_submit_many_v1(v_parts[k], g.thread_ids, g.inputs, g.tenants,
                                             g.keys, g.modes, g.max_attempts, g.priorities,
                                             g.kinds) s
            LOOP
                v_ids[v_idx[r.ordinal]] := r.entry_id;
                v_existing[v_idx[r.ordinal]] := r.existing;
            END LOOP;
            v_written := k;
        END LOOP;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT,
                                v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
        IF v_written = 0 THEN
            RAISE;
        END IF;
        v_kept := '{}';
        FOR k IN 1 .. v_written LOOP
            v_idx := v_groups[k]::integer[];
            v_new := ARRAY(SELECT v_ids[i] FROM pg_catalog.unnest(v_idx) i
                            WHERE NOT v_existing[i]);
            IF pg_catalog.cardinality(v_new) > 0 THEN
                BEGIN
                    v_kept := v_kept || ARRAY(SELECT u.entry_id FROM
                                              _dg_on_submit_many_undo_v1(v_parts[k], v_new) u);
                EXCEPTION WHEN OTHERS THEN
                    v_kept := v_kept || v_new;
                END;
            END IF;
        END LOOP;
        IF pg_catalog.cardinality(v_kept) > 0 THEN
            RAISE EXCEPTION 'submit_many was refused on partition % (%: %), and entries % of '
                'the partitions written before could not be undone (leased meanwhile, or the '
                'partition unreachable): they stay submitted', v_parts[v_written + 1], v_state,
                v_message, pg_catalog.array_to_string(v_kept, ', ') USING ERRCODE = '58000';
        END IF;
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message,
                              DETAIL = coalesce(v_detail, ''), HINT = coalesce(v_hint, '');
    END;
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
