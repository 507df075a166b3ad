-- Thread TTLs (SPEC §24.1, issue 47; D259-D261; table thread_ttls, migration 0021).
--
-- A thread given a TTL (minutes) and a strategy ('delete' | 'keep_latest') expires that long
-- after its last activity: its last event (a commit, a state update), a run of it submitted or
-- closed, or the TTL's own setting (D259; reads are not activity). A row's due_at is a lower
-- bound of that moment, so nothing on the hot path writes the row: the sweep reads only due
-- rows, works out the real expiry then, and puts an active thread off to it (D260).

-- _dg_check_thread_ttl(minutes, strategy): DG000 naming the argument unless the strategy is
-- 'delete' or 'keep_latest' and minutes is NULL (no TTL) or a finite number in (0, 5256000]
-- (ten years: more is a mistake, not a retention).
CREATE OR REPLACE FUNCTION _dg_check_thread_ttl(p_minutes double precision, p_strategy text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    PERFORM _dg_check(p_strategy IN ('delete', 'keep_latest'),
                      pg_catalog.format('strategy must be ''delete'' or ''keep_latest'', got %s',
                                        coalesce(pg_catalog.quote_literal(p_strategy), 'NULL')));
    PERFORM _dg_check(p_minutes IS NULL
                      OR (p_minutes > 0 AND p_minutes <= 5256000
                          AND p_minutes <> 'Infinity'::double precision),
                      pg_catalog.format('ttl must be more than 0 and at most 5256000 minutes, got %s',
                                        p_minutes));
END;
$$;

-- _dg_ttl_activity(thread_id, updated_at, set_at): the thread's last activity (D259): the
-- latest of its last event (updated_at), its TTL's setting and its kept entries' submission or
-- close (queue_entries_thread_idx).
CREATE OR REPLACE FUNCTION _dg_ttl_activity(
    p_thread_id text, p_updated_at timestamptz, p_set_at timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE
AS $$
    SELECT GREATEST(p_updated_at, p_set_at,
                    (SELECT pg_catalog.max(coalesce(e.closed_at, e.submitted_at))
                       FROM queue_entries e WHERE e.thread_id = p_thread_id))
$$;

-- _dg_thread_ttl(thread_id): the thread's TTL as dg_thread_ttl_v1 answers it (no row when it has
-- none, when the thread is not live, or when the row is an earlier incarnation's).
CREATE OR REPLACE FUNCTION _dg_thread_ttl(p_thread_id text)
RETURNS TABLE (thread_id text, minutes double precision, strategy text, expires_at timestamptz)
LANGUAGE sql STABLE
AS $$
    SELECT tt.thread_id, tt.minutes, tt.strategy,
           _dg_ttl_activity(t.thread_id, t.updated_at, tt.set_at)
             + tt.minutes * interval '1 minute'
      FROM thread_ttls tt
      JOIN threads t ON t.thread_id = tt.thread_id
     WHERE tt.thread_id = p_thread_id AND t.live
       AND t.first_commit_order = tt.first_commit_order
$$;

-- dg_set_thread_ttl_v1: give the thread a TTL of p_minutes and p_strategy, setting it counting
-- as activity (store-now read under the thread's lock); p_minutes NULL removes it. Returns the
-- TTL as dg_thread_ttl_v1 does; no row when the thread has no commit (nothing is written then)
-- or the TTL was removed. Raises DG000.
CREATE OR REPLACE FUNCTION dg_set_thread_ttl_v1(
    p_thread_id text, p_minutes double precision, p_strategy text)
RETURNS TABLE (thread_id text, minutes double precision, strategy text, expires_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    t threads;
    v_now timestamptz;
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    PERFORM _dg_check_thread_ttl(p_minutes, p_strategy);
    SELECT * INTO t FROM threads WHERE threads.thread_id = p_thread_id AND live FOR UPDATE;
    IF NOT FOUND OR p_minutes IS NULL THEN
        DELETE FROM thread_ttls WHERE thread_ttls.thread_id = p_thread_id;
        RETURN;
    END IF;
    v_now := store_now();
    INSERT INTO thread_ttls AS tt
           (thread_id, minutes, strategy, first_commit_order, set_at, due_at, swept_at)
    VALUES (p_thread_id, p_minutes, p_strategy, t.first_commit_order, v_now,
            v_now + p_minutes * interval '1 minute', NULL)
    ON CONFLICT ON CONSTRAINT thread_ttls_pkey DO UPDATE
       SET minutes = EXCLUDED.minutes, strategy = EXCLUDED.strategy,
           first_commit_order = EXCLUDED.first_commit_order, set_at = EXCLUDED.set_at,
           due_at = EXCLUDED.due_at, swept_at = NULL;
    RETURN QUERY SELECT * FROM _dg_thread_ttl(p_thread_id);
END;
$$;

-- dg_thread_ttl_v1: the thread's TTL and when it expires (its last activity + minutes, D259);
-- no row when it has none. Raises DG000.
CREATE OR REPLACE FUNCTION dg_thread_ttl_v1(p_thread_id text)
RETURNS TABLE (thread_id text, minutes double precision, strategy text, expires_at timestamptz)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    RETURN QUERY SELECT * FROM _dg_thread_ttl(p_thread_id);
END;
$$;

-- dg_sweep_threads_v1: one transaction of the TTL sweep (SPEC §24.1, D261). Takes up to p_limit
-- rows due at store-now, soonest first, each locked SKIP LOCKED in that order (two sweeps take
-- disjoint rows; nothing waits on a row another holds; no table lock), and for each:
--   - a row of a thread gone or made again (another first_commit_order) is removed;
--   - a thread whose last activity + minutes is later than now is put off to that moment;
--   - a thread whose row or a descendant's is locked by a writer right now is left due (it is
--     being written: it is active, and the next sweep sees it);
--   - a thread (or descendant) with an open entry is put off by its TTL from now (the entry's
--     close is activity), one with a live claim to the claim's expiry: never swept while busy;
--   - 'keep_latest' already applied with no activity since is put off by its TTL;
--   - otherwise it is swept: 'delete' as dg_delete_thread_v1 (its open entries marked, none are
--     open), 'keep_latest' pruning the thread and each descendant to its head (dg_prune_v1 with
--     keep_last 1 and a max_age of a microsecond: the head and its pending writes stay; older
--     checkpoints and the event log go, the event numbering continuing).
-- Returns deleted, kept_latest and checked (the due rows taken). Raises DG000 (p_limit must be
-- 1..10000).
CREATE OR REPLACE FUNCTION dg_sweep_threads_v1(p_limit integer)
RETURNS TABLE (deleted integer, kept_latest integer, checked integer)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    r thread_ttls;
    t threads;
    v_now timestamptz;
    v_ttl interval;
    v_activity timestamptz;
    v_tree text[];
    v_claims timestamptz;
    v_open boolean;
    v_deleted integer := 0;
    v_kept integer := 0;
    v_checked integer := 0;
BEGIN
    PERFORM _dg_count(p_limit, 'limit', 10000);
    v_now := store_now();
    FOR r IN SELECT * FROM thread_ttls tt WHERE tt.due_at <= v_now
              ORDER BY tt.due_at, tt.thread_id LIMIT p_limit
              FOR UPDATE SKIP LOCKED
    LOOP
        v_checked := v_checked + 1;
        v_ttl := r.minutes * interval '1 minute';
        SELECT * INTO t FROM threads WHERE threads.thread_id = r.thread_id FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            IF NOT EXISTS (SELECT 1 FROM threads x WHERE x.thread_id = r.thread_id) THEN
                DELETE FROM thread_ttls WHERE thread_ttls.thread_id = r.thread_id;
            END IF;
            CONTINUE;  -- a writer holds it now: active; the next sweep looks again
        END IF;
        IF NOT t.live OR t.first_commit_order IS DISTINCT FROM r.first_commit_order THEN
            DELETE FROM thread_ttls WHERE thread_ttls.thread_id = r.thread_id;
            CONTINUE;
        END IF;
        v_activity := _dg_ttl_activity(t.thread_id, t.updated_at, r.set_at);
        IF v_activity + v_ttl > v_now THEN
            UPDATE thread_ttls SET due_at = v_activity + v_ttl
             WHERE thread_ttls.thread_id = r.thread_id;
            CONTINUE;
        END IF;
        IF r.swept_at IS NOT NULL AND v_activity <= r.swept_at THEN
            UPDATE thread_ttls SET due_at = v_now + v_ttl WHERE thread_ttls.thread_id = r.thread_id;
            CONTINUE;
        END IF;
        WITH RECURSIVE tree(id) AS (
            SELECT r.thread_id COLLATE "C"
            UNION
            SELECT x.thread_id FROM threads x JOIN tree ON x.parent_thread_id = tree.id
             WHERE x.live
        )
        SELECT pg_catalog.array_agg(id ORDER BY id) INTO v_tree FROM tree;
        SELECT pg_catalog.bool_or(x.head_entry_id IS NOT NULL),
               pg_catalog.max(x.claim_expires_at)
                 FILTER (WHERE x.claim_token IS NOT NULL AND x.claim_expires_at > v_now)
          INTO v_open, v_claims
          FROM threads x WHERE x.thread_id = ANY (v_tree);
        IF v_open THEN
            UPDATE thread_ttls SET due_at = v_now + v_ttl WHERE thread_ttls.thread_id = r.thread_id;
            CONTINUE;
        END IF;
        IF v_claims IS NOT NULL THEN
            UPDATE thread_ttls SET due_at = v_claims WHERE thread_ttls.thread_id = r.thread_id;
            CONTINUE;
        END IF;
        IF r.strategy = 'delete' THEN
            PERFORM dg_delete_thread_v1(r.thread_id, NULL, NULL);
            DELETE FROM thread_ttls WHERE thread_ttls.thread_id = r.thread_id;
            v_deleted := v_deleted + 1;
        ELSE
            -- keep_last 1 and every event: max_age of a microsecond is "older than now".
            PERFORM dg_prune_v1(m.id, 1, interval '1 microsecond')
               FROM pg_catalog.unnest(v_tree) m(id);
            UPDATE thread_ttls SET due_at = v_now + v_ttl, swept_at = v_now
             WHERE thread_ttls.thread_id = r.thread_id;
            v_kept := v_kept + 1;
        END IF;
    END LOOP;
    RETURN QUERY SELECT v_deleted, v_kept, v_checked;
END;
$$;
