-- retract_turn, prune, prune_all, delete_thread (SPEC §4; rules 13, 16, 17; D11: retract with no
-- head is a no-op; D13: prune keeps the head, evidence, keep_last and the young; D14: delete checks
-- the fence first and cascades; D24: retract after prune falls back to the newest remaining).

-- dg_retract_turn_v1: remove the newest turn (from the head back, the checkpoints sharing the
-- head's run id) with their writes; the new head is the newest remaining checkpoint (D24);
-- append store.retracted (run_id NULL, payload {"run_id", "checkpoint_ids": newest first}).
-- Returns the new head (no row when none; a thread without a head returns no row and appends
-- nothing, D11). Raises DG002 (claim not current), DG404 (thread has no commit), DG103 (the
-- claim's holder is the run id of an attempt of a closed entry of the thread: SPEC §19.1,
-- §23.5, D230; retract_turn names no run, so it is under its claim's holder).
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
    PERFORM _dg_refuse_closed_run(p_thread_id, t.claim_holder);
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
                       ARRAY[_dg_json_pair('run_id', pg_catalog.to_json(v_run)::text,
                                           'checkpoint_ids', pg_catalog.to_json(v_ids)::text)],
                       ARRAY[NULL::timestamptz], NULL, v_now);
    RETURN QUERY
    SELECT cp.thread_id::text, cp.checkpoint_id, cp.parent_id, cp.run_id, cp.state, cp.metadata,
           cp.next, cp.created_at, cp.committed_at, cp.seq, w.writes
      FROM checkpoints cp
     CROSS JOIN LATERAL _dg_writes(cp.thread_id, cp.checkpoint_id) w
     WHERE cp.thread_id = p_thread_id AND cp.checkpoint_id = v_new_head;
END;
$$;

-- _dg_prune_thread(thread, keep_last, max_age, now, budget): retention on one thread whose row
-- the caller holds locked (D13: what prune keeps), removing at most p_budget rows (checkpoints, oldest first, then
-- events; a kept checkpoint whose parent is removed is left with parent_id NULL), so that one call's transaction stays bounded however long the thread (issue 12).
-- done = nothing removable is left. The keep_last boundary is read from the seq index (no
-- window over the whole thread).
CREATE OR REPLACE FUNCTION _dg_prune_thread(
    p_thread_id text, p_keep_last integer, p_max_age interval, p_now timestamptz,
    p_budget bigint,
    OUT checkpoints_removed bigint, OUT events_removed bigint, OUT done boolean)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_head text;
    v_cutoff timestamptz := p_now - p_max_age;  -- NULL when p_max_age is NULL
    v_below bigint;  -- checkpoints with seq below this one are outside the newest keep_last
    v_removed text[];
BEGIN
    checkpoints_removed := 0;
    events_removed := 0;
    done := true;
    SELECT head_id INTO v_head FROM threads WHERE thread_id = p_thread_id AND live;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF p_keep_last IS NOT NULL THEN
        SELECT cp.seq INTO v_below FROM checkpoints cp WHERE cp.thread_id = p_thread_id
         ORDER BY cp.seq DESC OFFSET p_keep_last - 1 LIMIT 1;
        IF NOT FOUND THEN
            v_below := 0;  -- fewer than keep_last checkpoints: none is outside
        END IF;
    END IF;
    WITH evidence AS (
        SELECT DISTINCT ON (cp.run_id) cp.checkpoint_id
          FROM checkpoints cp
         WHERE cp.thread_id = p_thread_id
           AND cp.run_id IN (SELECT a.run_id FROM queue_attempts a
                               JOIN queue_entries e ON e.entry_id = a.entry_id
                              WHERE e.thread_id = p_thread_id AND e.outcome_kind IS NULL)
         ORDER BY cp.run_id, cp.seq DESC
    )
    SELECT coalesce(pg_catalog.array_agg(r.checkpoint_id), '{}') INTO v_removed
      FROM (SELECT cp.checkpoint_id FROM checkpoints cp
             WHERE cp.thread_id = p_thread_id
               AND (v_below IS NULL OR cp.seq < v_below)
               AND (v_cutoff IS NULL OR cp.committed_at < v_cutoff)
               AND cp.checkpoint_id IS DISTINCT FROM v_head
               AND cp.checkpoint_id NOT IN (SELECT ev.checkpoint_id FROM evidence ev)
             ORDER BY cp.seq
             LIMIT p_budget + 1) r;
    IF pg_catalog.cardinality(v_removed) > p_budget THEN
        done := false;
        v_removed := v_removed[1:p_budget];
    END IF;
    IF pg_catalog.cardinality(v_removed) > 0 THEN
        DELETE FROM pending_writes w
         WHERE w.thread_id = p_thread_id AND w.checkpoint_id = ANY (v_removed);
        DELETE FROM checkpoints cp
         WHERE cp.thread_id = p_thread_id AND cp.checkpoint_id = ANY (v_removed);
        -- A kept checkpoint whose parent was removed has none (SPEC §14.1).
        UPDATE checkpoints cp SET parent_id = NULL
         WHERE cp.thread_id = p_thread_id AND cp.parent_id = ANY (v_removed);
        checkpoints_removed := pg_catalog.cardinality(v_removed);
    END IF;
    IF v_cutoff IS NOT NULL AND done THEN
        DELETE FROM events ev
         WHERE ev.thread_id = p_thread_id
           AND ev.seq IN (SELECT o.seq FROM events o
                           WHERE o.thread_id = p_thread_id AND o.committed_at < v_cutoff
                           ORDER BY o.committed_at
                           LIMIT p_budget - checkpoints_removed + 1);
        GET DIAGNOSTICS events_removed = ROW_COUNT;
        IF events_removed > p_budget - checkpoints_removed THEN
            -- One row over the budget was only the sign that more remain; it is gone anyway.
            done := false;
        END IF;
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

-- _dg_prune_budget(): rows (checkpoints and events) one retention call may remove, so that a
-- maintenance transaction stays short whatever the store's size (issue 12).
CREATE OR REPLACE FUNCTION _dg_prune_budget() RETURNS bigint
LANGUAGE sql IMMUTABLE
AS $$ SELECT 10000::bigint $$;

-- dg_prune_v1: retention on one thread (D13): removes checkpoints (with their writes) that are
-- not the head, not evidence, outside the newest p_keep_last and committed before
-- store-now - p_max_age (each condition only when its parameter is not NULL), and events
-- committed before store-now - p_max_age. A thread with no commit gives (0, 0). The caller asks
-- for one thread; it gets it whole, in steps of _dg_prune_budget() rows inside this call.
-- Raises DG000.
CREATE OR REPLACE FUNCTION dg_prune_v1(p_thread_id text, p_keep_last integer, p_max_age interval)
RETURNS TABLE (checkpoints_removed bigint, events_removed bigint)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz;
    r record;
    v_cp bigint := 0;
    v_ev bigint := 0;
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    p_max_age := _dg_duration(p_max_age, 'max_age', false);
    PERFORM _dg_check_retention(p_keep_last, p_max_age);
    PERFORM 1 FROM threads WHERE threads.thread_id = p_thread_id AND live FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 0::bigint, 0::bigint;
        RETURN;
    END IF;
    v_now := store_now();
    LOOP
        SELECT * INTO r
          FROM _dg_prune_thread(p_thread_id, p_keep_last, p_max_age, v_now, _dg_prune_budget());
        v_cp := v_cp + r.checkpoints_removed;
        v_ev := v_ev + r.events_removed;
        EXIT WHEN r.done;
    END LOOP;
    RETURN QUERY SELECT v_cp, v_ev;
END;
$$;

-- dg_prune_batch_v1: one step of prune_all, bounded by rows, not threads: visits up to p_batch
-- existing threads with id greater than p_after (bytes order; NULL = from the first), in id
-- order, locking each in turn and pruning it as dg_prune_v1 does (store-now read under its
-- lock), and stops once _dg_prune_budget() rows are removed. last_thread_id is the last thread
-- pruned completely (NULL when none). threads_seen < p_batch means prune_all is finished;
-- otherwise (the batch was full, or the budget ran out, then threads_seen = p_batch) the caller
-- calls again with p_after = last_thread_id when not NULL, else its p_after: every step removes
-- rows or moves on, so prune_all always progresses. Each step is its own transaction.
-- Raises DG000.
CREATE OR REPLACE FUNCTION dg_prune_batch_v1(
    p_after text, p_batch integer, p_keep_last integer, p_max_age interval)
RETURNS TABLE (checkpoints_removed bigint, events_removed bigint, threads_seen integer,
               last_thread_id text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_id text;
    v_last text;
    v_seen integer := 0;
    v_left bigint := _dg_prune_budget();
    r record;
    v_cp bigint := 0;
    v_ev bigint := 0;
BEGIN
    PERFORM _dg_opt_id(p_after, 'after');
    p_max_age := _dg_duration(p_max_age, 'max_age', false);
    PERFORM _dg_check_retention(p_keep_last, p_max_age);
    PERFORM _dg_count(p_batch, 'batch', 100000);
    -- One thread locked at a time, in id order (as every multi-thread call), so that commits on
    -- the batch's other threads never wait for this step.
    FOR v_id IN SELECT t.thread_id FROM threads t
                 WHERE t.live AND (p_after IS NULL OR t.thread_id > p_after)
                 ORDER BY t.thread_id
                 LIMIT p_batch
    LOOP
        IF v_left <= 0 THEN
            v_seen := p_batch;
            EXIT;
        END IF;
        v_seen := v_seen + 1;
        PERFORM 1 FROM threads t WHERE t.thread_id = v_id AND t.live FOR UPDATE;
        IF FOUND THEN
            SELECT * INTO r
              FROM _dg_prune_thread(v_id, p_keep_last, p_max_age, store_now(), v_left);
            v_cp := v_cp + r.checkpoints_removed;
            v_ev := v_ev + r.events_removed;
            v_left := v_left - r.checkpoints_removed - r.events_removed;
            IF NOT r.done THEN
                v_seen := p_batch;
                EXIT;
            END IF;
        END IF;
        v_last := v_id;
    END LOOP;
    RETURN QUERY SELECT v_cp, v_ev, v_seen, v_last;
END;
$$;

-- dg_delete_thread_v1: delete the thread and every descendant (live threads whose first commit
-- named one of them as parent, recursively): checkpoints, writes, events, effects and claims,
-- keeping each id's last seq (tombstone), and mark thread_deleted every open entry of each of
-- those ids, also when the id has no commit (rule 17). existed = the thread had a commit.
-- Raises DG002 when the fence (checked first) is not current.
-- Locking (issue 12): the fence, the thread and its descendants are locked strictly in id order,
-- so the delete never deadlocks with calls that lock threads in id order (fenced commits,
-- prune_all, a child's first commit, which also locks its parent). The tree is read, locked,
-- and read again: a descendant that appeared meanwhile with an id above every lock held is
-- locked next; one below makes the attempt roll back to a savepoint (releasing its locks, so
-- nothing waits out of order) and start again with the grown tree. Once every member is
-- locked no new child can land (its first commit needs its parent's lock), so the last read is
-- the whole tree.
CREATE OR REPLACE FUNCTION dg_delete_thread_v1(
    p_thread_id text, p_fence_thread_id text, p_fence_token bigint)
RETURNS TABLE (existed boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_ids text[];
    v_locked text[];
    v_want text[];
    v_new text[];
    v_existed boolean;
    f threads;
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    PERFORM _dg_opt_id(p_fence_thread_id, 'fence_thread_id');
    PERFORM _dg_check((p_fence_thread_id IS NULL) = (p_fence_token IS NULL),
                      'fence thread and fence token go together');
    LOOP
        BEGIN
            v_locked := '{}';
            LOOP
                WITH RECURSIVE tree(id) AS (
                    SELECT p_thread_id COLLATE "C"
                    UNION
                    SELECT t.thread_id FROM threads t JOIN tree ON t.parent_thread_id = tree.id
                     WHERE t.live
                )
                SELECT pg_catalog.array_agg(id ORDER BY id) INTO v_ids FROM tree;
                v_want := v_ids;
                IF p_fence_thread_id IS NOT NULL THEN
                    v_want := v_want || p_fence_thread_id;
                END IF;
                v_new := ARRAY(SELECT DISTINCT u.id COLLATE "C" FROM pg_catalog.unnest(v_want) u(id)
                                WHERE u.id <> ALL (v_locked) ORDER BY 1);
                EXIT WHEN pg_catalog.cardinality(v_new) = 0;
                IF pg_catalog.cardinality(v_locked) > 0
                   AND v_new[1] COLLATE "C" < v_locked[pg_catalog.cardinality(v_locked)] COLLATE "C" THEN
                    RAISE EXCEPTION 'delete_thread: tree grew below a held lock'
                        USING ERRCODE = 'DG900';
                END IF;
                PERFORM _dg_lock_threads(v_new);
                v_locked := v_locked || v_new;
            END LOOP;
            EXIT;
        EXCEPTION WHEN SQLSTATE 'DG900' THEN
            -- The savepoint's rollback released every lock of this attempt; start again.
        END;
    END LOOP;

    IF p_fence_thread_id IS NOT NULL THEN
        SELECT * INTO f FROM threads WHERE threads.thread_id = p_fence_thread_id;
        IF NOT coalesce(f.claim_token = p_fence_token, false) THEN
            RAISE EXCEPTION 'fence claim is not current on its thread' USING ERRCODE = 'DG002';
        END IF;
    END IF;

    SELECT coalesce(pg_catalog.bool_or(live), false) INTO v_existed
      FROM threads WHERE threads.thread_id = p_thread_id;

    DELETE FROM pending_writes WHERE pending_writes.thread_id = ANY (v_ids);
    DELETE FROM checkpoints WHERE checkpoints.thread_id = ANY (v_ids);
    DELETE FROM events WHERE events.thread_id = ANY (v_ids);
    DELETE FROM effects WHERE effects.thread_id = ANY (v_ids);
    UPDATE threads
       SET live = false, head_id = NULL, parent_thread_id = NULL, created_at = NULL,
           updated_at = NULL, first_commit_order = NULL, claim_token = NULL,
           claim_holder = NULL, claim_expires_at = NULL, claim_ttl = NULL,
           -- The incarnation's end (migration 0020, D241): its schedules fire no more.
           deleted_at = CASE WHEN threads.live THEN store_now() ELSE threads.deleted_at END
     WHERE threads.thread_id = ANY (v_ids);
    UPDATE queue_entries SET thread_deleted = true
     WHERE queue_entries.thread_id = ANY (v_ids) AND outcome_kind IS NULL;
    RETURN QUERY SELECT v_existed;
END;
$$;
