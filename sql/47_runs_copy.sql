-- Store capabilities for LangGraph's savers (SPEC §12): store-wide delete of given runs'
-- checkpoints, and an atomic copy of a thread.

-- dg_delete_runs_v1: remove every checkpoint whose run id is in p_run_ids, with its pending
-- writes, on every thread. Each thread that lost checkpoints gets the newest remaining one as
-- head (as retract_turn, D24) and a store.runs_deleted event (run_id NULL, payload
-- {"checkpoint_ids": [...] oldest first}). Locks the affected threads in id order. Claims are
-- not checked (an administrative call, like prune). Returns the number removed. Raises DG000
-- (NULL array or element, an id outside 1..512 bytes, more than 10000 ids).
CREATE OR REPLACE FUNCTION dg_delete_runs_v1(p_run_ids text[])
RETURNS TABLE (removed bigint)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_threads text[];
    v_now timestamptz;
    v_total bigint := 0;
    v_id text;
    v_ids text[];
BEGIN
    PERFORM _dg_check(p_run_ids IS NOT NULL, 'run_ids must not be NULL');
    PERFORM _dg_check(pg_catalog.cardinality(p_run_ids) <= 10000, 'run_ids: at most 10000 ids');
    PERFORM _dg_check(NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(p_run_ids) r
                                   WHERE r IS NULL OR pg_catalog.octet_length(r) NOT BETWEEN 1 AND 512),
                      'run_ids: each must be 1..512 bytes, not NULL');
    SELECT pg_catalog.array_agg(DISTINCT cp.thread_id ORDER BY cp.thread_id) INTO v_threads
      FROM checkpoints cp WHERE cp.run_id = ANY (p_run_ids);
    IF v_threads IS NULL THEN
        RETURN QUERY SELECT 0::bigint;
        RETURN;
    END IF;
    PERFORM _dg_lock_threads(v_threads);
    v_now := store_now();
    FOREACH v_id IN ARRAY v_threads LOOP
        -- Read again under the lock: a commit may have landed since the scan.
        SELECT pg_catalog.array_agg(cp.checkpoint_id ORDER BY cp.seq) INTO v_ids
          FROM checkpoints cp WHERE cp.thread_id = v_id AND cp.run_id = ANY (p_run_ids);
        CONTINUE WHEN v_ids IS NULL;
        DELETE FROM pending_writes w WHERE w.thread_id = v_id AND w.checkpoint_id = ANY (v_ids);
        DELETE FROM checkpoints cp WHERE cp.thread_id = v_id AND cp.checkpoint_id = ANY (v_ids);
        UPDATE threads SET head_id = (SELECT cp.checkpoint_id FROM checkpoints cp
                                       WHERE cp.thread_id = v_id ORDER BY cp.seq DESC LIMIT 1)
         WHERE threads.thread_id = v_id;
        PERFORM _dg_append(v_id, ARRAY['store.runs_deleted'],
                           ARRAY[pg_catalog.json_build_object('checkpoint_ids', pg_catalog.to_json(v_ids))::text],
                           ARRAY[NULL::timestamptz], NULL, v_now);
        v_total := v_total + pg_catalog.cardinality(v_ids);
    END LOOP;
    RETURN QUERY SELECT v_total;
END;
$$;

-- dg_copy_thread_v1: copy p_source and its live descendants whose ids start with p_source to
-- p_target || suffix, in one transaction: every checkpoint (same ids, parents, run ids, states,
-- metadata, next, created_at; committed_at = now; each with a new store.checkpoint event), its
-- pending writes, the head and the effects; a copied descendant's parent is the mapped parent.
-- Not copied: events, claims, queue entries. Locks source and target rows in id order.
-- Returns copied = false (nothing written) when the source has no commit. Raises DG000 (a NULL
-- or over-long id, a target that exists), DG001 (a target has a live claim).
CREATE OR REPLACE FUNCTION dg_copy_thread_v1(p_source text, p_target text)
RETURNS TABLE (copied boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_sources text[];
    v_targets text[];
    v_now timestamptz;
    s threads;
    v_parent text;
    v_seq bigint;
    c record;
BEGIN
    PERFORM _dg_check(p_source IS NOT NULL AND pg_catalog.octet_length(p_source) BETWEEN 1 AND 512,
                      'source_thread_id must be 1..512 bytes');
    PERFORM _dg_check(p_target IS NOT NULL AND pg_catalog.octet_length(p_target) BETWEEN 1 AND 512,
                      'target_thread_id must be 1..512 bytes');
    WITH RECURSIVE tree(id) AS (
        SELECT p_source COLLATE "C"
        UNION
        SELECT t.thread_id FROM threads t JOIN tree ON t.parent_thread_id = tree.id WHERE t.live
    )
    SELECT pg_catalog.array_agg(id ORDER BY id) INTO v_sources FROM tree
     WHERE pg_catalog.left(id, pg_catalog.length(p_source)) = p_source;
    v_targets := ARRAY(SELECT p_target || pg_catalog.substr(u, pg_catalog.length(p_source) + 1)
                         FROM pg_catalog.unnest(v_sources) WITH ORDINALITY AS x(u, n) ORDER BY n);
    PERFORM _dg_check(NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(v_targets) u
                                   WHERE pg_catalog.octet_length(u) > 512),
                      'target_thread_id: a copied thread id would exceed 512 bytes');
    PERFORM _dg_lock_threads(v_sources || v_targets);
    v_now := store_now();
    SELECT * INTO s FROM threads WHERE threads.thread_id = p_source;
    IF NOT coalesce(s.live, false) THEN
        RETURN QUERY SELECT false;
        RETURN;
    END IF;
    PERFORM _dg_check(NOT EXISTS (SELECT 1 FROM threads t
                                   WHERE t.thread_id = ANY (v_targets) AND t.live),
                      'target_thread_id: the target thread already exists');
    IF EXISTS (SELECT 1 FROM threads t WHERE t.thread_id = ANY (v_targets)
                AND t.claim_token IS NOT NULL AND t.claim_expires_at > v_now) THEN
        RAISE EXCEPTION 'thread has a live claim' USING ERRCODE = 'DG001';
    END IF;
    FOR i IN 1 .. pg_catalog.cardinality(v_sources) LOOP
        SELECT * INTO s FROM threads WHERE threads.thread_id = v_sources[i];
        v_parent := s.parent_thread_id;
        IF i = 1 OR v_sources[i] = p_source THEN
            v_parent := NULL;
        ELSIF v_parent IS NOT NULL AND pg_catalog.left(v_parent, pg_catalog.length(p_source)) = p_source THEN
            v_parent := p_target || pg_catalog.substr(v_parent, pg_catalog.length(p_source) + 1);
        END IF;
        UPDATE threads t
           SET live = true, parent_thread_id = v_parent, head_id = s.head_id,
               created_at = v_now, updated_at = v_now,
               first_commit_order = pg_catalog.nextval('thread_first_commit_seq')
         WHERE t.thread_id = v_targets[i];
        FOR c IN SELECT * FROM checkpoints cp WHERE cp.thread_id = v_sources[i] ORDER BY cp.seq
        LOOP
            v_seq := _dg_append(v_targets[i], ARRAY['store.checkpoint'],
                                ARRAY[_dg_json_pair('checkpoint_id', pg_catalog.to_json(c.checkpoint_id)::text,
                                                    'run_id', pg_catalog.to_json(c.run_id)::text)],
                                ARRAY[NULL::timestamptz], c.run_id, v_now);
            INSERT INTO checkpoints (thread_id, checkpoint_id, seq, parent_id, run_id, state,
                                     metadata, next, created_at, committed_at)
            VALUES (v_targets[i], c.checkpoint_id, v_seq, c.parent_id, c.run_id, c.state,
                    c.metadata, c.next, c.created_at, v_now);
        END LOOP;
        INSERT INTO pending_writes (thread_id, checkpoint_id, task_id, channel, idx, value,
                                    task_path)
        SELECT v_targets[i], w.checkpoint_id, w.task_id, w.channel, w.idx, w.value, w.task_path
          FROM pending_writes w WHERE w.thread_id = v_sources[i] ORDER BY w.written_order;
        INSERT INTO effects (thread_id, key, value, run_id, recorded_at)
        SELECT v_targets[i], e.key, e.value, e.run_id, e.recorded_at
          FROM effects e WHERE e.thread_id = v_sources[i];
    END LOOP;
    RETURN QUERY SELECT true;
END;
$$;

-- dg_put_writes_and_commit_v2: dg_put_writes_v2 (writes to p_writes_checkpoint_id) then
-- dg_commit_v1, in one transaction and one round trip: a saver attaches a step's task writes and
-- commits the next checkpoint with one durable write. The thread and the fence's thread are
-- locked first, in id order (as dg_commit_v1 does). Raises what either raises (put_writes'
-- checks first); on any error nothing is written. Returns the committed checkpoint.
CREATE OR REPLACE FUNCTION dg_put_writes_and_commit_v2(
    p_thread_id text, p_token bigint, p_writes_checkpoint_id text,
    p_task_ids text[], p_channels text[], p_values text[], p_task_paths text[],
    p_checkpoint_id text, p_parent_id text, p_run_id text,
    p_state text, p_metadata text, p_next text[],
    p_event_kinds text[], p_event_payloads text[], p_event_created_at timestamptz[],
    p_created_at timestamptz, p_parent_thread_id text,
    p_fence_thread_id text, p_fence_token bigint)
RETURNS TABLE (thread_id text, checkpoint_id text, parent_id text, run_id text, state text,
               metadata text, next text[], created_at timestamptz, committed_at timestamptz,
               seq bigint, writes json)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    PERFORM _dg_check(p_thread_id IS NOT NULL, 'thread_id must not be NULL');
    PERFORM _dg_lock_threads(ARRAY[p_thread_id, p_fence_thread_id]);
    PERFORM dg_put_writes_v2(p_thread_id, p_token, p_writes_checkpoint_id,
                             p_task_ids, p_channels, p_values, p_task_paths);
    RETURN QUERY SELECT * FROM dg_commit_v1(
        p_thread_id, p_token, p_checkpoint_id, p_parent_id, p_run_id, p_state, p_metadata,
        p_next, p_event_kinds, p_event_payloads, p_event_created_at, p_created_at,
        p_parent_thread_id, p_fence_thread_id, p_fence_token);
END;
$$;

-- dg_search_v1: dg_history_v1 filtered in the store: the thread's checkpoints newest first (by
-- seq) whose metadata is a JSON object holding every key of p_filter (a JSON object) with an
-- equal value (jsonb equality: numbers by value, booleans apart from numbers; '{}' matches every
-- checkpoint), strictly before
-- checkpoint p_before (NULL = from the head; unknown = no rows), at most p_limit. Raises DG000
-- (p_filter not a JSON object, p_limit outside 1..10000). LangGraph's list(filter=...).
CREATE OR REPLACE FUNCTION dg_search_v1(
    p_thread_id text, p_filter text, p_before text, p_limit integer)
RETURNS TABLE (thread_id text, checkpoint_id text, parent_id text, run_id text, state text,
               metadata text, next text[], created_at timestamptz, committed_at timestamptz,
               seq bigint, writes json)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_filter jsonb;
    v_before bigint := 9223372036854775807;
BEGIN
    PERFORM _dg_check(p_limit BETWEEN 1 AND 10000, 'limit must be 1..10000');
    BEGIN
        v_filter := p_filter::jsonb;
    EXCEPTION WHEN others THEN
        v_filter := NULL;
    END;
    PERFORM _dg_check(pg_catalog.jsonb_typeof(v_filter) = 'object', 'metadata must be a JSON object');
    IF p_before IS NOT NULL THEN
        SELECT b.seq INTO v_before FROM checkpoints b
         WHERE b.thread_id = p_thread_id AND b.checkpoint_id = p_before;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    RETURN QUERY
    SELECT c.thread_id::text, c.checkpoint_id, c.parent_id, c.run_id, c.state, c.metadata,
           c.next, c.created_at, c.committed_at, c.seq, w.writes
      FROM threads t
      JOIN checkpoints c ON c.thread_id = t.thread_id
     CROSS JOIN LATERAL _dg_writes(c.thread_id, c.checkpoint_id) w
     WHERE t.thread_id = p_thread_id AND t.live AND c.seq < v_before
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.jsonb_each(v_filter) f
                        WHERE (c.metadata::jsonb -> f.key) IS DISTINCT FROM f.value)
     ORDER BY c.seq DESC
     LIMIT p_limit;
END;
$$;

-- dg_put_writes_fenced_v2: dg_put_writes_v2 under a second claim, the fence, checked in the same
-- transaction (the thread and the fence's thread locked first, in id order): a subgraph
-- namespace's writes fenced by the run's claim on the root thread. Raises DG002 when the fence
-- is not current (checked after the claim), then what dg_put_writes_v2 raises.
CREATE OR REPLACE FUNCTION dg_put_writes_fenced_v2(
    p_thread_id text, p_token bigint, p_checkpoint_id text,
    p_task_ids text[], p_channels text[], p_values text[], p_task_paths text[],
    p_fence_thread_id text, p_fence_token bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    t threads;
    f threads;
BEGIN
    PERFORM _dg_check(p_thread_id IS NOT NULL, 'thread_id must not be NULL');
    PERFORM _dg_check(p_fence_thread_id IS NOT NULL AND p_fence_token IS NOT NULL,
                      'fence thread and fence token must not be NULL');
    PERFORM _dg_lock_threads(ARRAY[p_thread_id, p_fence_thread_id]);
    SELECT * INTO t FROM threads WHERE threads.thread_id = p_thread_id;
    IF NOT coalesce(t.claim_token = p_token, false) THEN
        RAISE EXCEPTION 'claim is not current on thread' USING ERRCODE = 'DG002';
    END IF;
    SELECT * INTO f FROM threads WHERE threads.thread_id = p_fence_thread_id;
    IF NOT coalesce(f.claim_token = p_fence_token, false) THEN
        RAISE EXCEPTION 'fence claim is not current on its thread' USING ERRCODE = 'DG002';
    END IF;
    PERFORM dg_put_writes_v2(p_thread_id, p_token, p_checkpoint_id,
                             p_task_ids, p_channels, p_values, p_task_paths);
END;
$$;

-- dg_put_writes_and_commit_v1 and dg_put_writes_fenced_v1 (their _v2 without task paths) are
-- deprecated: sql/96_deprecated.sql (D233).
