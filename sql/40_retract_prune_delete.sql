-- retract_turn, prune, prune_all, delete_thread (SPEC §4; D11, D13, D14, D24, rules 13, 16, 17).

-- dg_retract_turn_v1: remove the newest turn (from the head back, the checkpoints sharing the
-- head's run id) with their writes; the new head is the newest remaining checkpoint (D24);
-- append store.retracted (run_id NULL, payload {"run_id", "checkpoint_ids": newest first}).
-- Returns the new head (no row when none; a thread without a head returns no row and appends
-- nothing, D11). Raises DG002 (claim not current), DG404 (thread has no commit).
CREATE OR REPLACE FUNCTION dg_retract_turn_v1(p_thread_id text, p_token bigint)
RETURNS TABLE (thread_id text, checkpoint_id text, parent_id text, run_id text, state text,
               metadata text, next text[], created_at timestamptz, committed_at timestamptz,
               seq bigint, writes json)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    t threads;
    v_now timestamptz;
    v_run text;
    v_ids text[] := '{}'::text[];
    v_new_head text;
    c record;
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    PERFORM _dg_not_null(p_token IS NOT NULL, 'token');
    t := _dg_lock_claimed(p_thread_id, p_token);
    v_now := store_now();
    IF t.head_id IS NULL THEN
        RETURN;
    END IF;
    v_new_head := NULL;
    FOR c IN SELECT cp.checkpoint_id, cp.run_id FROM checkpoints cp
              WHERE cp.thread_id = p_thread_id ORDER BY cp.seq DESC
    LOOP
        IF v_run IS NULL THEN
            v_run := c.run_id;
        END IF;
        IF c.run_id <> v_run THEN
            v_new_head := c.checkpoint_id;
            EXIT;
        END IF;
        v_ids := v_ids || c.checkpoint_id;
    END LOOP;
    DELETE FROM pending_writes w
     WHERE w.thread_id = p_thread_id AND w.checkpoint_id = ANY (v_ids);
    DELETE FROM checkpoints cp
     WHERE cp.thread_id = p_thread_id AND cp.checkpoint_id = ANY (v_ids);
    UPDATE threads SET head_id = v_new_head WHERE threads.thread_id = p_thread_id;
    PERFORM _dg_append(p_thread_id, ARRAY['store.retracted'],
                       ARRAY[_dg_json_pair('run_id', to_json(v_run)::text,
                                           'checkpoint_ids', to_json(v_ids)::text)],
                       ARRAY[NULL::timestamptz], NULL, v_now);
    RETURN QUERY
    SELECT cp.thread_id::text, cp.checkpoint_id, cp.parent_id, cp.run_id, cp.state, cp.metadata,
           cp.next, cp.created_at, cp.committed_at, cp.seq, w.writes
      FROM checkpoints cp
     CROSS JOIN LATERAL _dg_writes(cp.thread_id, cp.checkpoint_id) w
     WHERE cp.thread_id = p_thread_id AND cp.checkpoint_id = v_new_head;
END;
$$;

-- _dg_prune_thread(thread, keep_last, max_age, now): retention on one thread whose row the
-- caller holds locked (D13). Returns (checkpoints_removed, events_removed).
CREATE OR REPLACE FUNCTION _dg_prune_thread(
    p_thread_id text, p_keep_last integer, p_max_age interval, p_now timestamptz,
    OUT checkpoints_removed bigint, OUT events_removed bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_head text;
    v_cutoff timestamptz := p_now - p_max_age;  -- NULL when p_max_age is NULL
    v_removed text[];
BEGIN
    checkpoints_removed := 0;
    events_removed := 0;
    SELECT head_id INTO v_head FROM threads WHERE thread_id = p_thread_id AND live;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    WITH ranked AS (
        SELECT cp.checkpoint_id, cp.committed_at,
               row_number() OVER (ORDER BY cp.seq DESC) AS rn
          FROM checkpoints cp WHERE cp.thread_id = p_thread_id
    ), evidence AS (
        SELECT DISTINCT ON (cp.run_id) cp.checkpoint_id
          FROM checkpoints cp
         WHERE cp.thread_id = p_thread_id
           AND cp.run_id IN (SELECT a.run_id FROM queue_attempts a
                               JOIN queue_entries e ON e.entry_id = a.entry_id
                              WHERE e.thread_id = p_thread_id AND e.outcome_kind IS NULL)
         ORDER BY cp.run_id, cp.seq DESC
    )
    SELECT coalesce(array_agg(r.checkpoint_id), '{}') INTO v_removed
      FROM ranked r
     WHERE r.checkpoint_id IS DISTINCT FROM v_head
       AND (p_keep_last IS NULL OR r.rn > p_keep_last)
       AND (v_cutoff IS NULL OR r.committed_at < v_cutoff)
       AND r.checkpoint_id NOT IN (SELECT ev.checkpoint_id FROM evidence ev);
    IF cardinality(v_removed) > 0 THEN
        DELETE FROM pending_writes w
         WHERE w.thread_id = p_thread_id AND w.checkpoint_id = ANY (v_removed);
        DELETE FROM checkpoints cp
         WHERE cp.thread_id = p_thread_id AND cp.checkpoint_id = ANY (v_removed);
        checkpoints_removed := cardinality(v_removed);
    END IF;
    IF v_cutoff IS NOT NULL THEN
        DELETE FROM events ev WHERE ev.thread_id = p_thread_id AND ev.committed_at < v_cutoff;
        GET DIAGNOSTICS events_removed = ROW_COUNT;
    END IF;
END;
$$;

-- _dg_check_retention(keep_last, max_age): DG000 unless at least one is set, keep_last >= 1
-- and max_age > 0 (rule 16).
CREATE OR REPLACE FUNCTION _dg_check_retention(p_keep_last integer, p_max_age interval)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    PERFORM _dg_check(p_keep_last IS NOT NULL OR p_max_age IS NOT NULL,
                      'retention needs keep_last or max_age');
    PERFORM _dg_check(p_keep_last IS NULL OR p_keep_last >= 1, 'keep_last must be >= 1');
    PERFORM _dg_check(p_max_age IS NULL OR p_max_age > interval '0', 'max_age must be positive');
END;
$$;

-- dg_prune_v1: retention on one thread (D13): removes checkpoints (with their writes) that are
-- not the head, not evidence, outside the newest p_keep_last and committed before
-- store-now - p_max_age (each condition only when its parameter is not NULL), and events
-- committed before store-now - p_max_age. A thread with no commit gives (0, 0). Raises DG000.
CREATE OR REPLACE FUNCTION dg_prune_v1(p_thread_id text, p_keep_last integer, p_max_age interval)
RETURNS TABLE (checkpoints_removed bigint, events_removed bigint)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz;
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    PERFORM _dg_check_retention(p_keep_last, p_max_age);
    PERFORM 1 FROM threads WHERE threads.thread_id = p_thread_id AND live FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 0::bigint, 0::bigint;
        RETURN;
    END IF;
    v_now := store_now();
    RETURN QUERY SELECT * FROM _dg_prune_thread(p_thread_id, p_keep_last, p_max_age, v_now);
END;
$$;

-- dg_prune_batch_v1: one batch of prune_all: locks up to p_batch existing threads with id
-- greater than p_after (bytes order; NULL = from the first), in id order, and prunes each as
-- dg_prune_v1 does, with one store-now. The caller repeats with p_after = last_thread_id while
-- threads_seen = p_batch, summing the counts (each batch is its own transaction). Raises DG000.
CREATE OR REPLACE FUNCTION dg_prune_batch_v1(
    p_after text, p_batch integer, p_keep_last integer, p_max_age interval)
RETURNS TABLE (checkpoints_removed bigint, events_removed bigint, threads_seen integer,
               last_thread_id text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_ids text[];
    v_now timestamptz;
    v_id text;
    r record;
    v_cp bigint := 0;
    v_ev bigint := 0;
BEGIN
    PERFORM _dg_opt_id(p_after, 'after');
    PERFORM _dg_check_retention(p_keep_last, p_max_age);
    PERFORM _dg_count(p_batch, 'batch', 100000);
    SELECT coalesce(array_agg(x.thread_id ORDER BY x.thread_id), '{}') INTO v_ids
      FROM (SELECT t.thread_id FROM threads t
             WHERE t.live AND (p_after IS NULL OR t.thread_id > p_after)
             ORDER BY t.thread_id
             LIMIT p_batch
             FOR UPDATE) x;
    v_now := store_now();
    FOREACH v_id IN ARRAY v_ids LOOP
        SELECT * INTO r FROM _dg_prune_thread(v_id, p_keep_last, p_max_age, v_now);
        v_cp := v_cp + r.checkpoints_removed;
        v_ev := v_ev + r.events_removed;
    END LOOP;
    RETURN QUERY SELECT v_cp, v_ev, cardinality(v_ids), v_ids[cardinality(v_ids)];
END;
$$;

-- dg_delete_thread_v1: delete the thread and every descendant (live threads whose first commit
-- named one of them as parent, recursively): checkpoints, writes, events, effects and claims,
-- keeping each id's last seq (tombstone), and mark thread_deleted every open entry of each of
-- those ids, also when the id has no commit (rule 17). Locks the thread rows in id order.
-- existed = the thread had a commit. Raises DG002 when the fence (checked first) is not current.
CREATE OR REPLACE FUNCTION dg_delete_thread_v1(
    p_thread_id text, p_fence_thread_id text, p_fence_token bigint)
RETURNS TABLE (existed boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_ids text[];
    v_locked text[] := '{}';
    v_want text[];
    v_new text[];
    v_existed boolean;
    f threads;
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    PERFORM _dg_opt_id(p_fence_thread_id, 'fence_thread_id');
    PERFORM _dg_check((p_fence_thread_id IS NULL) = (p_fence_token IS NULL),
                      'fence thread and fence token go together');
    -- Lock the fence, the thread and its descendants in id order; a child whose first commit
    -- lands meanwhile is found by the next round and locked too.
    LOOP
        WITH RECURSIVE tree(id) AS (
            SELECT p_thread_id COLLATE "C"
            UNION
            SELECT t.thread_id FROM threads t JOIN tree ON t.parent_thread_id = tree.id
             WHERE t.live
        )
        SELECT array_agg(id ORDER BY id) INTO v_ids FROM tree;
        IF p_fence_thread_id IS NOT NULL THEN
            v_want := ARRAY(SELECT DISTINCT u FROM unnest(v_ids || p_fence_thread_id) u);
        ELSE
            v_want := v_ids;
        END IF;
        v_new := ARRAY(SELECT u FROM unnest(v_want) u WHERE u <> ALL (v_locked));
        EXIT WHEN cardinality(v_new) = 0;
        PERFORM _dg_lock_threads(v_new);
        v_locked := v_locked || v_new;
    END LOOP;

    IF p_fence_thread_id IS NOT NULL THEN
        SELECT * INTO f FROM threads WHERE threads.thread_id = p_fence_thread_id;
        IF NOT coalesce(f.claim_token = p_fence_token, false) THEN
            RAISE EXCEPTION 'fence claim is not current on its thread' USING ERRCODE = 'DG002';
        END IF;
    END IF;

    SELECT coalesce(bool_or(live), false) INTO v_existed
      FROM threads WHERE threads.thread_id = p_thread_id;

    DELETE FROM pending_writes WHERE pending_writes.thread_id = ANY (v_ids);
    DELETE FROM checkpoints WHERE checkpoints.thread_id = ANY (v_ids);
    DELETE FROM events WHERE events.thread_id = ANY (v_ids);
    DELETE FROM effects WHERE effects.thread_id = ANY (v_ids);
    UPDATE threads
       SET live = false, head_id = NULL, parent_thread_id = NULL, created_at = NULL,
           updated_at = NULL, first_commit_order = NULL, claim_token = NULL,
           claim_holder = NULL, claim_expires_at = NULL, claim_ttl = NULL
     WHERE threads.thread_id = ANY (v_ids);
    UPDATE queue_entries SET thread_deleted = true
     WHERE queue_entries.thread_id = ANY (v_ids) AND outcome_kind IS NULL;
    RETURN QUERY SELECT v_existed;
END;
$$;
