-- The worker fast path (SPEC §11): §5's steps, each group in one transaction. Every function
-- here composes the step functions (dg_lease_v1, dg_claim_v1, dg_latest_of_runs_v1, dg_renew_v1,
-- dg_renew_claim_v1, dg_close_v1, dg_release_claim_v1, dg_submit_v1) rather than copying them, so
-- the fast path answers exactly as the steps do. Locks are taken in the queue functions' order —
-- queue_threads row, thread row, entry row — so no fast-path call deadlocks with a step call.

-- dg_begin_attempt_v1: lease with p_run_id (dg_lease_v1); if the attempt started, claim the
-- thread as p_run_id for p_claim_ttl (dg_claim_v1; a live claim (DG001) leaves the claim columns
-- NULL and the lease taken); then, under the claim, latest_of_runs over the entry's attempts. The
-- entry columns are read after the claim (in this transaction they are the lease's). Returns
-- dg_lease_v1's row, then claim_token, claim_expires_at, claim_ttl, then latest_* (the
-- checkpoint, all NULL when none or unclaimed), then not_before and retry_of (columns added at
-- the end, as on every entry row), then head_* last: the thread's head as dg_get_v1 reads it,
-- under the claim (all NULL when unclaimed or the thread has no checkpoint), so a worker needs
-- no read of its own before its first commit. No row when nothing is available. Raises DG000.
-- SPEC §15 (issue 27): p_kinds (added at the end, default NULL: every kind) as dg_lease_v1's;
-- the row gained priority and kind at its very end.
DROP FUNCTION IF EXISTS dg_begin_attempt_v1(text, interval, interval, boolean, text, text);
DROP FUNCTION IF EXISTS dg_begin_attempt_v1(text, interval, interval, boolean, text, text, text[]);
CREATE OR REPLACE FUNCTION dg_begin_attempt_v1(
    p_holder text, p_ttl interval, p_claim_ttl interval, p_any_tenant boolean, p_tenant text,
    p_run_id text, p_kinds text[] DEFAULT NULL)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint,
               token bigint, holder text, expires_at timestamptz, ttl interval,
               attempt_kind text, attempt_number integer,
               claim_token bigint, claim_expires_at timestamptz, claim_ttl interval,
               latest_checkpoint_id text, latest_parent_id text, latest_run_id text,
               latest_state text, latest_metadata text, latest_next text[],
               latest_created_at timestamptz, latest_committed_at timestamptz,
               latest_seq bigint, latest_writes json,
               not_before timestamptz, retry_of bigint,
               head_checkpoint_id text, head_parent_id text, head_run_id text,
               head_state text, head_metadata text, head_next text[],
               head_created_at timestamptz, head_committed_at timestamptz,
               head_seq bigint, head_writes json,
               priority integer, kind text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    l record;
    v_token bigint;
    v_expires timestamptz;
    v_ttl interval;
    v_runs text[] := ARRAY[]::text[];
BEGIN
    PERFORM _dg_id(p_holder, 'holder');
    PERFORM _dg_id(p_run_id, 'run_id');
    PERFORM _dg_not_null(p_any_tenant IS NOT NULL, 'any_tenant');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    PERFORM _dg_not_null(p_ttl IS NOT NULL, 'ttl');
    PERFORM _dg_duration(p_ttl, 'ttl', false);
    PERFORM _dg_not_null(p_claim_ttl IS NOT NULL, 'claim_ttl');
    PERFORM _dg_duration(p_claim_ttl, 'claim_ttl', false);
    SELECT * INTO l FROM dg_lease_v1(p_holder, p_ttl, p_any_tenant, p_tenant, p_run_id,
                                     p_kinds);  -- p_kinds: SPEC §15
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF l.attempt_kind = 'started' THEN
        BEGIN
            SELECT c.token, c.expires_at, c.ttl INTO v_token, v_expires, v_ttl
              FROM dg_claim_v1(l.thread_id, p_run_id, p_claim_ttl) c;
        EXCEPTION WHEN SQLSTATE 'DG001' THEN
            v_token := NULL;  -- busy: the worker waits for the claim step by step
        END;
        IF v_token IS NOT NULL THEN
            v_runs := ARRAY(SELECT a ->> 'run_id' FROM pg_catalog.json_array_elements(l.attempts) a);
        END IF;
    END IF;
    -- v_runs is empty unless claimed: then dg_latest_of_runs_v1 finds nothing.
    RETURN QUERY
    SELECT l.entry_id, l.tenant, l.thread_id, l.key, l.input, l.mode, l.max_attempts,
           l.attempts, l.admitted, l.thread_deleted, l.submitted_at, l.lease_holder,
           l.lease_expires_at, l.outcome_kind, l.outcome_detail, l.closed_at, l.closed_at_seq,
           l.token, l.holder, l.expires_at, l.ttl, l.attempt_kind, l.attempt_number,
           v_token, v_expires, v_ttl,
           k.checkpoint_id, k.parent_id, k.run_id, k.state, k.metadata, k.next, k.created_at,
           k.committed_at, k.seq, k.writes, l.not_before, l.retry_of,
           g.checkpoint_id, g.parent_id, g.run_id, g.state, g.metadata, g.next, g.created_at,
           g.committed_at, g.seq, g.writes, l.priority, l.kind
      FROM (SELECT 1) one
      LEFT JOIN LATERAL dg_latest_of_runs_v1(l.thread_id, v_runs) k ON true
      LEFT JOIN LATERAL (SELECT * FROM dg_get_v1(l.thread_id, NULL)
                          WHERE v_token IS NOT NULL) g ON true;
END;
$$;

-- dg_renew_attempt_v1: renew the lease (dg_renew_v1, its ttl; p_tenant the lease's entry's
-- tenant, as for dg_renew_v1) and the claim p_claim_token on the entry's thread
-- (dg_renew_claim_v1) in one transaction. The lease is checked first, so its errors come first
-- as in the step-by-step renewal: DG103, DG102, then DG002. Returns dg_renew_v1's row, then
-- claim_holder, claim_token, claim_expires_at, claim_ttl, then not_before and retry_of last.
-- Raises DG000.
DROP FUNCTION IF EXISTS dg_renew_attempt_v1(bigint, bigint, bigint, text);
CREATE OR REPLACE FUNCTION dg_renew_attempt_v1(p_entry_id bigint, p_token bigint,
                                               p_claim_token bigint, p_tenant text)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint,
               token bigint, holder text, expires_at timestamptz, ttl interval,
               claim_holder text, claim_token bigint, claim_expires_at timestamptz,
               claim_ttl interval, not_before timestamptz, retry_of bigint,
               priority integer, kind text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    e queue_entries;
    c record;
BEGIN
    PERFORM _dg_not_null(p_entry_id IS NOT NULL, 'entry_id');
    PERFORM _dg_not_null(p_token IS NOT NULL, 'token');
    PERFORM _dg_not_null(p_claim_token IS NOT NULL, 'claim_token');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    -- The lease's checks and locks first (queue_threads, thread shared, entry), in queue order.
    e := _dg_lock_lease(p_entry_id, p_token, true, p_tenant);
    SELECT * INTO c FROM dg_renew_claim_v1(e.thread_id, p_claim_token);
    RETURN QUERY
    SELECT r.entry_id, r.tenant, r.thread_id, r.key, r.input, r.mode, r.max_attempts,
           r.attempts, r.admitted, r.thread_deleted, r.submitted_at, r.lease_holder,
           r.lease_expires_at, r.outcome_kind, r.outcome_detail, r.closed_at, r.closed_at_seq,
           r.token, r.holder, r.expires_at, r.ttl, c.holder, c.token, c.expires_at, c.ttl,
           r.not_before, r.retry_of, r.priority, r.kind
      FROM dg_renew_v1(p_entry_id, p_token, NULL, p_tenant) r;
END;
$$;

-- dg_finish_attempt_v1: close the entry (dg_close_v1: its checks and errors, nothing written on
-- error; p_tenant as for dg_close_v1), and release the claim p_claim_token on the entry's thread
-- (dg_release_claim_v1) if it is still the thread's current claim; left alone otherwise, and
-- when p_claim_token is NULL. Returns dg_close_v1's row. Raises DG103, DG102, DG000.
DROP FUNCTION IF EXISTS dg_finish_attempt_v1(bigint, bigint, text, text, bigint, text);
CREATE OR REPLACE FUNCTION dg_finish_attempt_v1(p_entry_id bigint, p_token bigint,
                                                p_outcome_kind text, p_outcome_detail text,
                                                p_claim_token bigint, p_tenant text)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint, not_before timestamptz, retry_of bigint,
               priority integer, kind text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    e queue_entries;
BEGIN
    PERFORM _dg_not_null(p_entry_id IS NOT NULL, 'entry_id');
    PERFORM _dg_not_null(p_token IS NOT NULL, 'token');
    PERFORM _dg_check(p_outcome_kind IN ('completed', 'failed', 'cancelled', 'interrupted'),
                      'outcome_kind must be completed, failed, cancelled or interrupted');
    PERFORM _dg_not_null(p_outcome_detail IS NOT NULL, 'outcome_detail');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    -- close's lease checks (DG103, DG102) first, taking the locks in queue order; dg_close_v1
    -- checks the outcome's JSON itself (an error there rolls the release back too).
    e := _dg_lock_lease(p_entry_id, p_token, true, p_tenant);
    IF p_claim_token IS NOT NULL THEN
        PERFORM 1 FROM threads t
         WHERE t.thread_id = e.thread_id AND t.claim_token = p_claim_token FOR UPDATE;
        IF FOUND THEN
            PERFORM dg_release_claim_v1(e.thread_id, p_claim_token);
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM dg_close_v1(p_entry_id, p_token, p_outcome_kind,
                                           p_outcome_detail, p_tenant);
END;
$$;

-- dg_submit_many_v1: submit each run (dg_submit_v1) in order, in one transaction: any error
-- writes nothing. The arrays are the arguments of dg_submit_v1, one element per submission, of
-- equal length 1..10000. The threads' queue rows are locked first in id byte order, so two
-- concurrent batches never deadlock. Returns (ordinal, entry_id, existing) in submission order.
-- Raises what dg_submit_v1 raises, and DG000.
-- SPEC §15 (issue 27; added at the end, default NULL: 0 and 'default' for each): p_priorities
-- and p_kinds, of the same length when given.
DROP FUNCTION IF EXISTS dg_submit_many_v1(text[], text[], text[], text[], text[], integer[]);
CREATE OR REPLACE FUNCTION dg_submit_many_v1(
    p_thread_ids text[], p_inputs text[], p_tenants text[], p_keys text[], p_modes text[],
    p_max_attempts integer[], p_priorities integer[] DEFAULT NULL, p_kinds text[] DEFAULT NULL)
RETURNS TABLE (ordinal integer, entry_id bigint, existing boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    n integer := coalesce(pg_catalog.cardinality(p_thread_ids), 0);
    v_id text;
BEGIN
    PERFORM _dg_not_null(p_thread_ids IS NOT NULL, 'thread_ids');
    PERFORM _dg_not_null(p_inputs IS NOT NULL, 'inputs');
    PERFORM _dg_not_null(p_tenants IS NOT NULL, 'tenants');
    PERFORM _dg_not_null(p_keys IS NOT NULL, 'keys');
    PERFORM _dg_not_null(p_modes IS NOT NULL, 'modes');
    PERFORM _dg_not_null(p_max_attempts IS NOT NULL, 'max_attempts');
    PERFORM _dg_check(n BETWEEN 1 AND 10000, 'submissions must number 1..10000');
    PERFORM _dg_check(pg_catalog.cardinality(p_inputs) = n AND pg_catalog.cardinality(p_tenants) = n
                      AND pg_catalog.cardinality(p_keys) = n AND pg_catalog.cardinality(p_modes) = n
                      AND pg_catalog.cardinality(p_max_attempts) = n,
                      'submission arrays must have equal lengths');
    PERFORM _dg_check(coalesce(pg_catalog.cardinality(p_priorities), n) = n
                      AND coalesce(pg_catalog.cardinality(p_kinds), n) = n,
                      'submission arrays must have equal lengths');  -- SPEC §15
    PERFORM _dg_ids(p_thread_ids, 'thread_ids', 10000);
    PERFORM _dg_call_bytes(coalesce(pg_catalog.pg_column_size(p_inputs), 0),
                           (_dg_limits()).max_call_bytes);
    FOR v_id IN SELECT DISTINCT u.id COLLATE "C" FROM pg_catalog.unnest(p_thread_ids) AS u(id) ORDER BY 1
    LOOP
        PERFORM _dg_lock_queue_thread(v_id);
    END LOOP;
    FOR i IN 1 .. n LOOP
        RETURN QUERY
        SELECT i, s.entry_id, s.existing
          FROM dg_submit_v1(p_thread_ids[i], p_inputs[i], p_tenants[i], p_keys[i], p_modes[i],
                            p_max_attempts[i], NULL, coalesce(p_priorities[i], 0),
                            coalesce(p_kinds[i], 'default')) s;  -- SPEC §15
    END LOOP;
END;
$$;
