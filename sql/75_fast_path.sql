-- The worker fast path (SPEC §11): §5's steps, each group in one transaction. Every function
-- here composes the step functions (dg_lease_v1, dg_claim_v1, dg_latest_of_runs_v1, dg_renew_v1,
-- dg_renew_claim_v1, dg_close_v1, dg_release_claim_v1, dg_submit_v1) rather than copying them, so
-- the fast path answers exactly as the steps do. Locks are taken in the queue functions' order —
-- thread row, then entry rows — so no fast-path call deadlocks with a step call.

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
-- Deprecated since 0.2.0: use dg_begin_attempt_v2, which plans a retry with its retry chain's
-- runs (SPEC §19.3, §23.5); this one's latest_* stay those of the entry's own attempts. Since
-- 0.2.0 it is v2 with those columns read again for a claimed retry (the same answers).
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
DECLARE
    b record;
    k record;
BEGIN
    -- dg_begin_attempt_v2 does the work (its checks, errors and row are v1's, plus plan); only
    -- a claimed retry's latest_* differ: v1's are those of the entry's own attempts.
    SELECT * INTO b FROM dg_begin_attempt_v2(p_holder, p_ttl, p_claim_ttl, p_any_tenant,
                                             p_tenant, p_run_id, p_kinds);
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF b.retry_of IS NOT NULL AND b.claim_token IS NOT NULL THEN
        SELECT * INTO k FROM dg_latest_of_runs_v1(b.thread_id, ARRAY(
            SELECT a ->> 'run_id' FROM pg_catalog.json_array_elements(b.attempts) a));
    ELSE
        SELECT b.latest_checkpoint_id AS checkpoint_id, b.latest_parent_id AS parent_id,
               b.latest_run_id AS run_id, b.latest_state AS state,
               b.latest_metadata AS metadata, b.latest_next AS next,
               b.latest_created_at AS created_at, b.latest_committed_at AS committed_at,
               b.latest_seq AS seq, b.latest_writes AS writes INTO k;
    END IF;
    RETURN QUERY SELECT
        b.entry_id, b.tenant, b.thread_id, b.key, b.input, b.mode, b.max_attempts, b.attempts,
        b.admitted, b.thread_deleted, b.submitted_at, b.lease_holder, b.lease_expires_at,
        b.outcome_kind, b.outcome_detail, b.closed_at, b.closed_at_seq, b.token, b.holder,
        b.expires_at, b.ttl, b.attempt_kind, b.attempt_number, b.claim_token,
        b.claim_expires_at, b.claim_ttl, k.checkpoint_id, k.parent_id, k.run_id, k.state,
        k.metadata, k.next, k.created_at, k.committed_at, k.seq, k.writes, b.not_before,
        b.retry_of, b.head_checkpoint_id, b.head_parent_id, b.head_run_id, b.head_state,
        b.head_metadata, b.head_next, b.head_created_at, b.head_committed_at, b.head_seq,
        b.head_writes, b.priority, b.kind;
END;
$$;

-- _dg_retry_chain(thread_id, retry_of): SPEC §19.3's walk, for dg_begin_attempt_v2 and
-- dg_claim_attempt_v1: the run ids of every attempt of the entry p_retry_of, of the entry that
-- one retries, and so on (runs, in entry then attempt order), and whether any of them was
-- admitted (admitted), in one statement. Walked by primary key, on p_thread_id only, under the
-- thread's lock the caller holds; every entry of a chain is closed, so its attempts and
-- admission marks no longer change. An entry reclaimed since ends the walk: its runs are not
-- known. A STABLE SQL function without SET, so the planner inlines it into its caller's query.
CREATE OR REPLACE FUNCTION _dg_retry_chain(p_thread_id text, p_retry_of bigint)
RETURNS TABLE (runs text[], admitted boolean)
LANGUAGE sql STABLE
AS $$
    WITH RECURSIVE chain AS (
        SELECT e.entry_id, e.retry_of, e.admitted FROM queue_entries e
         WHERE e.entry_id = p_retry_of AND e.thread_id = p_thread_id
        UNION ALL
        SELECT e.entry_id, e.retry_of, e.admitted FROM chain c
          JOIN queue_entries e ON e.entry_id = c.retry_of
         WHERE e.thread_id = p_thread_id AND e.entry_id < c.entry_id)
    SELECT ARRAY(SELECT a.run_id FROM chain c
                   JOIN queue_attempts a ON a.entry_id = c.entry_id
                  ORDER BY a.entry_id, a.number),
           EXISTS (SELECT 1 FROM chain c WHERE c.admitted)
$$;

-- _dg_plan(latest_checkpoint_id, latest_next, admitted): plan_attempt's rules
-- (python/durable_graph/core/run_queue.py) over a retry chain: 'fresh' when no checkpoint of its
-- runs exists and none of it was admitted, 'finished' when admitted without one or when the
-- latest has no next tasks, else 'resume'. An IMMUTABLE SQL function without SET: inlined into
-- its callers' expressions, no statement of its own (SPEC §21).
CREATE OR REPLACE FUNCTION _dg_plan(p_latest_checkpoint_id text, p_latest_next text[],
                                    p_admitted boolean) RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE WHEN p_latest_checkpoint_id IS NULL THEN
                    CASE WHEN p_admitted THEN 'finished' ELSE 'fresh' END
                WHEN coalesce(pg_catalog.cardinality(p_latest_next), 0) = 0 THEN 'finished'
                ELSE 'resume' END
$$;

-- dg_begin_attempt_v2 (SPEC §11, §19.3, §23.5): dg_begin_attempt_v1 that also plans, so a caller
-- of the SQL API gets the plan our worker gets. latest_* is the newest checkpoint committed by
-- any run of any attempt of the entry and, for a retry, of every entry of its retry chain
-- (retry_of, its retry_of, ...; an entry reclaimed since ends the walk: its runs are not known),
-- read under the claim; plan (the last column) is 'fresh' | 'resume' | 'finished', NULL when
-- unclaimed (as the claim columns): 'finished' when latest has no next tasks, or when there is
-- no latest but the entry or an entry of its chain was admitted (the input applied, then
-- retracted); 'resume' from latest otherwise; 'fresh' only when no entry of the chain was
-- admitted and no run of it committed. Same arguments, row and errors as dg_begin_attempt_v1.
CREATE OR REPLACE FUNCTION dg_begin_attempt_v2(
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
               priority integer, kind text, plan text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    l record;
    x queue_entries;
    v_runs text[] := ARRAY[]::text[];
    v_admitted boolean := false;  -- an earlier entry of the retry chain was admitted
BEGIN
    -- dg_begin_attempt_v1's checks, in its order.
    IF (pg_catalog.octet_length(p_run_id) BETWEEN 1 AND 512 AND p_claim_ttl IS NOT NULL)
       IS NOT TRUE THEN
        PERFORM _dg_id(p_holder, 'holder');
        PERFORM _dg_id(p_run_id, 'run_id');
    END IF;
    p_ttl := _dg_lease_args(p_holder, p_ttl, p_any_tenant, p_tenant, p_run_id, p_kinds);
    IF p_claim_ttl IS NULL THEN
        RAISE EXCEPTION 'claim_ttl must not be NULL' USING ERRCODE = 'DG000';
    END IF;
    p_claim_ttl := _dg_duration(p_claim_ttl, 'claim_ttl', false);
    l := _dg_lease(p_holder, p_ttl, p_any_tenant, p_tenant, p_run_id, p_kinds, p_claim_ttl);
    IF (l.o_entry).entry_id IS NULL THEN
        RETURN;
    END IF;
    x := l.o_entry;
    IF l.o_claim_token IS NOT NULL AND (l.o_attempt_number > 1 OR x.retry_of IS NOT NULL) THEN
        -- A first attempt's only run id is p_run_id, which the lease's verdict proved names no
        -- checkpoint of the thread: latest_of_runs is read for a later one, or for a retry.
        v_runs := ARRAY(SELECT a ->> 'run_id' FROM pg_catalog.json_array_elements(l.o_attempts) a);
    END IF;
    IF l.o_claim_token IS NOT NULL AND x.retry_of IS NOT NULL THEN
        -- SPEC §19.3: the retry chain's runs and whether any of it was admitted (one statement).
        SELECT v_runs || r.runs, r.admitted INTO v_runs, v_admitted
          FROM _dg_retry_chain(x.thread_id, x.retry_of) r;
    END IF;
    IF pg_catalog.cardinality(v_runs) = 0 AND NOT coalesce(l.o_claim_token IS NOT NULL AND l.o_live,
                                                           false) THEN
        -- Neither read can return a row (a first attempt, on a thread with no live commit or
        -- unclaimed): the row is the lease's, returned without a statement (SPEC §21).
        entry_id := x.entry_id; tenant := x.tenant; thread_id := x.thread_id; key := x.key;
        input := x.input; mode := x.mode; max_attempts := x.max_attempts;
        attempts := l.o_attempts; admitted := x.admitted; thread_deleted := x.thread_deleted;
        submitted_at := x.submitted_at;
        lease_holder := CASE WHEN x.outcome_kind IS NULL THEN p_holder END;
        lease_expires_at := CASE WHEN x.outcome_kind IS NULL THEN l.o_expires_at END;
        outcome_kind := x.outcome_kind;
        outcome_detail := x.outcome_detail; closed_at := x.closed_at;
        closed_at_seq := x.closed_at_seq; token := l.o_token; holder := p_holder;
        expires_at := l.o_expires_at; ttl := p_ttl; attempt_kind := l.o_attempt_kind;
        attempt_number := l.o_attempt_number; claim_token := l.o_claim_token;
        claim_expires_at := l.o_claim_expires_at; claim_ttl := l.o_claim_ttl;
        not_before := x.not_before; retry_of := x.retry_of; priority := x.priority;
        kind := x.kind;
        -- No latest: fresh unless admitted (it cannot be, with no run of it known yet).
        plan := CASE WHEN l.o_claim_token IS NOT NULL
                     THEN _dg_plan(NULL, NULL, x.admitted OR v_admitted) END;
        RETURN NEXT;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT x.entry_id, x.tenant, x.thread_id, x.key, x.input, x.mode, x.max_attempts,
           l.o_attempts, x.admitted, x.thread_deleted, x.submitted_at,
           CASE WHEN x.outcome_kind IS NULL THEN p_holder END,
           CASE WHEN x.outcome_kind IS NULL THEN l.o_expires_at END, x.outcome_kind,
           x.outcome_detail, x.closed_at, x.closed_at_seq,
           l.o_token, p_holder, l.o_expires_at, p_ttl, l.o_attempt_kind,
           l.o_attempt_number, l.o_claim_token, l.o_claim_expires_at, l.o_claim_ttl,
           k.checkpoint_id, k.parent_id, k.run_id, k.state, k.metadata, k.next, k.created_at,
           k.committed_at, k.seq, k.writes, x.not_before, x.retry_of,
           g.checkpoint_id, g.parent_id, g.run_id, g.state, g.metadata, g.next, g.created_at,
           g.committed_at, g.seq, g.writes, x.priority, x.kind,
           CASE WHEN l.o_claim_token IS NOT NULL
                THEN _dg_plan(k.checkpoint_id, k.next, x.admitted OR v_admitted) END
      FROM (SELECT (l.o_entry).*) x
      LEFT JOIN LATERAL (SELECT * FROM dg_latest_of_runs_v1(x.thread_id, v_runs)
                          WHERE pg_catalog.cardinality(v_runs) > 0) k ON true
      LEFT JOIN LATERAL (SELECT * FROM dg_get_v1(x.thread_id, NULL)
                          WHERE l.o_claim_token IS NOT NULL AND l.o_live) g ON true;
END;
$$;

-- dg_claim_attempt_v1 (SPEC §11, §19.3, §23.5): the rest of dg_begin_attempt_v2 once the
-- thread's claim is free, for an attempt begun while it was busy (claim_token NULL) or an
-- exhausted entry. In one transaction: the lease p_token of entry p_entry_id checked as
-- dg_renew_v1 checks it (p_tenant the entry's tenant; DG103, then DG102), the thread claimed as
-- p_holder for p_claim_ttl (dg_claim_v1: DG001 while a claim is live), then, under the claim,
-- the entry, latest over the runs of its attempts and of its retry chain (_dg_retry_chain),
-- plan and the head, as dg_begin_attempt_v2 returns them for a claimed attempt; nothing written
-- on any error. Returns dg_begin_attempt_v2's row (one row): the lease columns are the lease as
-- it stands (not renewed); attempt_kind and attempt_number say which attempt p_holder claims
-- for: 'started' and the number of the entry's attempt whose run id is p_holder (a worker
-- claims as its run), else 'exhausted' once max_attempts are recorded, else NULL. Raises DG000.
CREATE OR REPLACE FUNCTION dg_claim_attempt_v1(
    p_entry_id bigint, p_token bigint, p_holder text, p_claim_ttl interval, p_tenant text)
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
               priority integer, kind text, plan text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    l record;
    x queue_entries;
    c record;
    v_runs text[];
    v_admitted boolean := false;  -- an entry of the retry chain was admitted
    v_number integer;             -- the number of p_holder's attempt, if any
BEGIN
    PERFORM _dg_not_null(p_entry_id IS NOT NULL, 'entry_id');
    PERFORM _dg_not_null(p_token IS NOT NULL, 'token');
    PERFORM _dg_id(p_holder, 'holder');
    PERFORM _dg_not_null(p_claim_ttl IS NOT NULL, 'claim_ttl');
    p_claim_ttl := _dg_duration(p_claim_ttl, 'claim_ttl', false);
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    -- The lease's checks and locks first (the thread row, then the entry), in queue order.
    l := _dg_lock_lease(p_entry_id, p_token, p_tenant);
    x := l.o_entry;
    SELECT * INTO c FROM dg_claim_v1(x.thread_id, p_holder, p_claim_ttl);
    -- Under the claim: the entry's runs (its attempts, in order) and its retry chain's.
    v_runs := ARRAY(SELECT a.run_id FROM queue_attempts a
                     WHERE a.entry_id = p_entry_id ORDER BY a.number);
    SELECT a.number INTO v_number FROM queue_attempts a
     WHERE a.entry_id = p_entry_id AND a.run_id = p_holder;
    IF x.retry_of IS NOT NULL THEN
        SELECT v_runs || r.runs, r.admitted INTO v_runs, v_admitted
          FROM _dg_retry_chain(x.thread_id, x.retry_of) r;
    END IF;
    RETURN QUERY
    SELECT e.entry_id, e.tenant, e.thread_id, e.key, e.input, e.mode, e.max_attempts,
           e.attempts, e.admitted, e.thread_deleted, e.submitted_at, e.lease_holder,
           e.lease_expires_at, e.outcome_kind, e.outcome_detail, e.closed_at, e.closed_at_seq,
           p_token, l.o_holder, e.lease_expires_at, l.o_ttl,
           CASE WHEN v_number IS NOT NULL THEN 'started'
                WHEN l.o_attempts >= e.max_attempts THEN 'exhausted' END,
           v_number, c.token, c.expires_at, c.ttl,
           k.checkpoint_id, k.parent_id, k.run_id, k.state, k.metadata, k.next, k.created_at,
           k.committed_at, k.seq, k.writes, e.not_before, e.retry_of,
           g.checkpoint_id, g.parent_id, g.run_id, g.state, g.metadata, g.next, g.created_at,
           g.committed_at, g.seq, g.writes, e.priority, e.kind,
           _dg_plan(k.checkpoint_id, k.next, e.admitted OR v_admitted)
      FROM _dg_entry(p_entry_id) e
      LEFT JOIN LATERAL (SELECT * FROM dg_latest_of_runs_v1(e.thread_id, v_runs)
                          WHERE pg_catalog.cardinality(v_runs) > 0) k ON true
      LEFT JOIN LATERAL dg_get_v1(e.thread_id, NULL) g ON true;
END;
$$;

-- dg_renew_attempt_v1: renew the lease (dg_renew_v1, its ttl; p_tenant the lease's entry's
-- tenant, as for dg_renew_v1) and the claim p_claim_token on the entry's thread
-- (dg_renew_claim_v1) in one transaction. The lease is checked first, so its errors come first
-- as in the step-by-step renewal: DG103, DG102, then DG002. Returns dg_renew_v1's row, then
-- claim_holder, claim_token, claim_expires_at, claim_ttl, then not_before and retry_of last.
-- Raises DG000.
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
    -- The lease's checks and locks first (the thread row, then the entry), in queue order.
    e := (_dg_lock_lease(p_entry_id, p_token, p_tenant)).o_entry;
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

-- dg_finish_attempt_v2 (SPEC §11, §18.1): in one transaction, when p_checkpoint_id is given,
-- commit it on p_thread_id under the claim p_claim_token exactly as dg_commit_v1 would (its
-- argument checks, then its locks and checks in order: DG002, DG002, DG003, DG005, DG006; its
-- events and admission marks); then close the entry as dg_close_v1 would (DG103, DG102; its
-- argument checks come first, with the commit's); then release the claim p_claim_token if it
-- is still the thread's current claim (left alone otherwise, and when NULL). Any error writes
-- nothing. p_thread_id is the claim's thread, which must be the entry's (DG000); NULL is
-- allowed without a commit. Returns dg_close_v1's row. Raises DG002, DG003, DG005, DG006,
-- DG103, DG102, DG000.
--
-- Written lean (issue 25), each saving kept to the guarantee it keeps: locks in queue order,
-- each row once (thread row, entry row), no re-locking through nested step functions; the
-- thread row is written once (the commit's head, the claim's release, the queue head moved past
-- the entry and its lease ended, together: _dg_commit's p_own_entry) and the entry row once
-- (the close with its own admission mark).
CREATE OR REPLACE FUNCTION dg_finish_attempt_v2(
    p_entry_id bigint, p_token bigint, p_outcome_kind text, p_outcome_detail text,
    p_thread_id text, p_claim_token bigint,
    p_checkpoint_id text, p_parent_id text, p_run_id text,
    p_state text, p_metadata text, p_next text[],
    p_event_kinds text[], p_event_payloads text[], p_event_created_at timestamptz[],
    p_created_at timestamptz, p_parent_thread_id text,
    p_fence_thread_id text, p_fence_token bigint, p_tenant text)
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
    r record;
    x queue_entries;
    c checkpoints;
    v_ok boolean;
    v_row threads;
    v_thread text;
    v_leased boolean := false;
    v_release boolean := false;
    v_commit boolean := p_checkpoint_id IS NOT NULL;
    v_now timestamptz;
    v_detail text := pg_catalog.btrim(p_outcome_detail, E' \t\n\r');
    v_lim limits := _dg_limits();
BEGIN
    -- close's argument checks (dg_close_v1's, in its order), then the commit's (dg_commit_v1's).
    -- Every one in one inline test first (no statement: SPEC §21); when it fails, the helpers
    -- name the bad one.
    IF (p_entry_id IS NOT NULL AND p_token IS NOT NULL
        AND p_outcome_kind IN ('completed', 'failed', 'cancelled', 'interrupted')
        AND p_outcome_detail IS NOT NULL
        AND coalesce(pg_catalog.octet_length(p_tenant) BETWEEN 1 AND 512, true)
        AND coalesce(pg_catalog.octet_length(p_thread_id) BETWEEN 1 AND 512, true)
        AND pg_catalog.pg_column_size(p_outcome_detail) <= v_lim.max_call_bytes
        AND pg_catalog.octet_length(p_outcome_detail) <= v_lim.max_value_bytes
        AND _dg_json_problem(p_outcome_detail) IS NULL
        AND CASE p_outcome_kind
                WHEN 'completed' THEN true
                WHEN 'failed' THEN pg_catalog.left(v_detail, 1) = '"'
                WHEN 'cancelled' THEN v_detail IN ('"requested"', '"thread_deleted"')
                ELSE v_detail ~ '^[1-9][0-9]{0,18}$'
                     AND v_detail::numeric <= 9223372036854775807
            END) IS NOT TRUE
    THEN
        PERFORM _dg_not_null(p_entry_id IS NOT NULL, 'entry_id');
        PERFORM _dg_not_null(p_token IS NOT NULL, 'token');
        PERFORM _dg_check(p_outcome_kind IN ('completed', 'failed', 'cancelled', 'interrupted'),
                          'outcome_kind must be completed, failed, cancelled or interrupted');
        PERFORM _dg_not_null(p_outcome_detail IS NOT NULL, 'outcome_detail');
        PERFORM _dg_opt_id(p_tenant, 'tenant');
        PERFORM _dg_opt_id(p_thread_id, 'thread_id');
        PERFORM _dg_call_bytes(pg_catalog.pg_column_size(p_outcome_detail), v_lim.max_call_bytes);
        PERFORM _dg_json(p_outcome_detail, 'outcome_detail', v_lim.max_value_bytes);
        RAISE EXCEPTION 'outcome_detail must be, for completed: any JSON value; failed: a JSON '
                        'string; cancelled: "requested" or "thread_deleted"; interrupted: an '
                        'entry id (a JSON integer >= 1)' USING ERRCODE = 'DG000';
    END IF;
    IF v_commit THEN
        IF p_thread_id IS NULL THEN
            RAISE EXCEPTION 'thread_id must not be NULL' USING ERRCODE = 'DG000';
        END IF;
        v_ok := _dg_commit_args(p_thread_id, p_claim_token, p_checkpoint_id, p_parent_id,
                                p_run_id, p_state, p_metadata, p_next, p_event_kinds,
                                p_event_payloads, p_event_created_at, p_created_at,
                                p_parent_thread_id, p_fence_thread_id, p_fence_token, v_lim);
    ELSIF (p_parent_id IS NULL AND p_run_id IS NULL AND p_state IS NULL
           AND p_metadata IS NULL AND p_next IS NULL AND p_event_kinds IS NULL
           AND p_event_payloads IS NULL AND p_event_created_at IS NULL
           AND p_created_at IS NULL AND p_parent_thread_id IS NULL
           AND p_fence_thread_id IS NULL AND p_fence_token IS NULL) IS NOT TRUE THEN
        RAISE EXCEPTION 'commit arguments need a checkpoint_id' USING ERRCODE = 'DG000';
    END IF;

    -- The entry's thread row, locked (queue order: the thread's row first, then the entry's;
    -- an open entry's thread has its row, where submit writes the queue head), read with the
    -- entry (unlocked: an entry never changes thread) in one statement. An entry that is gone
    -- or another tenant's reads nothing and is refused by the lease check below, after the
    -- commit's checks. The lease is the row's (D223, D224): whether it is p_token on this entry
    -- is read under the lock that keeps it so (nothing below writes it before the close), and
    -- _dg_commit takes the row as read here rather than locking it again.
    SELECT t.* INTO v_row
      FROM queue_entries q JOIN threads t ON t.thread_id = q.thread_id
     WHERE q.entry_id = p_entry_id AND q.tenant IS NOT DISTINCT FROM p_tenant
       FOR UPDATE OF t;
    v_thread := v_row.thread_id;
    v_leased := coalesce(v_row.lease_entry_id = p_entry_id AND v_row.lease_token = p_token,
                         false);
    v_release := coalesce(v_row.claim_token = p_claim_token, false);
    IF p_thread_id IS DISTINCT FROM v_thread AND p_thread_id IS NOT NULL
       AND v_thread IS NOT NULL THEN
        RAISE EXCEPTION 'claim must be on the lease''s thread (claim.thread_id)'
            USING ERRCODE = 'DG000';
    END IF;
    IF v_commit THEN
        -- dg_commit_v1's locks, checks and writes; the claim is released, the queue head moved
        -- past this entry and its lease ended in the same UPDATE of the thread row (refused
        -- below, and rolled back, unless the lease is p_token on this open entry), and this
        -- entry's admission mark is left to the close below.
        c := _dg_commit(p_thread_id, p_claim_token, p_checkpoint_id, p_parent_id, p_run_id,
                        p_state, p_metadata, p_next, p_event_kinds, p_event_payloads,
                        p_event_created_at, p_created_at, p_parent_thread_id,
                        p_fence_thread_id, p_fence_token, p_entry_id, v_row);
    END IF;

    v_now := store_now();
    IF p_outcome_kind = 'failed' AND v_leased THEN
        -- The last attempt's failure reason (SPEC §13), unless dg_defer_v1 gave one. (Any
        -- refusal below rolls it back.)
        UPDATE queue_attempts a SET error = p_outcome_detail
          FROM _dg_last_attempt(p_entry_id) n
         WHERE a.entry_id = p_entry_id AND a.number = n.number AND a.error IS NULL;
    END IF;
    -- close's lease checks (rule 21) as the close's own condition, on the entry locked once: the
    -- entry open and the tenant's, the lease p_token on it (v_leased); _dg_close_entry's UPDATE
    -- with the commit's admission mark of this entry (rule 10), the entry's one new row version,
    -- in one statement with the entry row it returns.
    WITH closed AS (
             UPDATE queue_entries q
                SET outcome_kind = p_outcome_kind, outcome_detail = p_outcome_detail,
                    closed_at = v_now,
                    closed_at_seq = coalesce((SELECT t.last_seq FROM threads t
                                               WHERE t.thread_id = q.thread_id), 0),
                    admitted = q.admitted
                               OR (v_commit AND EXISTS (SELECT 1 FROM queue_attempts a
                                                         WHERE a.entry_id = p_entry_id
                                                           AND a.run_id = p_run_id))
              WHERE q.entry_id = p_entry_id AND v_leased
                AND q.outcome_kind IS NULL AND q.tenant IS NOT DISTINCT FROM p_tenant
             RETURNING q AS entry)
    SELECT closed.entry, a.attempts INTO r
      FROM closed CROSS JOIN LATERAL _dg_attempts(p_entry_id) a;
    IF r.entry IS NULL THEN
        SELECT * INTO x FROM queue_entries q WHERE q.entry_id = p_entry_id;
        IF x.entry_id IS NULL OR x.outcome_kind IS NOT NULL
           OR x.tenant IS DISTINCT FROM p_tenant THEN
            RAISE EXCEPTION 'entry % is closed', p_entry_id USING ERRCODE = 'DG103';
        END IF;
        RAISE EXCEPTION 'lease is not the current lease of entry %', p_entry_id
            USING ERRCODE = 'DG102';
    END IF;
    IF NOT v_commit THEN
        -- The next head; the lease ends (closed); p_claim_token's claim is released when still
        -- current (v_release), a claim no longer current left alone: one write of the thread
        -- row. (A commit wrote all three: _dg_commit.)
        PERFORM _dg_refresh_queue_thread(v_thread, false, v_release);
    END IF;
    x := r.entry;
    entry_id := x.entry_id; tenant := x.tenant; thread_id := x.thread_id; key := x.key;
    input := x.input; mode := x.mode; max_attempts := x.max_attempts; attempts := r.attempts;
    admitted := x.admitted; thread_deleted := x.thread_deleted; submitted_at := x.submitted_at;
    lease_holder := NULL; lease_expires_at := NULL;  -- closed: no lease
    outcome_kind := x.outcome_kind; outcome_detail := x.outcome_detail;
    closed_at := x.closed_at; closed_at_seq := x.closed_at_seq; not_before := x.not_before;
    retry_of := x.retry_of; priority := x.priority; kind := x.kind;
    RETURN NEXT;
END;
$$;

-- dg_submit_many_v1: submit each run (dg_submit_v1) in order, in one transaction: any error
-- writes nothing. The arrays are the arguments of dg_submit_v1, one element per submission, of
-- equal length 1..10000. The threads' rows are locked first in id byte order, so two
-- concurrent batches never deadlock. Returns (ordinal, entry_id, existing) in submission order.
-- Raises what dg_submit_v1 raises, and DG000.
-- SPEC §15 (issue 27; added at the end, default NULL: 0 and 'default' for each): p_priorities
-- and p_kinds, of the same length when given.
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
        PERFORM _dg_lock_thread(v_id);
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
