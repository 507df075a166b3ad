-- commit (SPEC §4 commit; D7-D9: created_at default, event numbers, check order; rules 10-11).

-- _dg_json_pair(k1, v1, k2, v2): the compact JSON object {k1: v1, k2: v2} of two keys and two
-- JSON texts (the payloads of store.checkpoint and store.retracted). STABLE (to_json is) and not
-- pinned, so that it is inlined into its callers.
CREATE OR REPLACE FUNCTION _dg_json_pair(p_k1 text, p_v1 text, p_k2 text, p_v2 text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT '{' || pg_catalog.to_json(p_k1)::text || ':' || p_v1 || ',' || pg_catalog.to_json(p_k2)::text || ':'
              || p_v2 || '}' $$;

-- _dg_lock_commit_parent(thread, fence, parent): lock the rows of a first commit's thread, its
-- fence's thread (both inserted when missing) and its parent thread (only when it has a row: a
-- parent that never existed has no children to protect), FOR UPDATE, in id byte order.
CREATE OR REPLACE FUNCTION _dg_lock_commit_parent(
    p_thread_id text, p_fence_thread_id text, p_parent_thread_id text) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_id text;
BEGIN
    FOR v_id IN
        SELECT DISTINCT u.id COLLATE "C"
          FROM pg_catalog.unnest(ARRAY[p_thread_id, p_fence_thread_id, p_parent_thread_id]) AS u(id)
         WHERE u.id IS NOT NULL ORDER BY 1
    LOOP
        IF v_id = p_thread_id OR v_id = p_fence_thread_id THEN
            PERFORM _dg_lock_thread(v_id);
        ELSE
            PERFORM 1 FROM threads WHERE thread_id = v_id FOR UPDATE;
        END IF;
    END LOOP;
END;
$$;

-- _dg_commit_args(<dg_commit_v1's arguments>, limits): dg_commit_v1's argument checks (DG000),
-- in its order; writes nothing, returns true. Shared with dg_finish_attempt_v2 (SPEC §18.1),
-- which checks a commit exactly as dg_commit_v1 does. Called as an expression, and checking in
-- expressions, it is no statement (SPEC §21) unless an argument is bad.
CREATE OR REPLACE FUNCTION _dg_commit_args(
    p_thread_id text, p_token bigint,
    p_checkpoint_id text, p_parent_id text, p_run_id text,
    p_state text, p_metadata text, p_next text[],
    p_event_kinds text[], p_event_payloads text[], p_event_created_at timestamptz[],
    p_created_at timestamptz, p_parent_thread_id text,
    p_fence_thread_id text, p_fence_token bigint, p_lim limits)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_n integer := coalesce(pg_catalog.cardinality(p_event_kinds), 0);
    v_size bigint := coalesce(pg_catalog.pg_column_size(p_state), 0)
                     + coalesce(pg_catalog.pg_column_size(p_metadata), 0)
                     + coalesce(pg_catalog.pg_column_size(p_next), 0)
                     + coalesce(pg_catalog.pg_column_size(p_event_kinds), 0)
                     + coalesce(pg_catalog.pg_column_size(p_event_payloads), 0)
                     + coalesce(pg_catalog.pg_column_size(p_event_created_at), 0);
    v_ok boolean;
    v_kind text;
BEGIN
    -- The scalars in one inline test; when it fails, the helpers find and name the bad one.
    IF (pg_catalog.octet_length(p_thread_id) BETWEEN 1 AND 512 AND p_token IS NOT NULL
        AND pg_catalog.octet_length(p_checkpoint_id) BETWEEN 1 AND 512
        AND pg_catalog.octet_length(p_run_id) BETWEEN 1 AND 512
        AND coalesce(pg_catalog.octet_length(p_parent_id) BETWEEN 1 AND 512, true)
        AND coalesce(pg_catalog.octet_length(p_parent_thread_id) BETWEEN 1 AND 512, true)
        AND coalesce(pg_catalog.octet_length(p_fence_thread_id) BETWEEN 1 AND 512, true)
        AND v_size <= p_lim.max_call_bytes
        AND pg_catalog.octet_length(p_state) <= p_lim.max_value_bytes
        AND _dg_json_problem(p_state) IS NULL
        AND (p_metadata IS NULL OR (pg_catalog.octet_length(p_metadata) <= p_lim.max_value_bytes
                                    AND _dg_json_problem(p_metadata) IS NULL))) IS NOT TRUE
    THEN
        PERFORM _dg_id(p_thread_id, 'thread_id');
        PERFORM _dg_not_null(p_token IS NOT NULL, 'token');
        PERFORM _dg_id(p_checkpoint_id, 'checkpoint_id');
        PERFORM _dg_opt_id(p_parent_id, 'parent_id');
        PERFORM _dg_id(p_run_id, 'run_id');
        PERFORM _dg_opt_id(p_parent_thread_id, 'parent_thread_id');
        PERFORM _dg_opt_id(p_fence_thread_id, 'fence_thread_id');
        PERFORM _dg_call_bytes(v_size, p_lim.max_call_bytes);
        PERFORM _dg_json(p_state, 'state', p_lim.max_value_bytes);
        IF p_metadata IS NOT NULL THEN
            PERFORM _dg_json(p_metadata, 'metadata', p_lim.max_value_bytes);
        END IF;
    END IF;
    -- The arrays' elements, each check an expression (no statement).
    v_ok := _dg_ids(p_next, 'next', 100000);
    IF v_n > 0 OR pg_catalog.cardinality(p_event_payloads) > 0
       OR pg_catalog.cardinality(p_event_created_at) > 0 THEN
        v_ok := _dg_ids(p_event_kinds, 'event_kinds', 1000000);
        v_ok := _dg_jsons(p_event_payloads, 'event_payloads', p_lim.max_value_bytes, true);
        v_ok := _dg_tss(p_event_created_at, 'event_created_at');
    END IF;
    IF NOT (p_created_at >= '0001-01-01 00:00:00+00'::timestamptz
            AND p_created_at < '10000-01-01 00:00:00+00'::timestamptz) THEN
        PERFORM _dg_ts(p_created_at, 'created_at');
    END IF;
    IF NOT (v_n = coalesce(pg_catalog.cardinality(p_event_payloads), 0)
            AND v_n = coalesce(pg_catalog.cardinality(p_event_created_at), 0)) THEN
        RAISE EXCEPTION 'event arrays must have equal lengths' USING ERRCODE = 'DG000';
    END IF;
    IF (p_fence_thread_id IS NULL) <> (p_fence_token IS NULL) THEN
        RAISE EXCEPTION 'fence thread and fence token go together' USING ERRCODE = 'DG000';
    END IF;
    FOREACH v_kind IN ARRAY coalesce(p_event_kinds, '{}') LOOP
        IF v_kind IS NULL OR v_kind LIKE 'store.%' THEN
            RAISE EXCEPTION 'event kinds must not be NULL or start with "store."' USING ERRCODE = 'DG000';
        END IF;
    END LOOP;
    RETURN true;
END;
$$;

-- _dg_run_open(closed, deleted, run_id): true, or the refusal of a commit whose run is an attempt
-- of a closed entry of the thread (DG103, SPEC §19.1) or of a delete-marked one (DG005), in that
-- order. Called inside the statement that inserts the checkpoint (_dg_commit).
CREATE OR REPLACE FUNCTION _dg_run_open(p_closed boolean, p_deleted boolean, p_run_id text)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_closed THEN
        RAISE EXCEPTION 'run % is an attempt of a closed entry', p_run_id USING ERRCODE = 'DG103';
    END IF;
    IF p_deleted THEN
        RAISE EXCEPTION 'run is an attempt of a queue entry of a deleted thread'
            USING ERRCODE = 'DG005';
    END IF;
    RETURN true;
END;
$$;

-- _dg_commit(<dg_commit_v1's arguments>, own_entry): dg_commit_v1's work after its argument
-- checks (the caller made them): locks, the closed-run check (DG103, SPEC §19.1), the D9
-- checks in order (DG002, DG002, DG003, DG005, DG006), then the checkpoint, its events, the
-- thread's head and the admission marks. Returns the inserted checkpoint row. p_own_entry (SPEC
-- §18.1, dg_finish_attempt_v2): an open entry of this thread that the caller closes in this same
-- transaction under this very claim, holding its lease; the claim is then released in the
-- thread's one UPDATE (one row version, not two), with what the close does to the thread row
-- (migration 0018: the queue head moves past the entry and its lease ends, _dg_queue_head),
-- and that entry's admission mark is left to the caller's close (which writes the entry once).
-- NULL: none of these. p_locked: the thread's row as the caller read it under its lock in this
-- transaction (dg_finish_attempt_v2 locks it to check its lease; locking it again would be one
-- statement more a job), used when no fence or parent thread is to be locked with it.
--
-- Written to SPEC §21's budget: the thread's lock is one statement, and every write one more —
-- the run's entries probed, the checkpoint (its primary key the DG006 check), the events, the
-- thread's head and the admission marks, as one statement of data-modifying CTEs. The checks on
-- the locked thread row are plain expressions; only a refused claim, fence or parent pays for
-- the probe that tells which error comes first.
CREATE OR REPLACE FUNCTION _dg_commit(
    p_thread_id text, p_token bigint,
    p_checkpoint_id text, p_parent_id text, p_run_id text,
    p_state text, p_metadata text, p_next text[],
    p_event_kinds text[], p_event_payloads text[], p_event_created_at timestamptz[],
    p_created_at timestamptz, p_parent_thread_id text,
    p_fence_thread_id text, p_fence_token bigint, p_own_entry bigint,
    p_locked threads DEFAULT NULL)
RETURNS checkpoints
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    t threads;
    f threads;
    c checkpoints;
    v_now timestamptz;
    v_seq bigint;
    v_release boolean := p_own_entry IS NOT NULL;
    v_first_child boolean := false;
    v_closed_run boolean;
BEGIN
    -- A first commit naming a parent thread also locks the parent's row (in id order with the
    -- others), so that delete_thread, holding the parent, sees or excludes every child, and
    -- children land in first_commit_order (issue 12). Whether this is a first commit is read
    -- before locking: if the thread was live then and is not once locked, a delete ran between,
    -- which ended our claim, so the claim check below refuses the commit anyway.
    IF p_parent_thread_id IS NOT NULL AND p_parent_thread_id <> p_thread_id THEN
        v_first_child := NOT coalesce((SELECT x.live FROM threads x
                                        WHERE x.thread_id = p_thread_id), false);
    END IF;
    IF v_first_child THEN
        PERFORM _dg_lock_commit_parent(p_thread_id, p_fence_thread_id, p_parent_thread_id);
        SELECT * INTO t FROM threads WHERE threads.thread_id = p_thread_id;
    ELSIF p_fence_thread_id IS NULL AND p_locked.thread_id = p_thread_id THEN
        t := p_locked;
    ELSIF p_fence_thread_id IS NULL THEN
        -- A thread without a row has no claim: t stays NULL and the claim check raises DG002.
        SELECT * INTO t FROM threads WHERE threads.thread_id = p_thread_id FOR UPDATE;
    ELSE
        PERFORM _dg_lock_threads(ARRAY[p_thread_id, p_fence_thread_id]);
        SELECT * INTO t FROM threads WHERE threads.thread_id = p_thread_id;
    END IF;
    IF p_fence_thread_id IS NOT NULL THEN
        SELECT * INTO f FROM threads WHERE threads.thread_id = p_fence_thread_id;
    END IF;
    v_now := store_now();

    IF NOT coalesce(t.claim_token = p_token, false)
       OR (p_fence_thread_id IS NOT NULL AND NOT coalesce(f.claim_token = p_fence_token, false))
       OR p_parent_id IS DISTINCT FROM (CASE WHEN t.live THEN t.head_id END) THEN
        -- Refused: which error, in D9's order. The run's entries first (SPEC §19.1: a closed
        -- one's run is refused first, under the thread's lock: cancel takes it to close, so a
        -- commit lands before the close or never, whatever became of the claim).
        SELECT coalesce(pg_catalog.bool_or(e.outcome_kind IS NOT NULL AND NOT e.thread_deleted),
                        false)
          INTO v_closed_run
          FROM queue_attempts a JOIN queue_entries e USING (entry_id)
         WHERE a.thread_id = p_thread_id AND a.run_id = p_run_id;
        IF v_closed_run THEN
            RAISE EXCEPTION 'run % is an attempt of a closed entry', p_run_id
                USING ERRCODE = 'DG103';
        END IF;
        IF NOT coalesce(t.claim_token = p_token, false) THEN
            RAISE EXCEPTION 'claim is not current on thread' USING ERRCODE = 'DG002';
        END IF;
        IF p_fence_thread_id IS NOT NULL AND NOT coalesce(f.claim_token = p_fence_token, false)
        THEN
            RAISE EXCEPTION 'fence claim is not current on its thread' USING ERRCODE = 'DG002';
        END IF;
        RAISE EXCEPTION 'parent_id is not the head of the thread' USING ERRCODE = 'DG003';
    END IF;

    -- Every write in one statement. The run's entries (probed under the thread's lock) refuse
    -- a closed or delete-marked run's commit (_dg_run_open raises, and the call's transaction
    -- rolls back); a probe of the checkpoint's primary key is the DG006 check (no row: nothing
    -- else is written, and the caller raises) — a probe, not ON CONFLICT, whose speculative
    -- insertion logs a record more a commit (D221): every writer of a thread's checkpoints
    -- holds its row's lock, as this one does. Then the caller's events and store.checkpoint, numbered
    -- after the thread's last event; the thread's head — and (p_own_entry) the claim released
    -- with it, which is what release_claim after this commit would write (the claim was just
    -- found current) —; and rule 10's admission marks, by primary key over the run's attempts
    -- on this thread (the attempts' (thread_id, run_id) index: never a walk over the store's
    -- open entries, so the cost stays flat however many entries are open, issue 25), only rows
    -- not yet marked.
    v_seq := t.last_seq + coalesce(pg_catalog.cardinality(p_event_kinds), 0) + 1;
    WITH run AS (
             SELECT coalesce(pg_catalog.bool_or(e.outcome_kind IS NOT NULL
                                                AND NOT e.thread_deleted), false) AS closed,
                    coalesce(pg_catalog.bool_or(e.thread_deleted), false) AS deleted,
                    pg_catalog.array_agg(e.entry_id) FILTER (
                        WHERE e.outcome_kind IS NULL AND NOT e.admitted
                          AND e.entry_id IS DISTINCT FROM p_own_entry) AS unmarked
               FROM queue_attempts a JOIN queue_entries e USING (entry_id)
              WHERE a.thread_id = p_thread_id AND a.run_id = p_run_id),
         checkpoint AS (
             INSERT INTO checkpoints (thread_id, checkpoint_id, seq, parent_id, run_id, state,
                                      metadata, next, created_at, committed_at)
             SELECT p_thread_id, p_checkpoint_id, v_seq, p_parent_id, p_run_id, p_state,
                    coalesce(p_metadata, 'null'), coalesce(p_next, '{}'),
                    coalesce(p_created_at, v_now), v_now
               FROM run
              -- CASE: the run's check (DG005) before the id's (DG006), in D9's order.
              WHERE CASE WHEN _dg_run_open(run.closed, run.deleted, p_run_id)
                         THEN NOT EXISTS (SELECT 1 FROM checkpoints x
                                           WHERE x.thread_id = p_thread_id
                                             AND x.checkpoint_id = p_checkpoint_id) END
             RETURNING *),
         appended AS (
             INSERT INTO events (thread_id, seq, kind, payload, run_id, created_at, committed_at)
             SELECT p_thread_id, t.last_seq + x.ord, x.kind, coalesce(x.payload, 'null'),
                    p_run_id, coalesce(x.created_at, v_now), v_now
               FROM checkpoint,
                    ROWS FROM (pg_catalog.unnest(p_event_kinds),
                               pg_catalog.unnest(p_event_payloads),
                               pg_catalog.unnest(p_event_created_at)) WITH ORDINALITY
                    AS x(kind, payload, created_at, ord)
             UNION ALL
             SELECT p_thread_id, v_seq, 'store.checkpoint',
                    _dg_json_pair('checkpoint_id', pg_catalog.to_json(p_checkpoint_id)::text,
                                  'run_id', pg_catalog.to_json(p_run_id)::text),
                    p_run_id, v_now, v_now
               FROM checkpoint),
         head AS (
             UPDATE threads h
                SET live = true, last_seq = v_seq, head_id = p_checkpoint_id, updated_at = v_now,
                    parent_thread_id = CASE WHEN t.live THEN h.parent_thread_id
                                            ELSE p_parent_thread_id END,
                    created_at = CASE WHEN t.live THEN h.created_at ELSE v_now END,
                    first_commit_order = CASE WHEN t.live THEN h.first_commit_order
                                              ELSE pg_catalog.nextval('thread_first_commit_seq')
                                         END,
                    claim_token = CASE WHEN v_release THEN NULL ELSE h.claim_token END,
                    claim_holder = CASE WHEN v_release THEN NULL ELSE h.claim_holder END,
                    claim_expires_at = CASE WHEN v_release THEN NULL ELSE h.claim_expires_at END,
                    claim_ttl = CASE WHEN v_release THEN NULL ELSE h.claim_ttl END,
                    -- (p_own_entry) the queue head past the entry, which ends its lease.
                    head_entry_id = CASE WHEN v_release THEN n.entry_id ELSE h.head_entry_id END,
                    head_tenant = CASE WHEN v_release THEN n.tenant ELSE h.head_tenant END,
                    head_priority_key = CASE WHEN v_release THEN n.priority_key
                                             ELSE h.head_priority_key END,
                    head_kind = CASE WHEN v_release THEN n.kind ELSE h.head_kind END,
                    lease_expires_at = CASE WHEN v_release THEN n.expires
                                            ELSE h.lease_expires_at END,
                    lease_entry_id = CASE WHEN v_release THEN NULL ELSE h.lease_entry_id END,
                    lease_until = CASE WHEN v_release THEN NULL ELSE h.lease_until END,
                    lease_token = CASE WHEN v_release THEN NULL ELSE h.lease_token END,
                    lease_holder = CASE WHEN v_release THEN NULL ELSE h.lease_holder END,
                    lease_ttl = CASE WHEN v_release THEN NULL ELSE h.lease_ttl END,
                    lease_kind = CASE WHEN v_release THEN NULL ELSE h.lease_kind END,
                    lease_tenant = CASE WHEN v_release THEN NULL ELSE h.lease_tenant END
               FROM checkpoint
               LEFT JOIN _dg_queue_head(p_thread_id, p_own_entry, true, v_now) n ON v_release
              WHERE h.thread_id = p_thread_id),
         marks AS (
             UPDATE queue_entries e SET admitted = true
               FROM run, checkpoint
              WHERE e.entry_id = ANY (run.unmarked) AND e.outcome_kind IS NULL
                AND NOT e.admitted)
    SELECT checkpoint.* INTO c FROM checkpoint;
    IF c.checkpoint_id IS NULL THEN
        RAISE EXCEPTION 'checkpoint id already names a checkpoint of the thread'
            USING ERRCODE = 'DG006';
    END IF;
    RETURN c;
END;
$$;

-- dg_commit_v1: append a checkpoint and its events under the thread's current claim. Locks the
-- thread (and the fence's thread, in id order), then checks in order: p_run_id not an attempt
-- of a closed entry of this thread (DG103, SPEC §19.1), claim current (DG002),
-- fence current on its thread (DG002), p_parent_id is the head (DG003), run is not an attempt of
-- a delete-marked entry of this thread (DG005), checkpoint id new on the thread (DG006). Numbers
-- the caller's events, then store.checkpoint; stamps committed_at; marks admitted the open
-- entries of this thread that recorded p_run_id. DG000 for a bad argument: identifiers (1..512
-- UTF-8 bytes), JSON texts (state, metadata, event payloads: valid, depth <= 512, each at most
-- max_value_bytes), timestamps (years 1..9999), and max_call_bytes for the whole call.
CREATE OR REPLACE FUNCTION dg_commit_v1(
    p_thread_id text, p_token bigint,
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
#variable_conflict use_column
DECLARE
    c checkpoints;
    v_ok boolean;
BEGIN
    v_ok := _dg_commit_args(p_thread_id, p_token, p_checkpoint_id, p_parent_id, p_run_id,
                            p_state, p_metadata, p_next, p_event_kinds, p_event_payloads,
                            p_event_created_at, p_created_at, p_parent_thread_id,
                            p_fence_thread_id, p_fence_token, _dg_limits());
    c := _dg_commit(p_thread_id, p_token, p_checkpoint_id, p_parent_id, p_run_id, p_state,
                    p_metadata, p_next, p_event_kinds, p_event_payloads, p_event_created_at,
                    p_created_at, p_parent_thread_id, p_fence_thread_id, p_fence_token, NULL);
    -- The row without a statement (SPEC §21): a new checkpoint has no writes yet.
    thread_id := c.thread_id; checkpoint_id := c.checkpoint_id; parent_id := c.parent_id;
    run_id := c.run_id; state := c.state; metadata := c.metadata; next := c.next;
    created_at := c.created_at; committed_at := c.committed_at; seq := c.seq;
    writes := '[]'::json;
    RETURN NEXT;
END;
$$;
