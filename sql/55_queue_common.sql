-- Helpers shared by the run-queue functions (SPEC §5). Lock order everywhere: threads row ->
-- queue_entries rows. The thread's row is its queue lock too: its queue head and its lease live
-- on it (migration 0018, D224), beside its head checkpoint and claim.

-- _dg_attempt_json(number, run_id, started_at, error): one attempt as _dg_attempts lists it.
CREATE OR REPLACE FUNCTION _dg_attempt_json(p_number integer, p_run_id text,
                                            p_started_at timestamptz, p_error text) RETURNS json
LANGUAGE sql STABLE
AS $$
    SELECT pg_catalog.json_build_object('number', p_number, 'run_id', p_run_id,
                                        'started_at', _dg_iso(p_started_at),
                                        'error', p_error::json)
$$;

-- _dg_attempts(entry_id): one row, the entry's attempts as a json array
-- [{"number", "run_id", "started_at", "error"}] by number ("error": the stored JSON string). _dg_attempts and _dg_entry are STABLE SQL
-- set-returning functions without SET, so that the planner inlines them into the calling
-- statement (whose plan PL/pgSQL caches). (_dg_attempts replaces the scalar _dg_attempts_json
-- of earlier versions, which was planned on every call.)
CREATE OR REPLACE FUNCTION _dg_attempts(p_entry_id bigint) RETURNS TABLE (attempts json)
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(pg_catalog.json_agg(_dg_attempt_json(a.number, a.run_id, a.started_at, a.error)
                                        ORDER BY a.number),
                    '[]'::json)
      FROM queue_attempts a WHERE a.entry_id = p_entry_id
$$;

-- _dg_last_attempt(entry_id): one row, the number of the entry's last attempt (0 when none):
-- its attempt count (attempts are numbered 1, 2, ... and never removed while the entry is kept;
-- migration 0017), one backward probe of queue_attempts' primary key. Set-returning, so that it
-- is inlined into the calling statement (CROSS JOIN LATERAL), as _dg_run_taken is.
CREATE OR REPLACE FUNCTION _dg_last_attempt(p_entry_id bigint) RETURNS TABLE (number integer)
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(pg_catalog.max(a.number), 0) FROM queue_attempts a
     WHERE a.entry_id = p_entry_id
$$;

-- _dg_entry(entry_id): the entry row of sql/README.md (no row when unknown). not_before and
-- retry_of (SPEC §13), then priority and kind (SPEC §15) come last: columns added at the end keep
-- positional readers working. lease_holder and lease_expires_at are the thread row's lease when
-- it is this open entry's (migrations 0017, 0018: the lease's one home), else NULL.
CREATE OR REPLACE FUNCTION _dg_entry(p_entry_id bigint)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint, not_before timestamptz, retry_of bigint,
               priority integer, kind text)
LANGUAGE sql STABLE
AS $$
    SELECT e.entry_id, e.tenant, e.thread_id, e.key, e.input, e.mode, e.max_attempts,
           a.attempts, e.admitted, e.thread_deleted, e.submitted_at,
           l.lease_holder, l.lease_until, e.outcome_kind, e.outcome_detail, e.closed_at,
           e.closed_at_seq, e.not_before, e.retry_of, e.priority, e.kind
      FROM queue_entries e
      LEFT JOIN threads l
        ON l.thread_id = e.thread_id AND l.lease_entry_id = e.entry_id AND e.outcome_kind IS NULL
     CROSS JOIN LATERAL _dg_attempts(e.entry_id) a
     WHERE e.entry_id = p_entry_id
$$;

-- _dg_list_place(thread_id, mode): (open_since, list_after) of an entry of p_mode submitted to
-- the thread now (D65, migrations/0009.listing_place.sql): the stretch of the thread's open
-- entries goes on, and an INTERRUPT goes right behind an attempted non-INTERRUPT head; both NULL
-- when the thread has no open entry. One step down queue_entries_open_idx. The caller holds the
-- thread's lock.
CREATE OR REPLACE FUNCTION _dg_list_place(p_thread_id text, p_mode text,
                                          OUT open_since bigint, OUT list_after bigint)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    SELECT coalesce(h.open_since, h.entry_id),
           CASE WHEN p_mode = 'interrupt'
                     AND EXISTS (SELECT 1 FROM queue_attempts a WHERE a.entry_id = h.entry_id)
                     AND (h.list_after IS NOT NULL OR h.mode <> 'interrupt')
                THEN coalesce(h.list_after, h.entry_id) END
      INTO open_since, list_after
      FROM queue_entries h
     WHERE h.thread_id = p_thread_id AND h.outcome_kind IS NULL
     ORDER BY h.queue_rank, h.entry_id LIMIT 1;
END;
$$;

-- _dg_queue_head(thread_id, closing, end_lease, now): one row, the thread's queue head and
-- lease as its thread row keeps them (migration 0018), computed from its open entries: the head
-- (queue order over every tenant) other than p_closing (an entry the calling statement closes:
-- its snapshot still sees it open), its tenant, minus its priority and its kind (lease order,
-- SPEC §15); when the thread can next be leased (expires: the later of its lease's expiry and a
-- delayed head's not_before still after p_now, SPEC §13); and the lease (D222, D223: the entry
-- holding the thread's one lease token, its expiry, token, holder, ttl, kind and tenant) as the
-- row holds it, unless p_end_lease (release, defer, a close of its entry: the lease ends
-- without a new one) or its entry is closed or p_closing. All NULL when no entry is left open.
-- Reads only; an SQL set-returning function, inlined into the statement that writes the row
-- (the caller holds its lock).
CREATE OR REPLACE FUNCTION _dg_queue_head(p_thread_id text, p_closing bigint,
                                          p_end_lease boolean, p_now timestamptz)
RETURNS TABLE (entry_id bigint, tenant text, priority_key integer, kind text,
               expires timestamptz, lease_entry_id bigint, lease_until timestamptz,
               lease_token bigint, lease_holder text, lease_ttl interval, lease_kind text,
               lease_tenant text)
LANGUAGE sql STABLE
AS $$
    SELECT h.entry_id, h.tenant, -h.priority, h.kind,
           greatest(l.lease_until, CASE WHEN h.not_before > p_now THEN h.not_before END),
           l.lease_entry_id, l.lease_until, l.lease_token, l.lease_holder, l.lease_ttl,
           l.lease_kind, l.lease_tenant
      FROM (SELECT) one
      LEFT JOIN LATERAL (SELECT e.entry_id, e.tenant, e.not_before, e.priority, e.kind
                           FROM queue_entries e
                          WHERE e.thread_id = p_thread_id AND e.outcome_kind IS NULL
                            AND e.entry_id IS DISTINCT FROM p_closing
                          ORDER BY e.queue_rank, e.entry_id LIMIT 1) h ON true
      LEFT JOIN threads l
        ON l.thread_id = p_thread_id AND NOT p_end_lease
       AND l.lease_entry_id IS DISTINCT FROM p_closing
       AND EXISTS (SELECT 1 FROM queue_entries le
                    WHERE le.entry_id = l.lease_entry_id AND le.outcome_kind IS NULL)
$$;

-- _dg_due_threads(now): the threads with an open entry that could not be leased until some time
-- no later than p_now (their lease_expires_at): those whose lease expired (from
-- threads_leases_idx: every lease, by expiry) and those whose delayed head came due (from
-- threads_delayed_idx: unleased threads by not_before, SPEC §13), with what the pick orders and
-- filters them by. Two index ranges, neither of which holds a thread leasable now or a live
-- lease's (migration 0018: the leases' index is also what the concurrency limits count, so a
-- lease writes one index entry where it wrote two). An SQL set-returning function, inlined into
-- the pick's statements.
CREATE OR REPLACE FUNCTION _dg_due_threads(p_now timestamptz)
RETURNS TABLE (thread_id text, head_priority_key integer, head_entry_id bigint,
               head_tenant text, head_kind text)
LANGUAGE sql STABLE
AS $$
    SELECT q.thread_id, q.head_priority_key, q.head_entry_id, q.head_tenant, q.head_kind
      FROM threads q
     WHERE q.lease_until <= p_now AND q.lease_expires_at <= p_now
    UNION ALL
    SELECT q.thread_id, q.head_priority_key, q.head_entry_id, q.head_tenant, q.head_kind
      FROM threads q
     WHERE q.lease_until IS NULL AND q.head_entry_id IS NOT NULL
       AND q.lease_expires_at <= p_now
$$;

-- _dg_refresh_queue_thread(thread_id, end_lease, release_claim): write the thread row's queue
-- head and lease as _dg_queue_head computes them (p_end_lease: the lease ends) and, when
-- p_release_claim, end its claim (a finish without a commit, a cancel: the caller decided under
-- the row's lock), in one UPDATE: one row version where a release and a refresh were two. The
-- row is left alone when nothing moved. The caller holds the row's lock. (Until migration 0018
-- the queue row was deleted when no entry was left open; the thread row stays, its queue
-- columns NULL.)
CREATE OR REPLACE FUNCTION _dg_refresh_queue_thread(p_thread_id text,
                                                    p_end_lease boolean DEFAULT false,
                                                    p_release_claim boolean DEFAULT false)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
    UPDATE threads q
       SET head_entry_id = n.entry_id, head_tenant = n.tenant, lease_expires_at = n.expires,
           head_priority_key = n.priority_key, head_kind = n.kind,
           lease_entry_id = n.lease_entry_id, lease_until = n.lease_until,
           lease_kind = n.lease_kind, lease_tenant = n.lease_tenant,
           lease_token = n.lease_token, lease_holder = n.lease_holder, lease_ttl = n.lease_ttl,
           claim_token = CASE WHEN p_release_claim THEN NULL ELSE q.claim_token END,
           claim_holder = CASE WHEN p_release_claim THEN NULL ELSE q.claim_holder END,
           claim_expires_at = CASE WHEN p_release_claim THEN NULL ELSE q.claim_expires_at END,
           claim_ttl = CASE WHEN p_release_claim THEN NULL ELSE q.claim_ttl END
      FROM _dg_queue_head(p_thread_id, NULL, p_end_lease, store_now()) n
     WHERE q.thread_id = p_thread_id
       AND ((p_release_claim AND q.claim_token IS NOT NULL)
            OR (q.head_entry_id, q.head_tenant, q.lease_expires_at, q.head_priority_key,
                q.head_kind, q.lease_entry_id, q.lease_until)
               IS DISTINCT FROM (n.entry_id, n.tenant, n.expires, n.priority_key, n.kind,
                                 n.lease_entry_id, n.lease_until))
$$;

-- _dg_queue_rank(mode): an entry's place in queue order at submit (migration 0016): 1 for an
-- INTERRUPT, 2 for the rest; 0 (attempted) is written by the functions that can otherwise let
-- an entry pass an attempted one (dg_submit_v1's INTERRUPT, dg_record_attempt_v1). Inlined.
CREATE OR REPLACE FUNCTION _dg_queue_rank(p_mode text) RETURNS smallint
LANGUAGE sql IMMUTABLE
AS $$ SELECT CASE WHEN p_mode = 'interrupt' THEN 1 ELSE 2 END::smallint $$;

-- _dg_close_entry(entry_id, kind, detail, now): close once: outcome, closed_at, closed_at_seq
-- (the thread's last event number, a tombstone's after a delete, 0 when none; D20). The lease
-- ends with it (D19): the caller holds the thread row's lock and refreshes its queue columns,
-- which drops the lease of a closed entry (migrations 0017, 0018: the lease lives on that row).
CREATE OR REPLACE FUNCTION _dg_close_entry(
    p_entry_id bigint, p_kind text, p_detail text, p_now timestamptz) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    UPDATE queue_entries e
       SET outcome_kind = p_kind, outcome_detail = p_detail, closed_at = p_now,
           closed_at_seq = coalesce((SELECT t.last_seq FROM threads t
                                      WHERE t.thread_id = e.thread_id), 0)
     WHERE e.entry_id = p_entry_id;
END;
$$;

-- _dg_run_taken(thread_id, run_id): one row, whether the run id names a checkpoint of the thread
-- or an attempt of one of its entries (rule 20's 'taken'); false for no run id. A STABLE SQL
-- set-returning function without SET, so that the planner inlines it into the statement that
-- locks the head (sql/70_lease.sql; a scalar SQL function holding a sub-select is not inlined).
CREATE OR REPLACE FUNCTION _dg_run_taken(p_thread_id text, p_run_id text)
RETURNS TABLE (taken boolean)
LANGUAGE sql STABLE
AS $$
    SELECT p_run_id IS NOT NULL
           AND (EXISTS (SELECT 1 FROM checkpoints c
                         WHERE c.run_id = p_run_id AND c.thread_id = p_thread_id)
                OR EXISTS (SELECT 1 FROM queue_attempts a
                            WHERE a.thread_id = p_thread_id AND a.run_id = p_run_id))
$$;

-- _dg_attempt_verdict(entry, attempts, taken): rule 20's decision, after the lease checks, for
-- an entry whose thread row and own row the caller holds, attempts being its
-- attempt count (_dg_last_attempt) and taken _dg_run_taken(entry's thread, run id), both read
-- under those locks; writes nothing: 'thread_deleted' (delete-marked: the caller closes it
-- cancelled("thread_deleted")), 'exhausted' (max_attempts recorded), 'taken' (the run id names a
-- checkpoint of the thread or an attempt of a kept entry of the thread), else 'started' (the
-- caller records attempt attempts + 1).
CREATE OR REPLACE FUNCTION _dg_attempt_verdict(e queue_entries, p_attempts integer,
                                               p_taken boolean) RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE WHEN e.thread_deleted THEN 'thread_deleted'
                WHEN p_attempts >= e.max_attempts THEN 'exhausted'
                WHEN p_taken THEN 'taken'
                ELSE 'started' END
$$;

-- _dg_lock_lease(entry_id, token, tenant): lock the entry of a lease call (its thread's row,
-- then the entry) and check rule 21: closed, reclaimed or another tenant's entry (the tenant of
-- the caller's lease; SPEC §10 rule 6: answered exactly as an id that never existed) -> DG103,
-- then token not the entry's current lease -> DG102. Returns the entry (o_entry), its lease from
-- the thread row (o_token, o_holder, o_ttl: the lease's one home, migrations 0017, 0018) and its
-- attempt count (o_attempts, _dg_last_attempt), read in the statement that locks the entry,
-- under the thread row's lock.
CREATE OR REPLACE FUNCTION _dg_lock_lease(
    p_entry_id bigint, p_token bigint, p_tenant text,
    OUT o_entry queue_entries, OUT o_token bigint, OUT o_holder text, OUT o_ttl interval,
    OUT o_attempts integer)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_thread text;
    r record;
BEGIN
    SELECT thread_id INTO v_thread FROM queue_entries
     WHERE entry_id = p_entry_id AND tenant IS NOT DISTINCT FROM p_tenant;
    IF FOUND THEN
        -- The thread row, then the entry (lock order), with the thread row's lease read under
        -- its lock. (Every open entry's thread has a row: submit writes its head there.)
        PERFORM 1 FROM threads t WHERE t.thread_id = v_thread FOR UPDATE;
        SELECT x AS entry, t.lease_token, t.lease_holder, t.lease_ttl, n.number INTO r
          FROM queue_entries x
          LEFT JOIN threads t ON t.thread_id = x.thread_id AND t.lease_entry_id = x.entry_id
         CROSS JOIN LATERAL _dg_last_attempt(x.entry_id) n
         WHERE x.entry_id = p_entry_id
           FOR UPDATE OF x;
        o_entry := r.entry;
    END IF;
    IF (o_entry).entry_id IS NULL OR (o_entry).outcome_kind IS NOT NULL
       OR (o_entry).tenant IS DISTINCT FROM p_tenant THEN
        RAISE EXCEPTION 'entry % is closed', p_entry_id USING ERRCODE = 'DG103';
    END IF;
    IF NOT coalesce(r.lease_token = p_token, false) THEN
        RAISE EXCEPTION 'lease is not the current lease of entry %', p_entry_id
            USING ERRCODE = 'DG102';
    END IF;
    o_token := r.lease_token;
    o_holder := r.lease_holder;
    o_ttl := r.lease_ttl;
    o_attempts := r.number;
END;
$$;
