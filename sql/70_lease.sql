-- lease (SPEC §5 lease; D18: returns the entry after the call; rule 18).

-- _dg_lease_pick(now, any_tenant, tenant, skip, kinds, full_tenants, full_kinds): the available
-- thread whose head comes first in lease order — priority, highest first, then entry id (SPEC
-- §15: head_priority_key = -priority, so ascending) — of the wanted tenant, of a kind in kinds
-- (NULL: any kind), of no tenant in full_tenants and no kind in full_kinds (at their concurrency
-- limits), its queue_threads row locked FOR UPDATE SKIP LOCKED; NULL when none. Threads
-- holding a live lease are never walked (issue 12): the unleased ones come from indexes that
-- hold only them (queue_threads_{,tenant_,kind_}lease_idx), and the ones whose
-- lease expired from the lease-expiry index (an expired one is taken only when it comes before
-- the first unleased one). With kinds, each kind's first unleased head is read from its index
-- (one probe per kind, unlocked), the first of them is then locked SKIP LOCKED, and a taken one
-- is skipped. Heads of full tenants and kinds are walked past (they wait; the limits' cost).
-- SPEC §15 change (issue 27): kinds, priority and the full lists; was (now, any_tenant, tenant,
-- skip) ordered by head_entry_id.
DROP FUNCTION IF EXISTS _dg_lease_pick(timestamptz, boolean, text, text[]);
CREATE OR REPLACE FUNCTION _dg_lease_pick(
    p_now timestamptz, p_any_tenant boolean, p_tenant text, p_skip text[], p_kinds text[],
    p_full_tenants text[], p_full_kinds text[]) RETURNS text
LANGUAGE plpgsql VOLATILE
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
        -- The first expired lease in lease order, unlocked (a hint; + 0 keeps the planner on
        -- the expiry index, which holds only leased threads). One statement per tenant case, as
        -- below: an OR on the tenant parameters made every call plan it anew (custom plans fold
        -- the OR, so the plan cache never settled on its generic plan); these stay generic and
        -- index-bounded (issue 25). The kind and limit filters are not index conditions here.
        IF p_any_tenant THEN
            SELECT q.thread_id, q.head_priority_key, q.head_entry_id
              INTO v_exp_thread, v_exp_key, v_exp_head FROM queue_threads q
             WHERE q.lease_expires_at <= p_now AND q.head_entry_id IS NOT NULL
               AND (p_kinds IS NULL OR q.head_kind = ANY (p_kinds))
               AND (q.head_tenant IS NULL OR q.head_tenant <> ALL (p_full_tenants))
               AND q.head_kind <> ALL (p_full_kinds)
               AND q.thread_id <> ALL (p_skip)
             ORDER BY q.head_priority_key + 0, q.head_entry_id + 0 LIMIT 1;
        ELSIF p_tenant IS NULL THEN
            SELECT q.thread_id, q.head_priority_key, q.head_entry_id
              INTO v_exp_thread, v_exp_key, v_exp_head FROM queue_threads q
             WHERE q.lease_expires_at <= p_now AND q.head_entry_id IS NOT NULL
               AND q.head_tenant IS NULL
               AND (p_kinds IS NULL OR q.head_kind = ANY (p_kinds))
               AND q.head_kind <> ALL (p_full_kinds)
               AND q.thread_id <> ALL (p_skip)
             ORDER BY q.head_priority_key + 0, q.head_entry_id + 0 LIMIT 1;
        ELSE
            SELECT q.thread_id, q.head_priority_key, q.head_entry_id
              INTO v_exp_thread, v_exp_key, v_exp_head FROM queue_threads q
             WHERE q.lease_expires_at <= p_now AND q.head_entry_id IS NOT NULL
               AND q.head_tenant = p_tenant AND q.head_tenant <> ALL (p_full_tenants)
               AND (p_kinds IS NULL OR q.head_kind = ANY (p_kinds))
               AND q.head_kind <> ALL (p_full_kinds)
               AND q.thread_id <> ALL (p_skip)
             ORDER BY q.head_priority_key + 0, q.head_entry_id + 0 LIMIT 1;
        END IF;
        v_thread := NULL;
        IF p_kinds IS NULL THEN
            -- Every kind: the lease-order index, locked as it is walked.
            IF p_any_tenant THEN
                SELECT q.thread_id INTO v_thread FROM queue_threads q
                 WHERE q.head_entry_id IS NOT NULL AND q.lease_expires_at IS NULL
                   AND (v_exp_head IS NULL
                        OR (q.head_priority_key, q.head_entry_id) < (v_exp_key, v_exp_head))
                   AND (q.head_tenant IS NULL OR q.head_tenant <> ALL (p_full_tenants))
                   AND q.head_kind <> ALL (p_full_kinds)
                   AND q.thread_id <> ALL (p_skip)
                 ORDER BY q.head_priority_key, q.head_entry_id LIMIT 1
                 FOR UPDATE SKIP LOCKED;
            ELSIF p_tenant IS NULL THEN
                SELECT q.thread_id INTO v_thread FROM queue_threads q
                 WHERE q.head_entry_id IS NOT NULL AND q.lease_expires_at IS NULL
                   AND q.head_tenant IS NULL
                   AND (v_exp_head IS NULL
                        OR (q.head_priority_key, q.head_entry_id) < (v_exp_key, v_exp_head))
                   AND q.head_kind <> ALL (p_full_kinds)
                   AND q.thread_id <> ALL (p_skip)
                 ORDER BY q.head_priority_key, q.head_entry_id LIMIT 1
                 FOR UPDATE SKIP LOCKED;
            ELSIF p_tenant <> ALL (p_full_tenants) THEN
                SELECT q.thread_id INTO v_thread FROM queue_threads q
                 WHERE q.head_entry_id IS NOT NULL AND q.lease_expires_at IS NULL
                   AND q.head_tenant = p_tenant
                   AND (v_exp_head IS NULL
                        OR (q.head_priority_key, q.head_entry_id) < (v_exp_key, v_exp_head))
                   AND q.head_kind <> ALL (p_full_kinds)
                   AND q.thread_id <> ALL (p_skip)
                 ORDER BY q.head_priority_key, q.head_entry_id LIMIT 1
                 FOR UPDATE SKIP LOCKED;
            END IF;
        ELSE
            -- Served kinds: the first unleased head of each kind (one index probe a kind), the
            -- first of those (a hint), then locked if still unleased.
            SELECT c.thread_id, c.head_priority_key, c.head_entry_id INTO v_thread, v_key, v_head
              FROM pg_catalog.unnest(p_kinds) AS k(kind)
             CROSS JOIN LATERAL (
                   SELECT q.thread_id, q.head_priority_key, q.head_entry_id FROM queue_threads q
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
                PERFORM 1 FROM queue_threads q
                  WHERE q.thread_id = v_thread AND q.head_entry_id = v_head
                    AND q.lease_expires_at IS NULL
                  FOR UPDATE SKIP LOCKED;
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
        SELECT q.thread_id INTO v_thread FROM queue_threads q
         WHERE q.thread_id = v_exp_thread AND q.head_entry_id IS NOT NULL
           AND q.lease_expires_at <= p_now
           AND (p_any_tenant OR q.head_tenant IS NOT DISTINCT FROM p_tenant)
         FOR UPDATE SKIP LOCKED;
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

-- dg_lease_v1: lease the oldest available thread head. A thread is available when its head
-- (queue order over every tenant: attempted, then INTERRUPT, then the rest, by entry id) is the
-- wanted tenant's (p_any_tenant, or tenant IS NOT DISTINCT FROM p_tenant) and no entry of the
-- thread holds a live lease. Candidates are picked from queue_threads by head entry id and
-- locked FOR UPDATE SKIP LOCKED (workers never queue behind one row), then re-verified under
-- the locks with store-now read once they are held. Issues a new token,
-- expiry = store-now + p_ttl, and ends the expired lease of every other entry of the thread.
-- With p_run_id it also does what dg_record_attempt_v1 does (the lease and the attempt count in
-- one UPDATE of the entry) and reports it in attempt_kind / attempt_number ('started' n,
-- 'exhausted', 'thread_deleted'); both NULL when no run id was given or it was taken (the lease
-- is still taken). No row when nothing is available. Raises DG000.
-- (Its row gained not_before and retry_of at the end: the return type changed.)
-- SPEC §15 (issue 27; added at the end, with a default): heads are taken in lease order
-- (priority, highest first, then entry id; within a thread §5's order is unchanged); p_kinds
-- (NULL: every kind; else 1..100 distinct identifiers) takes only heads of those kinds; a head
-- whose tenant or kind is at its concurrency limit (queue_limits) waits (_dg_lease_limits,
-- sql/72_scheduling.sql). The row gained priority and kind at the end.
DROP FUNCTION IF EXISTS dg_lease_v1(text, interval, boolean, text, text);
DROP FUNCTION IF EXISTS dg_lease_v1(text, interval, boolean, text, text, text[]);
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
    v_now timestamptz;
    v_pick timestamptz;
    v_skip text[] := '{}';
    v_thread text;
    h queue_entries;
    v_leases timestamptz;
    v_token bigint;
    v_kind text;
    v_number integer;
    -- SPEC §15 (issue 27): tenants and kinds found at their limit during this call, and
    -- whether this call holds a limit row's lock (then it waits for no other: _dg_lease_limits).
    v_full_tenants text[] := '{}';
    v_full_kinds text[] := '{}';
    v_limited boolean := false;
    v_full text;
    v_locked boolean;
    v_free boolean;
BEGIN
    -- Every argument in one inline test; when it fails, the helpers name the bad one.
    IF (pg_catalog.octet_length(p_holder) BETWEEN 1 AND 512 AND p_any_tenant IS NOT NULL
        AND coalesce(pg_catalog.octet_length(p_tenant) BETWEEN 1 AND 512, true)
        AND coalesce(pg_catalog.octet_length(p_run_id) BETWEEN 1 AND 512, true)) IS NOT TRUE THEN
        PERFORM _dg_id(p_holder, 'holder');
        PERFORM _dg_not_null(p_any_tenant IS NOT NULL, 'any_tenant');
        PERFORM _dg_opt_id(p_tenant, 'tenant');
        PERFORM _dg_opt_id(p_run_id, 'run_id');
    END IF;
    PERFORM _dg_not_null(p_ttl IS NOT NULL, 'ttl');
    p_ttl := _dg_duration(p_ttl, 'ttl', false);
    IF p_kinds IS NOT NULL THEN
        PERFORM _dg_kinds(p_kinds, 'kinds');  -- SPEC §15 (sql/72_scheduling.sql)
    END IF;
    -- Picking reads a first clock (it never waits: SKIP LOCKED); the lease's own time is read
    -- again once the thread row and the head entry are locked (they can wait on a commit or
    -- delete), and the pick is re-verified with it, so the lease never starts before its wait.
    v_pick := store_now();
    LOOP
        v_thread := _dg_lease_pick(v_pick, p_any_tenant, p_tenant, v_skip, p_kinds,
                                   v_full_tenants, v_full_kinds);
        IF v_thread IS NULL THEN
            RETURN;
        END IF;
        SELECT q.lease_expires_at INTO v_leases FROM queue_threads q WHERE q.thread_id = v_thread;
        IF p_run_id IS NOT NULL THEN
            PERFORM _dg_share_thread(v_thread);
        END IF;
        SELECT * INTO h FROM queue_entries e
         WHERE e.thread_id = v_thread AND e.outcome_kind IS NULL
         ORDER BY e.queue_rank, e.entry_id LIMIT 1
         FOR UPDATE;
        v_now := store_now();
        -- v_leases: the queue_threads row says no entry of the thread holds a lease token
        -- (NULL), so there is none to check or end. The live-lease probe is a statement of its
        -- own, reached only when v_leases is set (in one expression with the ORs on variables
        -- it was planned anew on every call; issue 25).
        v_free := FOUND
              AND (p_any_tenant OR h.tenant IS NOT DISTINCT FROM p_tenant)
              AND (p_kinds IS NULL OR h.kind = ANY (p_kinds))  -- SPEC §15
              AND (h.not_before IS NULL OR h.not_before <= v_now);  -- delayed (SPEC §13)
        IF v_free AND v_leases IS NOT NULL THEN
            v_free := NOT EXISTS (SELECT 1 FROM queue_entries o
                                   WHERE o.thread_id = v_thread AND o.outcome_kind IS NULL
                                     AND o.lease_token IS NOT NULL
                                     AND v_now < o.lease_expires_at);
        END IF;
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

    IF v_leases IS NOT NULL THEN
        -- The attempt of an expired lease ended without a word: say why (issue 26 item 9).
        UPDATE queue_attempts a
           SET error = pg_catalog.to_json('lease expired: worker ' || o.lease_holder
                                          || ' stopped renewing')::text
          FROM queue_entries o
         WHERE o.thread_id = v_thread AND o.outcome_kind IS NULL AND o.lease_token IS NOT NULL
           AND a.entry_id = o.entry_id AND a.number = o.attempt_count AND a.error IS NULL;
        -- End the (expired) lease of every other entry of the thread.
        UPDATE queue_entries o
           SET lease_token = NULL, lease_holder = NULL, lease_expires_at = NULL,
               lease_ttl = NULL
         WHERE o.thread_id = v_thread AND o.outcome_kind IS NULL AND o.entry_id <> h.entry_id
           AND o.lease_token IS NOT NULL;
    END IF;
    v_token := pg_catalog.nextval('fencing_token_seq');
    IF p_run_id IS NOT NULL THEN
        v_kind := _dg_attempt_verdict(h, p_run_id);
    END IF;
    IF v_kind = 'thread_deleted' THEN
        -- Leased and closed at once: the entry's own lease columns end up NULL.
        PERFORM _dg_close_entry(h.entry_id, 'cancelled', '"thread_deleted"', v_now);
        PERFORM _dg_refresh_queue_thread(v_thread);
    ELSE
        IF v_kind = 'started' THEN
            v_number := h.attempt_count + 1;
            INSERT INTO queue_attempts (entry_id, number, thread_id, run_id, started_at)
            VALUES (h.entry_id, v_number, v_thread, p_run_id, v_now);
        ELSIF v_kind = 'taken' THEN
            v_kind := NULL;  -- the lease is still taken; no attempt is reported
        END IF;
        -- The lease and the attempt count in one UPDATE of the entry (one new row version).
        UPDATE queue_entries e
           SET lease_token = v_token, lease_holder = p_holder, lease_expires_at = v_now + p_ttl,
               lease_ttl = p_ttl, attempt_count = coalesce(v_number, h.attempt_count)
         WHERE e.entry_id = h.entry_id;
        -- What _dg_refresh_queue_thread would compute: h stays the head (an attempt only moves
        -- it forward in queue order) and holds the thread's only lease token.
        UPDATE queue_threads q
           SET head_entry_id = h.entry_id, head_tenant = h.tenant,
               lease_expires_at = v_now + p_ttl,
               head_priority_key = -h.priority, head_kind = h.kind  -- SPEC §15
         WHERE q.thread_id = v_thread;
    END IF;
    RETURN QUERY
    -- The lease and attempt columns, then not_before and retry_of last (added at the end).
    SELECT x.entry_id, x.tenant, x.thread_id, x.key, x.input, x.mode, x.max_attempts, x.attempts,
           x.admitted, x.thread_deleted, x.submitted_at, x.lease_holder, x.lease_expires_at,
           x.outcome_kind, x.outcome_detail, x.closed_at, x.closed_at_seq,
           v_token, p_holder, v_now + p_ttl, p_ttl, v_kind, v_number, x.not_before, x.retry_of, x.priority, x.kind
      FROM _dg_entry(h.entry_id) x;
END;
$$;
