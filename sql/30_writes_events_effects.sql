-- put_writes, append_events, record_effect (SPEC §4; rules 11-12;
-- D10: claim checks before existence checks).

-- _dg_lock_claimed(thread_id, token): lock the thread FOR UPDATE and run the checks every
-- claim-taking write starts with (D10): token is the current claim (DG002), then the thread has
-- a commit (DG404). Returns the locked row.
CREATE OR REPLACE FUNCTION _dg_lock_claimed(p_thread_id text, p_token bigint) RETURNS threads
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    t threads;
BEGIN
    SELECT * INTO t FROM threads WHERE thread_id = p_thread_id FOR UPDATE;
    IF NOT FOUND OR NOT coalesce(t.claim_token = p_token, false) THEN
        RAISE EXCEPTION 'claim is not current on thread' USING ERRCODE = 'DG002';
    END IF;
    IF NOT t.live THEN
        RAISE EXCEPTION 'thread has no commit' USING ERRCODE = 'DG404';
    END IF;
    RETURN t;
END;
$$;

-- _dg_refuse_closed_run(thread_id, run_id): SPEC §19.1: a write under the run id of an attempt
-- of a closed entry of the thread (completed, failed, cancelled, interrupted; not delete-marked,
-- whose runs keep DG005) raises DG103 and writes nothing. The caller holds the thread's row lock,
-- which cancel takes before it closes (queue order), so a write lands before the close or
-- never. One probe of queue_attempts_run_idx; NULL run_id: nothing to check. A write that names
-- no run of its own is under its claim's holder (workers claim with holder = run id, SPEC §5):
-- callers pass _dg_write_run's answer (SPEC §23.5: refused whoever closed the entry).
CREATE OR REPLACE FUNCTION _dg_refuse_closed_run(p_thread_id text, p_run_id text) RETURNS void
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF p_run_id IS NOT NULL
       AND EXISTS (SELECT 1 FROM queue_attempts a JOIN queue_entries e USING (entry_id)
                    WHERE a.thread_id = p_thread_id AND a.run_id = p_run_id
                      AND e.outcome_kind IS NOT NULL AND NOT e.thread_deleted) THEN
        RAISE EXCEPTION 'run % is an attempt of a closed entry', p_run_id USING ERRCODE = 'DG103';
    END IF;
END;
$$;

-- _dg_write_run(run_id, token, claim_token, claim_holder): the run a claim-fenced write is under:
-- its own run id, else the holder of its claim when that claim (token) is the thread's current
-- one (claim_token, claim_holder read under the row's lock); NULL when neither (the claim check
-- that follows refuses a claim that is not current). An expression: no statement.
CREATE OR REPLACE FUNCTION _dg_write_run(p_run_id text, p_token bigint, p_claim_token bigint,
                                         p_claim_holder text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT coalesce(p_run_id, CASE WHEN p_claim_token = p_token THEN p_claim_holder END) $$;

-- _dg_writes_target(closed, found, holder): true, or the refusal of put_writes in its order:
-- DG103 when its claim's holder is a run of a closed entry of the thread (SPEC §19.1, §23.5:
-- put_writes carries no run id; the run is its claim's holder), then DG404 when the checkpoint
-- is not the thread's. Called inside the statement that inserts the writes (no statement more).
CREATE OR REPLACE FUNCTION _dg_writes_target(p_closed boolean, p_found boolean, p_holder text)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_closed THEN
        RAISE EXCEPTION 'run % is an attempt of a closed entry', p_holder USING ERRCODE = 'DG103';
    END IF;
    IF NOT p_found THEN
        RAISE EXCEPTION 'checkpoint not found in thread' USING ERRCODE = 'DG404';
    END IF;
    RETURN true;
END;
$$;

-- _dg_append(thread, events..., run_id, now): number and insert events after the thread's
-- last seq, move last_seq and updated_at. The caller holds the thread's lock. Returns the new
-- last seq.
CREATE OR REPLACE FUNCTION _dg_append(
    p_thread_id text, p_kinds text[], p_payloads text[], p_created_at timestamptz[],
    p_run_id text, p_now timestamptz) RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_seq bigint;
    v_n integer := coalesce(pg_catalog.cardinality(p_kinds), 0);
BEGIN
    SELECT last_seq INTO v_seq FROM threads WHERE thread_id = p_thread_id;
    IF v_n = 0 THEN
        RETURN v_seq;
    END IF;
    FOR i IN 1 .. v_n LOOP
        v_seq := v_seq + 1;
        INSERT INTO events (thread_id, seq, kind, payload, run_id, created_at, committed_at)
        VALUES (p_thread_id, v_seq, p_kinds[i], coalesce(p_payloads[i], 'null'), p_run_id,
                coalesce(p_created_at[i], p_now), p_now);
    END LOOP;
    UPDATE threads SET last_seq = v_seq, updated_at = p_now WHERE thread_id = p_thread_id;
    RETURN v_seq;
END;
$$;

-- dg_put_writes_v2: attach pending writes to a checkpoint of the thread; a write's index is its
-- 0-based array position and the first value under (task_id, channel, index) wins (its task path
-- included). p_task_paths holds each write's task path (LangGraph's task_path, 0..4096 bytes;
-- a NULL array: '' for every write); reads order a checkpoint's writes by (task_path, task_id,
-- index). Raises DG002 (claim not current), DG404 (thread has no commit), DG103 (the claim's
-- holder is the run id of an attempt of a closed entry of the thread: SPEC §19.1, §23.5; a
-- worker claims as its run, and put_writes names no run of its own), DG404 (checkpoint not in
-- the thread), DG000 (bad argument, unequal arrays).
CREATE OR REPLACE FUNCTION dg_put_writes_v2(
    p_thread_id text, p_token bigint, p_checkpoint_id text,
    p_task_ids text[], p_channels text[], p_values text[], p_task_paths text[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_n integer := coalesce(pg_catalog.cardinality(p_task_ids), 0);
    v_lim limits := _dg_limits();
    v_size bigint := coalesce(pg_catalog.pg_column_size(p_task_ids), 0)
                     + coalesce(pg_catalog.pg_column_size(p_channels), 0)
                     + coalesce(pg_catalog.pg_column_size(p_values), 0)
                     + coalesce(pg_catalog.pg_column_size(p_task_paths), 0);
    v_ok boolean;
    t threads;
BEGIN
    -- The checks as expressions, no statement (SPEC §21); the scalars in one inline test first:
    -- when it fails, the helpers name the bad one. A NULL task id, channel or value is refused
    -- by the array checks.
    IF (pg_catalog.octet_length(p_thread_id) BETWEEN 1 AND 512 AND p_token IS NOT NULL
        AND pg_catalog.octet_length(p_checkpoint_id) BETWEEN 1 AND 512
        AND v_size <= v_lim.max_call_bytes) IS NOT TRUE THEN
        PERFORM _dg_id(p_thread_id, 'thread_id');
        PERFORM _dg_not_null(p_token IS NOT NULL, 'token');
        PERFORM _dg_id(p_checkpoint_id, 'checkpoint_id');
        PERFORM _dg_call_bytes(v_size, v_lim.max_call_bytes);
    END IF;
    v_ok := _dg_ids(p_task_ids, 'task_ids', 1000000);
    v_ok := _dg_ids(p_channels, 'channels', 1000000);
    v_ok := _dg_jsons(p_values, 'values', v_lim.max_value_bytes, false);
    v_ok := _dg_task_paths(p_task_paths, 'task_paths', 1000000);
    IF NOT (v_n = coalesce(pg_catalog.cardinality(p_channels), 0)
            AND v_n = coalesce(pg_catalog.cardinality(p_values), 0)
            AND (p_task_paths IS NULL OR v_n = coalesce(pg_catalog.cardinality(p_task_paths), 0)))
    THEN
        RAISE EXCEPTION 'write arrays must have equal lengths' USING ERRCODE = 'DG000';
    END IF;
    t := _dg_lock_claimed(p_thread_id, p_token);
    IF v_n = 0 THEN
        PERFORM _dg_writes_target(
            EXISTS (SELECT 1 FROM queue_attempts a JOIN queue_entries e USING (entry_id)
                     WHERE a.thread_id = p_thread_id AND a.run_id = t.claim_holder
                       AND e.outcome_kind IS NOT NULL AND NOT e.thread_deleted),
            EXISTS (SELECT 1 FROM checkpoints
                     WHERE thread_id = p_thread_id AND checkpoint_id = p_checkpoint_id),
            t.claim_holder);
        RETURN;
    END IF;
    -- The writes, with the statement's one-time filter checking, in a snapshot taken after the
    -- thread's lock (a close that held it is seen): the claim's holder is no run of a closed
    -- entry (DG103, _dg_refuse_closed_run's probe), then the checkpoint's existence (DG404).
    INSERT INTO pending_writes (thread_id, checkpoint_id, task_id, channel, idx, value, task_path)
    SELECT p_thread_id, p_checkpoint_id, w.task_id, w.channel, (w.ord - 1)::integer, w.value,
           coalesce(p_task_paths[w.ord], '')
      FROM ROWS FROM (pg_catalog.unnest(p_task_ids), pg_catalog.unnest(p_channels),
                     pg_catalog.unnest(p_values)) WITH ORDINALITY
           AS w(task_id, channel, value, ord)
     WHERE _dg_writes_target(
               EXISTS (SELECT 1 FROM queue_attempts a JOIN queue_entries e USING (entry_id)
                        WHERE a.thread_id = p_thread_id AND a.run_id = t.claim_holder
                          AND e.outcome_kind IS NOT NULL AND NOT e.thread_deleted),
               EXISTS (SELECT 1 FROM checkpoints c
                        WHERE c.thread_id = p_thread_id AND c.checkpoint_id = p_checkpoint_id),
               t.claim_holder)
     ORDER BY w.ord
    ON CONFLICT DO NOTHING;
END;
$$;

-- dg_append_events_v1: append events (in array order) to the thread's log without a
-- checkpoint, each carrying p_run_id (may be NULL). Returns the appended events. Raises DG103
-- (p_run_id — or, when NULL, the holder of the current claim p_token — is an attempt of a closed
-- entry, SPEC §19.1, §23.5, checked first), DG002 (claim not current), DG404 (thread has no
-- commit), DG000 (store.* kind, unequal arrays).
CREATE OR REPLACE FUNCTION dg_append_events_v1(
    p_thread_id text, p_token bigint,
    p_kinds text[], p_payloads text[], p_created_at timestamptz[], p_run_id text)
RETURNS TABLE (thread_id text, seq bigint, kind text, payload text, run_id text,
               created_at timestamptz, committed_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    t threads;
    v_now timestamptz;
    v_n integer := coalesce(pg_catalog.cardinality(p_kinds), 0);
    v_lim limits := _dg_limits();
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    PERFORM _dg_not_null(p_token IS NOT NULL, 'token');
    PERFORM _dg_call_bytes(
        coalesce(pg_catalog.pg_column_size(p_kinds), 0) + coalesce(pg_catalog.pg_column_size(p_payloads), 0)
        + coalesce(pg_catalog.pg_column_size(p_created_at), 0),
        v_lim.max_call_bytes);
    PERFORM _dg_ids(p_kinds, 'kinds', 1000000);
    PERFORM _dg_jsons(p_payloads, 'payloads', v_lim.max_value_bytes, true);
    PERFORM _dg_tss(p_created_at, 'created_at');
    PERFORM _dg_opt_id(p_run_id, 'run_id');
    PERFORM _dg_check(v_n = coalesce(pg_catalog.cardinality(p_payloads), 0)
                      AND v_n = coalesce(pg_catalog.cardinality(p_created_at), 0),
                      'event arrays must have equal lengths');
    PERFORM _dg_check(NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(p_kinds) k(kind)
                                   WHERE k.kind IS NULL OR k.kind LIKE 'store.%'),
                      'event kinds must not be NULL or start with "store."');
    SELECT x.* INTO t FROM threads x WHERE x.thread_id = p_thread_id FOR UPDATE;
    PERFORM _dg_refuse_closed_run(p_thread_id,
                                  _dg_write_run(p_run_id, p_token, t.claim_token, t.claim_holder));
    t := _dg_lock_claimed(p_thread_id, p_token);
    v_now := store_now();
    PERFORM _dg_append(p_thread_id, p_kinds, p_payloads, p_created_at, p_run_id, v_now);
    RETURN QUERY
    SELECT e.thread_id::text, e.seq, e.kind, e.payload, e.run_id, e.created_at, e.committed_at
      FROM events e
     WHERE e.thread_id = p_thread_id AND e.seq > t.last_seq
     ORDER BY e.seq;
END;
$$;

-- dg_record_effect_v1: record an effect's value under a key of the thread; the first write
-- wins, and a later call returns that first record with existing = true. Raises DG103 (p_run_id
-- — or, when NULL, the holder of the current claim p_token — is an attempt of a closed entry,
-- SPEC §19.1, §23.5, checked first), DG002 (claim not current), DG404 (thread has no commit),
-- DG000.
CREATE OR REPLACE FUNCTION dg_record_effect_v1(
    p_thread_id text, p_token bigint, p_key text, p_value text, p_run_id text)
RETURNS TABLE (thread_id text, key text, value text, run_id text, recorded_at timestamptz,
               existing boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    x effects;
    v_row threads;
    v_now timestamptz;
    v_lim limits := _dg_limits();
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    PERFORM _dg_not_null(p_token IS NOT NULL, 'token');
    PERFORM _dg_id(p_key, 'key');
    PERFORM _dg_call_bytes(coalesce(pg_catalog.pg_column_size(p_value), 0), v_lim.max_call_bytes);
    IF p_value IS NOT NULL THEN
        PERFORM _dg_json(p_value, 'value', v_lim.max_value_bytes);
    END IF;
    PERFORM _dg_opt_id(p_run_id, 'run_id');
    SELECT t.* INTO v_row FROM threads t WHERE t.thread_id = p_thread_id FOR UPDATE;
    PERFORM _dg_refuse_closed_run(p_thread_id, _dg_write_run(p_run_id, p_token, v_row.claim_token,
                                                             v_row.claim_holder));
    PERFORM _dg_lock_claimed(p_thread_id, p_token);
    SELECT * INTO x FROM effects WHERE effects.thread_id = p_thread_id AND effects.key = p_key;
    IF FOUND THEN
        RETURN QUERY SELECT x.thread_id::text, x.key, x.value, x.run_id, x.recorded_at, true;
        RETURN;
    END IF;
    v_now := store_now();
    INSERT INTO effects (thread_id, key, value, run_id, recorded_at)
    VALUES (p_thread_id, p_key, coalesce(p_value, 'null'), p_run_id, v_now);
    RETURN QUERY SELECT p_thread_id, p_key, coalesce(p_value, 'null'), p_run_id, v_now, false;
END;
$$;
