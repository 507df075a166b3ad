-- lease (SPEC §5 lease; D18: returns the entry after the call; rule 18).

-- _dg_pick_try_lock(thread_id): take the thread's pick lock for this transaction, or false when
-- another transaction's lease holds it: a transaction-scoped advisory lock, keyed by the store's
-- schema and the thread id. Leases exclude each other with it and skip a taken thread (workers
-- never queue behind one another); a lease then waits for the thread row's lock (migration 0018,
-- D224: one row per thread), so a lease meets a commit or a submit in flight on the thread as it
-- did when the queue had a row of its own — it waits for it instead of passing the thread over.
-- (Two thread ids whose hashes collide share a pick lock: the second is skipped this time.) An
-- advisory lock writes no WAL. Tried on one thread at a time, the one the pick chose (in a
-- statement that reads a row by its key, after its other conditions: PL/pgSQL, not inlined, its
-- default COST above theirs), so that only a thread the pick takes is locked.
CREATE OR REPLACE FUNCTION _dg_pick_try_lock(p_thread_id text) RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    RETURN pg_catalog.pg_try_advisory_xact_lock(
        pg_catalog.hashtext('durable_graph.pick ' || pg_catalog.current_schema()),
        pg_catalog.hashtext(p_thread_id));
END;
$$;

-- _dg_lease_pick(now, any_tenant, tenant, skip, kinds, full_tenants, full_kinds): the available
-- thread whose head comes first in lease order — priority, highest first, then entry id (SPEC
-- §15: head_priority_key = -priority, so ascending) — of the wanted tenant, of a kind in kinds
-- (NULL: any kind), of no tenant in full_tenants and no kind in full_kinds (at their concurrency
-- limits), its pick lock taken (_dg_pick_try_lock: a taken one is skipped; the caller then
-- locks the thread row); NULL when none. Threads holding a live lease are never walked (issue
-- 12): the unleased ones come from indexes that hold only them (threads_{,tenant_,kind_}
-- lease_idx, migration 0018), and the ones whose lease expired or whose delayed head came due
-- from the leases' and the delayed heads' indexes (_dg_due_threads; such a one is taken only
-- when it comes before the first unleased one). Its statements always run their generic plans
-- (the SET below), which are index-bounded whatever the time: a plan made for the call's time
-- costs the due threads' ranges as nearly empty, so PL/pgSQL preferred such custom plans and
-- planned the pick anew on every call (D212; with 100,000 delayed heads that planning doubled
-- a lease's server time, D224). And never JIT-compiled: a generic plan's estimate grows with
-- the store (it prices the due threads' ranges at a third of their index), and past
-- jit_above_cost compiling it took 450 ms a lease where running it takes 0.1 (D224). With
-- kinds, each kind's first unleased head is read from its index (one probe per kind,
-- unlocked), the first of them is then pick-locked, and a taken one is skipped. Heads of full
-- tenants and kinds are walked past (they wait; the limits' cost).
-- SPEC §15 change (issue 27): kinds, priority and the full lists; was (now, any_tenant, tenant,
-- skip) ordered by head_entry_id.
CREATE OR REPLACE FUNCTION _dg_lease_pick(
    p_now timestamptz, p_any_tenant boolean, p_tenant text, p_skip text[], p_kinds text[],
    p_full_tenants text[], p_full_kinds text[]) RETURNS text
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $$
DECLARE
    v_thread text;
    v_exp_thread text;
    v_exp_key integer;
    v_exp_head bigint;
    v_key integer;
    v_head bigint;
BEGIN
    LOOP
        -- The first expired lease or due delayed head in lease order, unlocked (a hint, from
        -- _dg_due_threads; + 0 keeps the planner on its two indexes), and with every kind, in
        -- the same statement (SPEC §21: a statement is the unit of cost), the first unleased
        -- head before it from the lease-order index (the scalar subquery; skipped when kinds
        -- are given, below), whose pick lock is then tried: a thread another lease is taking is
        -- skipped and the statement read again without it, as the kinds' path does (a lock
        -- tried inside the statement ran on every row a plan sorted). The full kinds are tested
        -- only when there are any: in a store of one kind, the generic plan otherwise judged that
        -- no head passes `head_kind <> ALL (...)` and sorted every unleased head to find the
        -- first. One statement per tenant case, each with a generic plan that stays
        -- index-bounded (issue 25: an OR on the tenant parameters is folded only by a custom
        -- plan).
        IF p_any_tenant THEN
            SELECT x.thread_id, x.head_priority_key, x.head_entry_id,
                   (SELECT q.thread_id FROM threads q
                     WHERE p_kinds IS NULL
                       AND q.head_entry_id IS NOT NULL AND q.lease_expires_at IS NULL
                       AND (x.head_entry_id IS NULL
                            OR (q.head_priority_key, q.head_entry_id)
                               < (x.head_priority_key, x.head_entry_id))
                       AND (q.head_tenant IS NULL OR q.head_tenant <> ALL (p_full_tenants))
                       AND (pg_catalog.cardinality(p_full_kinds) = 0
                            OR q.head_kind <> ALL (p_full_kinds))
                       AND q.thread_id <> ALL (p_skip)
                     ORDER BY q.head_priority_key, q.head_entry_id LIMIT 1)
              INTO v_exp_thread, v_exp_key, v_exp_head, v_thread
              FROM (SELECT) one
              LEFT JOIN LATERAL (
                   SELECT q.thread_id, q.head_priority_key, q.head_entry_id
                     FROM _dg_due_threads(p_now) q
                    WHERE q.head_entry_id IS NOT NULL
                      AND (p_kinds IS NULL OR q.head_kind = ANY (p_kinds))
                      AND (q.head_tenant IS NULL OR q.head_tenant <> ALL (p_full_tenants))
                      AND q.head_kind <> ALL (p_full_kinds)
                      AND q.thread_id <> ALL (p_skip)
                    ORDER BY q.head_priority_key + 0, q.head_entry_id + 0 LIMIT 1) x ON true;
        ELSIF p_tenant IS NULL THEN
            SELECT x.thread_id, x.head_priority_key, x.head_entry_id,
                   (SELECT q.thread_id FROM threads q
                     WHERE p_kinds IS NULL
                       AND q.head_entry_id IS NOT NULL AND q.lease_expires_at IS NULL
                       AND q.head_tenant IS NULL
                       AND (x.head_entry_id IS NULL
                            OR (q.head_priority_key, q.head_entry_id)
                               < (x.head_priority_key, x.head_entry_id))
                       AND (pg_catalog.cardinality(p_full_kinds) = 0
                            OR q.head_kind <> ALL (p_full_kinds))
                       AND q.thread_id <> ALL (p_skip)
                     ORDER BY q.head_priority_key, q.head_entry_id LIMIT 1)
              INTO v_exp_thread, v_exp_key, v_exp_head, v_thread
              FROM (SELECT) one
              LEFT JOIN LATERAL (
                   SELECT q.thread_id, q.head_priority_key, q.head_entry_id
                     FROM _dg_due_threads(p_now) q
                    WHERE q.head_entry_id IS NOT NULL
                      AND q.head_tenant IS NULL
                      AND (p_kinds IS NULL OR q.head_kind = ANY (p_kinds))
                      AND q.head_kind <> ALL (p_full_kinds)
                      AND q.thread_id <> ALL (p_skip)
                    ORDER BY q.head_priority_key + 0, q.head_entry_id + 0 LIMIT 1) x ON true;
        ELSE
            SELECT x.thread_id, x.head_priority_key, x.head_entry_id,
                   (SELECT q.thread_id FROM threads q
                     WHERE p_kinds IS NULL
                       AND q.head_entry_id IS NOT NULL AND q.lease_expires_at IS NULL
                       AND q.head_tenant = p_tenant AND q.head_tenant <> ALL (p_full_tenants)
                       AND (x.head_entry_id IS NULL
                            OR (q.head_priority_key, q.head_entry_id)
                               < (x.head_priority_key, x.head_entry_id))
                       AND (pg_catalog.cardinality(p_full_kinds) = 0
                            OR q.head_kind <> ALL (p_full_kinds))
                       AND q.thread_id <> ALL (p_skip)
                     ORDER BY q.head_priority_key, q.head_entry_id LIMIT 1)
              INTO v_exp_thread, v_exp_key, v_exp_head, v_thread
              FROM (SELECT) one
              LEFT JOIN LATERAL (
                   SELECT q.thread_id, q.head_priority_key, q.head_entry_id
                     FROM _dg_due_threads(p_now) q
                    WHERE q.head_entry_id IS NOT NULL
                      AND q.head_tenant = p_tenant AND q.head_tenant <> ALL (p_full_tenants)
                      AND (p_kinds IS NULL OR q.head_kind = ANY (p_kinds))
                      AND q.head_kind <> ALL (p_full_kinds)
                      AND q.thread_id <> ALL (p_skip)
                    ORDER BY q.head_priority_key + 0, q.head_entry_id + 0 LIMIT 1) x ON true;
        END IF;
        IF v_thread IS NOT NULL AND NOT _dg_pick_try_lock(v_thread) THEN
            p_skip := p_skip || v_thread;  -- another lease is taking it: look again without it
            CONTINUE;
        END IF;
        IF p_kinds IS NOT NULL THEN
            -- Served kinds: the first unleased head of each kind (one index probe a kind), the
            -- first of those (a hint), then locked if still unleased.
            SELECT c.thread_id, c.head_priority_key, c.head_entry_id INTO v_thread, v_key, v_head
              FROM pg_catalog.unnest(p_kinds) AS k(kind)
             CROSS JOIN LATERAL (
                   SELECT q.thread_id, q.head_priority_key, q.head_entry_id FROM threads q
                    WHERE q.head_entry_id IS NOT NULL AND q.lease_expires_at IS NULL
                      AND q.head_kind = k.kind AND k.kind <> ALL (p_full_kinds)
                      AND (p_any_tenant
                           OR (p_tenant IS NULL AND q.head_tenant IS NULL)
                           OR q.head_tenant = p_tenant)
                      AND (q.head_tenant IS NULL OR q.head_tenant <> ALL (p_full_tenants))
                      AND q.thread_id <> ALL (p_skip)
                    ORDER BY q.head_priority_key, q.head_entry_id LIMIT 1) c
             ORDER BY c.head_priority_key, c.head_entry_id LIMIT 1;
            IF v_thread IS NOT NULL AND v_exp_head IS NOT NULL
               AND (v_key, v_head) > (v_exp_key, v_exp_head) THEN
                v_thread := NULL;  -- the expired one comes first
            END IF;
            IF v_thread IS NOT NULL THEN
                PERFORM 1 FROM threads q
                  WHERE q.thread_id = v_thread AND q.head_entry_id = v_head
                    AND q.lease_expires_at IS NULL AND _dg_pick_try_lock(q.thread_id);
                IF NOT FOUND THEN
                    p_skip := p_skip || v_thread;  -- taken meanwhile: look again without it
                    CONTINUE;
                END IF;
            END IF;
        END IF;
        IF v_thread IS NOT NULL OR v_exp_thread IS NULL THEN
            RETURN v_thread;
        END IF;
        -- Take the expired one if it is still as read; else look again without it.
        SELECT q.thread_id INTO v_thread FROM threads q
         WHERE q.thread_id = v_exp_thread AND q.head_entry_id IS NOT NULL
           AND q.lease_expires_at <= p_now
           AND (p_any_tenant OR q.head_tenant IS NOT DISTINCT FROM p_tenant)
           AND _dg_pick_try_lock(q.thread_id);
        IF FOUND THEN
            RETURN v_thread;
        END IF;
        p_skip := p_skip || v_exp_thread;
        v_exp_thread := NULL;
        v_exp_head := NULL;
    END LOOP;
    RETURN NULL;  -- not reached: every pass returns or skips one more thread
END;
$$;

-- _dg_lease(holder, ttl, any_tenant, tenant, run_id, kinds, claim_ttl): dg_lease_v1's work after
-- its argument checks, shared with dg_begin_attempt_v1, which passes claim_ttl: an attempt that
-- starts then also claims its thread for run_id (rule 9: only when no claim is live; a live one
-- leaves the o_claim_* columns NULL and the lease taken), in the statement that writes the lease.
-- o_entry is the leased entry after the call (NULL when nothing is available; its lease is the
-- thread row's, D223, D224: this call's while it is open), o_attempts its attempts as
-- _dg_attempts gives them, o_live the thread's live flag (claimed only).
--
-- Written to SPEC §21's budget (a statement is the unit of cost): the pick is one statement
-- (_dg_lease_pick), the thread row's lock one, the head with its attempt count, its attempt
-- verdict, whether its tenant or kind has a limit and the thread row's lease and claim one,
-- and every write of the lease (the attempt, and the claim with the lease on the thread row)
-- one. The rarer cases pay for themselves: an expired lease to end, a head with a limit
-- row, a deleted thread.
CREATE OR REPLACE FUNCTION _dg_lease(
    p_holder text, p_ttl interval, p_any_tenant boolean, p_tenant text, p_run_id text,
    p_kinds text[], p_claim_ttl interval,
    OUT o_entry queue_entries, OUT o_attempts json, OUT o_token bigint,
    OUT o_expires_at timestamptz,
    OUT o_attempt_kind text, OUT o_attempt_number integer,
    OUT o_claim_token bigint, OUT o_claim_expires_at timestamptz, OUT o_claim_ttl interval,
    OUT o_live boolean)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_now timestamptz;
    v_pick timestamptz;
    v_skip text[] := '{}';
    v_thread text;
    h queue_entries;
    v_attempts integer;  -- h's attempt count (_dg_last_attempt)
    v_read record;  -- the head and its thread row's lease and claim, as read under the row's lock
    r record;
    v_claim boolean;
    -- SPEC §15 (issue 27): tenants and kinds found at their limit during this call, and
    -- whether this call holds a limit row's lock (then it waits for no other: _dg_lease_limits).
    v_full_tenants text[] := '{}';
    v_full_kinds text[] := '{}';
    v_limited boolean := false;
    v_full text;
    v_locked boolean;
    v_free boolean;
BEGIN
    -- Picking reads a first clock (it never waits: a taken thread is skipped); the lease's own
    -- time is read again once the thread row is locked (it can wait on a commit or a submit in
    -- flight) and the head read under that lock, and the pick is re-verified with it, so the
    -- lease never starts before its wait.
    v_pick := store_now();
    LOOP
        v_thread := _dg_lease_pick(v_pick, p_any_tenant, p_tenant, v_skip, p_kinds,
                                   v_full_tenants, v_full_kinds);
        IF v_thread IS NULL THEN
            RETURN;
        END IF;
        -- The thread row, locked (lock order: first): a commit, submit or delete of the thread
        -- in flight is waited for, and none starts until this transaction ends.
        PERFORM 1 FROM threads t WHERE t.thread_id = v_thread FOR UPDATE;
        -- The head, with what the verdict and the limits need to know about it (its attempt
        -- count, whether the run id is taken, whether a limit applies), and the thread row's
        -- lease and claim: read under the thread row's lock, which every writer of
        -- the thread's entries, attempts, checkpoints and claim holds (D224), so none of them
        -- can change; the entry row itself is not locked (a lock record a job saved). The lease
        -- is the row's (D222-D224): the one entry holding a lease token (NULL when none), its
        -- expiry and holder.
        SELECT e AS head, n.number AS last_attempt, k.taken,
               EXISTS (SELECT 1 FROM queue_limits l
                        WHERE (l.scope = 'kind' AND l.name = e.kind)
                           OR (l.scope = 'tenant' AND l.name = e.tenant)) AS limited,
               t.lease_entry_id, t.lease_until, t.lease_holder, t.claim_token,
               t.claim_expires_at
          INTO v_read
          FROM threads t
          JOIN queue_entries e ON e.thread_id = t.thread_id AND e.outcome_kind IS NULL
         CROSS JOIN LATERAL _dg_last_attempt(e.entry_id) n
         CROSS JOIN LATERAL _dg_run_taken(e.thread_id, p_run_id) k
         WHERE t.thread_id = v_thread
         ORDER BY e.queue_rank, e.entry_id LIMIT 1;
        h := v_read.head;
        v_attempts := v_read.last_attempt;
        v_now := store_now();  -- the lease's time, read after the locks
        v_free := h.entry_id IS NOT NULL
              AND (p_any_tenant OR h.tenant IS NOT DISTINCT FROM p_tenant)
              AND (p_kinds IS NULL OR h.kind = ANY (p_kinds))  -- SPEC §15
              AND (h.not_before IS NULL OR h.not_before <= v_now)  -- delayed (SPEC §13)
              AND NOT coalesce(v_now < v_read.lease_until, false);  -- a live lease
        EXIT WHEN v_free AND NOT v_read.limited;
        IF v_free THEN
            -- >>> SPEC §15 concurrency limits (issue 27): the head's tenant and kind under
            -- their limits, counted under the limit rows' locks; a full one is passed over.
            SELECT l.full_scope, l.locked INTO v_full, v_locked
              FROM _dg_lease_limits(h.tenant, h.kind, v_now, NOT v_limited) l;
            IF v_locked AND NOT v_limited THEN
                v_limited := true;
                v_now := store_now();  -- it may have waited for another lease's commit
            END IF;
            EXIT WHEN v_full IS NULL;
            IF v_full = 'tenant' THEN
                v_full_tenants := v_full_tenants || h.tenant;
            ELSE
                v_full_kinds := v_full_kinds || h.kind;
            END IF;
            -- <<< SPEC §15
        END IF;
        v_skip := v_skip || v_thread;
    END LOOP;

    IF v_read.lease_entry_id IS NOT NULL THEN
        -- An expired lease (a live one leaves no head free), of an open entry (a close drops
        -- its entry's lease from the thread row). Its last attempt ended without a word: say
        -- why (issue 26 item 9). The lease itself ends as this call's lease replaces it on the
        -- thread row.
        UPDATE queue_attempts a
           SET error = pg_catalog.to_json('lease expired: worker ' || v_read.lease_holder
                                          || ' stopped renewing')::text
          FROM _dg_last_attempt(v_read.lease_entry_id) n
         WHERE a.entry_id = v_read.lease_entry_id AND a.number = n.number AND a.error IS NULL;
        IF v_read.lease_entry_id <> h.entry_id THEN
            -- Another entry's lease ended without a close: wake idle workers (as a release
            -- does; sql/77_notify.sql).
            PERFORM _dg_wake_queue();
        END IF;
    END IF;
    o_token := pg_catalog.nextval('fencing_token_seq');  -- tokens: the lease's, then the claim's
    o_expires_at := v_now + p_ttl;
    IF p_run_id IS NOT NULL THEN
        o_attempt_kind := _dg_attempt_verdict(h, v_attempts, v_read.taken);
    END IF;
    IF o_attempt_kind = 'thread_deleted' THEN
        -- Leased and closed at once: the entry shows no lease, and the expired lease this call
        -- ended, of another entry still open, is gone from the thread row too.
        PERFORM _dg_close_entry(h.entry_id, 'cancelled', '"thread_deleted"', v_now);
        PERFORM _dg_refresh_queue_thread(v_thread, true);
        SELECT e AS entry, a.attempts INTO r
          FROM queue_entries e CROSS JOIN LATERAL _dg_attempts(e.entry_id) a
         WHERE e.entry_id = h.entry_id;
        o_entry := r.entry;
        o_attempts := r.attempts;
        RETURN;
    END IF;
    IF o_attempt_kind = 'started' THEN
        o_attempt_number := v_attempts + 1;
    ELSIF o_attempt_kind = 'taken' THEN
        o_attempt_kind := NULL;  -- the lease is still taken; no attempt is reported
    END IF;
    -- The claim, when asked, the attempt started and no claim is live (rule 9).
    v_claim := p_claim_ttl IS NOT NULL AND o_attempt_number IS NOT NULL
               AND (v_read.claim_token IS NULL OR v_now >= v_read.claim_expires_at);
    -- Every write of the lease in one statement (the CTE runs once, on the rows locked above):
    -- the attempt (when it started), and the thread row — the claim (v_claim) and the lease,
    -- with what _dg_refresh_queue_thread would compute: h stays the head (it is the head, and an
    -- attempted head keeps its place: migration 0016) and holds the thread's only lease token,
    -- its token, holder and ttl on the row with the rest of it. The entry is not written (D223,
    -- migration 0017): its lease is the thread row's and its attempt count its last attempt's
    -- number. The statement's snapshot predates its own attempt, so the entry's attempts are
    -- read with the new one added.
    WITH attempt AS (
             INSERT INTO queue_attempts (entry_id, number, thread_id, run_id, started_at)
             SELECT h.entry_id, o_attempt_number, v_thread, p_run_id, v_now
              WHERE o_attempt_number IS NOT NULL)
    UPDATE threads t
       SET claim_token = CASE WHEN v_claim THEN pg_catalog.nextval('fencing_token_seq')
                              ELSE t.claim_token END,
           claim_holder = CASE WHEN v_claim THEN p_run_id ELSE t.claim_holder END,
           claim_expires_at = CASE WHEN v_claim THEN v_now + p_claim_ttl
                                   ELSE t.claim_expires_at END,
           claim_ttl = CASE WHEN v_claim THEN p_claim_ttl ELSE t.claim_ttl END,
           head_entry_id = h.entry_id, head_tenant = h.tenant,
           lease_expires_at = v_now + p_ttl,
           head_priority_key = -h.priority, head_kind = h.kind,  -- SPEC §15
           lease_entry_id = h.entry_id, lease_until = v_now + p_ttl,  -- D222
           lease_kind = h.kind, lease_tenant = h.tenant,
           lease_token = o_token, lease_holder = p_holder, lease_ttl = p_ttl  -- D223
     WHERE t.thread_id = v_thread
    RETURNING t.claim_token, t.claim_expires_at, t.claim_ttl, t.live,
              (SELECT coalesce(pg_catalog.json_agg(_dg_attempt_json(x.number, x.run_id,
                                                                    x.started_at, x.error)
                                                   ORDER BY x.number), '[]'::json)
                 FROM (SELECT a.number, a.run_id, a.started_at, a.error FROM queue_attempts a
                        WHERE a.entry_id = h.entry_id
                       UNION ALL
                       SELECT o_attempt_number, p_run_id, v_now, NULL
                        WHERE o_attempt_number IS NOT NULL) x) AS attempts
      INTO r;
    o_entry := h;  -- as locked: the lease writes nothing to it
    o_attempts := r.attempts;
    IF v_claim THEN
        o_claim_token := r.claim_token;
        o_claim_expires_at := r.claim_expires_at;
        o_claim_ttl := r.claim_ttl;
        o_live := r.live;
    END IF;
END;
$$;

-- dg_lease_v1: lease the oldest available thread head. A thread is available when its head
-- (queue order over every tenant: attempted, then INTERRUPT, then the rest, by entry id) is the
-- wanted tenant's (p_any_tenant, or tenant IS NOT DISTINCT FROM p_tenant) and no entry of the
-- thread holds a live lease. Candidates are picked from the thread rows by head entry id, a
-- thread another lease is taking skipped (workers never queue behind one another:
-- _dg_pick_try_lock), then re-verified under the thread row's lock with store-now read once it
-- is held. Issues a new token,
-- expiry = store-now + p_ttl, and ends the expired lease of every other entry of the thread.
-- With p_run_id it also does what dg_record_attempt_v1 does (the attempt and the lease in one
-- statement, the lease on the thread's row) and reports it in attempt_kind /
-- attempt_number ('started' n,
-- 'exhausted', 'thread_deleted'); both NULL when no run id was given or it was taken (the lease
-- is still taken). No row when nothing is available. Raises DG000.
-- (Its row gained not_before and retry_of at the end: the return type changed.)
-- SPEC §15 (issue 27; added at the end, with a default): heads are taken in lease order
-- (priority, highest first, then entry id; within a thread §5's order is unchanged); p_kinds
-- (NULL: every kind; else 1..100 distinct identifiers) takes only heads of those kinds; a head
-- whose tenant or kind is at its concurrency limit (queue_limits) waits (_dg_lease_limits,
-- sql/72_scheduling.sql). The row gained priority and kind at the end. The work: _dg_lease.
CREATE OR REPLACE FUNCTION dg_lease_v1(
    p_holder text, p_ttl interval, p_any_tenant boolean, p_tenant text, p_run_id text,
    p_kinds text[] DEFAULT NULL)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint,
               token bigint, holder text, expires_at timestamptz, ttl interval,
               attempt_kind text, attempt_number integer,
               not_before timestamptz, retry_of bigint,
               priority integer, kind text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    l record;
BEGIN
    p_ttl := _dg_lease_args(p_holder, p_ttl, p_any_tenant, p_tenant, p_run_id, p_kinds);
    l := _dg_lease(p_holder, p_ttl, p_any_tenant, p_tenant, p_run_id, p_kinds, NULL);
    IF (l.o_entry).entry_id IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    -- The lease and attempt columns, then not_before and retry_of last (added at the end). The
    -- entry's lease is this one, unless leasing closed it (thread_deleted).
    SELECT x.entry_id, x.tenant, x.thread_id, x.key, x.input, x.mode, x.max_attempts,
           l.o_attempts, x.admitted, x.thread_deleted, x.submitted_at,
           CASE WHEN x.outcome_kind IS NULL THEN p_holder END,
           CASE WHEN x.outcome_kind IS NULL THEN l.o_expires_at END, x.outcome_kind,
           x.outcome_detail, x.closed_at, x.closed_at_seq,
           l.o_token, p_holder, l.o_expires_at, p_ttl, l.o_attempt_kind,
           l.o_attempt_number, x.not_before, x.retry_of, x.priority, x.kind
      FROM (SELECT (l.o_entry).*) x;
END;
$$;

-- _dg_lease_args(holder, ttl, any_tenant, tenant, run_id, kinds): dg_lease_v1's argument checks
-- (DG000), shared with dg_begin_attempt_v1; returns the ttl as exact elapsed time. Every
-- argument in one inline test first (no statement: SPEC §21); when it fails, the helpers name
-- the bad one.
CREATE OR REPLACE FUNCTION _dg_lease_args(
    p_holder text, p_ttl interval, p_any_tenant boolean, p_tenant text, p_run_id text,
    p_kinds text[]) RETURNS interval
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF (pg_catalog.octet_length(p_holder) BETWEEN 1 AND 512 AND p_any_tenant IS NOT NULL
        AND coalesce(pg_catalog.octet_length(p_tenant) BETWEEN 1 AND 512, true)
        AND coalesce(pg_catalog.octet_length(p_run_id) BETWEEN 1 AND 512, true)
        AND p_ttl IS NOT NULL) IS NOT TRUE THEN
        PERFORM _dg_id(p_holder, 'holder');
        PERFORM _dg_not_null(p_any_tenant IS NOT NULL, 'any_tenant');
        PERFORM _dg_opt_id(p_tenant, 'tenant');
        PERFORM _dg_opt_id(p_run_id, 'run_id');
        PERFORM _dg_not_null(p_ttl IS NOT NULL, 'ttl');
    END IF;
    p_ttl := _dg_duration(p_ttl, 'ttl', false);
    IF p_kinds IS NOT NULL THEN
        PERFORM _dg_kinds(p_kinds, 'kinds');  -- SPEC §15 (sql/72_scheduling.sql)
    END IF;
    RETURN p_ttl;
END;
$$;
